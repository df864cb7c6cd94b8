package host

import (
	"bytes"
	"encoding/json"
	"log/slog"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Structured results (MCP 2025-06-18 and later): a tool that declares an
// outputSchema promises structuredContent matching it. The host checks
// every such answer: one that breaks its schema is an error the agent
// reads plainly (textOutputSchemaBroken), the server's words and the
// validator's kept for the operator's log, since a result the server
// itself says is wrong is no result to act on. A declared schema this
// host can't compile is logged once per listing and leaves that tool's
// answers unchecked; an answer with no structuredContent at all is let
// through as its content says (servers of the earlier revisions, and some
// of these, send only content), logged at debug. A structured answer with
// no content blocks is shown to the agent as its JSON text, as the
// revision asks servers to do themselves. On a connection of an earlier
// revision none of this applies: those fields are not MCP there.

// structured reports whether revision v has structured output (2025-06-18
// and later): before it, outputSchema and structuredContent are no part
// of the protocol, and a server's are not read.
func structured(v string) bool { return v >= protocol.Version20250618 }

// outputSchemas compiles the declared output schemas of tools, by name;
// a schema that does not compile is logged and left out.
func outputSchemas(log *slog.Logger, server string, tools []protocol.Tool) map[string]*jsonschema.Resolved {
	var out map[string]*jsonschema.Resolved
	for _, t := range tools {
		if len(bytes.TrimSpace(t.OutputSchema)) == 0 || string(t.OutputSchema) == "null" {
			continue
		}
		var s jsonschema.Schema
		err := json.Unmarshal(t.OutputSchema, &s)
		var r *jsonschema.Resolved
		if err == nil {
			r, err = s.Resolve(nil)
		}
		if err != nil {
			log.Warn("a tool's outputSchema does not compile; its structured results are not checked",
				"server", server, "tool", wire.Cut(t.Name, 100), "error", wire.OneLine(err.Error(), 300))
			continue
		}
		if out == nil {
			out = map[string]*jsonschema.Resolved{}
		}
		out[t.Name] = r
	}
	return out
}

// checkStructured checks res against schema (nil: nothing declared). It
// returns the validator's words when the answer breaks it, or "".
func checkStructured(log *slog.Logger, server, tool string, schema *jsonschema.Resolved, res *protocol.CallToolResult) string {
	if schema == nil || res.IsError {
		return ""
	}
	raw := bytes.TrimSpace(res.StructuredContent)
	if len(raw) == 0 || string(raw) == "null" {
		log.Debug("the tool declares an outputSchema but its answer carries no structuredContent; its content is used", "server", server, "tool", tool)
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "structuredContent is not JSON: " + err.Error()
	}
	if err := schema.Validate(v); err != nil {
		return err.Error()
	}
	return ""
}

// structuredAsText gives a result with structuredContent and no content
// blocks one text block: the structured value's JSON.
func structuredAsText(res *protocol.CallToolResult) {
	raw := bytes.TrimSpace(res.StructuredContent)
	if len(res.Content) > 0 || len(raw) == 0 || string(raw) == "null" {
		return
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return
	}
	*res = protocol.CallToolResult{Content: protocol.TextResult(b.String(), false).Content, StructuredContent: res.StructuredContent}
}
