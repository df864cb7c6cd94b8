// Package protocol holds the MCP and MCPL wire types, method names and error
// codes, and the JSON-RPC error object (Error): pure data, no I/O. Readers
// are tolerant (unknown fields are ignored; json.RawMessage keeps what is
// not yet understood); writers send only what the specifications define.
//
// It is public, for server authors and embedders alike: the types a server
// sends and receives, and the error a handler returns or a failed request
// wraps.
package protocol

import (
	"bytes"
	"encoding/json"
)

// MCP methods this host uses.
const (
	MethodInitialize       = "initialize"
	MethodInitialized      = "notifications/initialized"
	MethodToolsList        = "tools/list"
	MethodToolsCall        = "tools/call"
	MethodToolsListChanged = "notifications/tools/list_changed"
	// MethodCancelled is MCP's notifications/cancelled: the side that sent
	// a request has abandoned it (CancelledParams). initialize is never
	// cancelled.
	MethodCancelled = "notifications/cancelled"
)

// CancelledParams are notifications/cancelled's params: the id of the
// request abandoned, as it was sent, and why, for the log.
type CancelledParams struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason,omitempty"`
}

// ProtocolVersion is the oldest MCP revision, the one SPEC.md's examples
// name; Versions lists every one this host speaks.
const ProtocolVersion = Version20241105

// Implementation names a client or server.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InitializeParams is the host's initialize request.
type InitializeParams struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ClientCapabilities `json:"capabilities"`
	ClientInfo      Implementation     `json:"clientInfo"`
}

// ClientCapabilities is what the host advertises.
type ClientCapabilities struct {
	Experimental map[string]json.RawMessage `json:"experimental,omitempty"`
}

// InitializeResult is a server's answer to initialize. Real servers omit
// protocolVersion or serverInfo; both are optional here.
type InitializeResult struct {
	ProtocolVersion string             `json:"protocolVersion,omitempty"`
	Capabilities    ServerCapabilities `json:"capabilities"`
	ServerInfo      *Implementation    `json:"serverInfo,omitempty"`
	Instructions    string             `json:"instructions,omitempty"`
}

// ServerCapabilities is what a server advertises. Experimental holds the
// MCPL advertisement under "mcpl", kept raw until it is parsed.
//
// A malformed experimental member (not an object) does not fail the
// decode: Experimental is then nil (a plain MCP server) and
// ExperimentalInvalid says what was wrong, for the log.
type ServerCapabilities struct {
	Tools        json.RawMessage            `json:"tools,omitempty"`
	Experimental map[string]json.RawMessage `json:"experimental,omitempty"`
	// ExperimentalInvalid is set when experimental was present and not a
	// JSON object (or null); it is never encoded.
	ExperimentalInvalid string `json:"-"`
}

// UnmarshalJSON decodes capabilities, tolerating a malformed experimental
// member.
func (c *ServerCapabilities) UnmarshalJSON(b []byte) error {
	var raw struct {
		Tools        json.RawMessage `json:"tools,omitempty"`
		Experimental json.RawMessage `json:"experimental,omitempty"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = ServerCapabilities{Tools: raw.Tools}
	if len(raw.Experimental) == 0 || string(raw.Experimental) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw.Experimental, &c.Experimental); err != nil {
		c.Experimental = nil
		c.ExperimentalInvalid = "capabilities.experimental is not a JSON object of members"
	}
	return nil
}

// MCPL returns the raw MCPL advertisement, or nil for a plain MCP server.
func (c ServerCapabilities) MCPL() json.RawMessage {
	if raw, ok := c.Experimental["mcpl"]; ok && string(raw) != "null" {
		return raw
	}
	return nil
}

// Tool is one entry of tools/list. OutputSchema (2025-06-18 and later)
// is the schema its structuredContent must match; Annotations are hints
// (readOnlyHint, destructiveHint, idempotentHint, openWorldHint, title)
// kept as sent: a host shows them to its operator and trusts none of them.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// ListToolsParams pages through tools/list.
type ListToolsParams struct {
	Cursor string `json:"cursor,omitempty"`
}

// ListToolsResult is one page of tools/list.
type ListToolsResult struct {
	Tools      []Tool `json:"tools"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// CallToolParams is a tools/call request. Meta carries request metadata
// such as a progressToken.
type CallToolParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      map[string]any  `json:"_meta,omitempty"`
}

// MethodProgress is MCP's progress notification.
const MethodProgress = "notifications/progress"

// ToolArguments returns a tools/call's arguments as they are sent: a JSON
// object as it is, none (empty, or null) as {}. Arguments that are JSON
// but not an object are not sent (MCP's arguments are an object): kind
// then says what they are ("an array", "a string", "a number", "true or
// false"), and args is nil. raw must be valid JSON or empty.
func ToolArguments(raw json.RawMessage) (args json.RawMessage, kind string) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{}`), ""
	}
	switch t[0] {
	case '{':
		return raw, ""
	case '[':
		return nil, "an array"
	case '"':
		return nil, "a string"
	case 't', 'f':
		return nil, "true or false"
	}
	return nil, "a number"
}

// CallToolResult is a tools/call answer. Content blocks are kept raw: the
// content layer classifies them.
type CallToolResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError,omitempty"`
}

// TextContent is a text block.
type TextContent struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// Text returns the text of every text block, joined by newlines
// (JoinText).
func (r CallToolResult) Text() string { return JoinText(r.Content) }

// JoinText returns the text of every text block in blocks, joined by
// newlines; blocks of other types, and what is not a block, are skipped.
// It is the one text extractor every lane uses. Each block reads as
// json.Unmarshal into a TextContent reads it (blockText).
func JoinText(blocks []json.RawMessage) string {
	var out []byte
	for _, raw := range blocks {
		text, ok := blockText(raw)
		if !ok {
			continue
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, text...)
	}
	return string(out)
}

// TextResult returns a result holding one text block.
func TextResult(text string, isError bool) CallToolResult {
	b, _ := json.Marshal(TextContent{Type: "text", Text: text})
	return CallToolResult{Content: []json.RawMessage{b}, IsError: isError}
}
