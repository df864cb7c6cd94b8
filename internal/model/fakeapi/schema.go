package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpl-go/mcpl/internal/model/schema"
)

// The servers check the tools' schemas of every request as the hosted
// APIs do (the schema package's rules, internal/model/schema), and refuse
// the whole request for one tool's schema, as they do: a schema the
// schema package would repair is refused too, since the API refuses it
// as it is, so a test through a provider shows that the host repaired it
// before sending.

// refuseSchemas answers a request whose tools' schemas the provider
// refuses with the provider's HTTP 400, records the message, and reports
// true; it reports false, and writes nothing, for a request it takes.
func (s *Server) refuseSchemas(w http.ResponseWriter, body []byte) bool {
	var msg string
	var write func()
	if s.path == "/v1/chat/completions" {
		i, name, e := openaiSchemaRefusal(body)
		if e == nil {
			return false
		}
		msg = fmt.Sprintf("Invalid schema for function '%s': In context=(%s), %s.", name, openaiContext(e.Path), openaiPhrase(e))
		write = func() {
			writeJSON(w, http.StatusBadRequest, obj{"error": obj{"message": msg, "type": "invalid_request_error",
				"param": fmt.Sprintf("tools[%d].function.parameters", i), "code": "invalid_function_parameters"}})
		}
	} else {
		i, e := anthropicSchemaRefusal(body)
		if e == nil {
			return false
		}
		msg = fmt.Sprintf("tools.%d.custom.input_schema: %s", i, anthropicPhrase(e))
		write = func() { anthropicFailure(w, http.StatusBadRequest, msg) }
	}
	s.mu.Lock()
	s.schemaRefusals = append(s.schemaRefusals, msg)
	s.changedLocked()
	s.mu.Unlock()
	write()
	return true
}

// SchemaRefusals returns the messages of the requests refused for their
// tools' schemas, in order.
func (s *Server) SchemaRefusals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.schemaRefusals...)
}

// openaiSchemaRefusal is the first function tool whose parameters OpenAI
// refuses: its index and name, and the rule. A function with no
// parameters is taken (the API reads it as one with none).
func openaiSchemaRefusal(body []byte) (int, string, *schema.Error) {
	var req struct {
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return 0, "", nil // the shape is not this check's to judge
	}
	for i, tl := range req.Tools {
		p := tl.Function.Parameters
		if tl.Type != "function" || len(p) == 0 || string(p) == "null" {
			continue
		}
		if e := schema.OpenAIRefusal(p); e != nil {
			return i, tl.Function.Name, e
		}
	}
	return 0, "", nil
}

// anthropicSchemaRefusal is the first custom tool whose input_schema
// Anthropic refuses, a missing one included: its index and the rule.
// Server tools (a type other than custom) have no input_schema.
func anthropicSchemaRefusal(body []byte) (int, *schema.Error) {
	var req struct {
		Tools []struct {
			Type        string          `json:"type"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return 0, nil
	}
	for i, tl := range req.Tools {
		if tl.Type != "" && tl.Type != "custom" {
			continue
		}
		if len(tl.InputSchema) == 0 {
			return i, &schema.Error{Rule: "field-required", Detail: "Field required"}
		}
		if e := schema.AnthropicRefusal(tl.InputSchema); e != nil {
			return i, e
		}
	}
	return 0, nil
}

// openaiContext is a path as OpenAI's messages show it: ('properties',
// 'content'); "" for the top level.
func openaiContext(path string) string {
	if path == "" {
		return ""
	}
	parts := strings.Split(path, ".")
	for i, p := range parts {
		parts[i] = "'" + p + "'"
	}
	return strings.Join(parts, ", ")
}

// openaiPhrase is the rule broken in OpenAI's words where they are
// known, else the schema package's.
func openaiPhrase(e *schema.Error) string {
	switch e.Rule {
	case schema.RuleArrayItems:
		return "array schema missing items"
	case schema.RuleObjectProperties:
		return "object schema missing properties"
	case schema.RuleTopObject, schema.RuleTopType:
		return "schema must be a JSON Schema of 'type: \"object\"'"
	}
	return e.Detail + " (rule " + e.Rule + ")"
}

// anthropicPhrase is the rule broken in Anthropic's words where they are
// known, else the schema package's after Anthropic's general refusal.
func anthropicPhrase(e *schema.Error) string {
	switch e.Rule {
	case schema.RuleTopCombinator:
		return "input_schema does not support oneOf, allOf, or anyOf at the top level"
	case "field-required":
		return "Field required"
	}
	return "JSON schema is invalid. It must match JSON Schema draft 2020-12 (" + e.Error() + ")."
}
