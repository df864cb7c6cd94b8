package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Tool describes a tool (MCP tools/list).
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema is the JSON Schema of the tool's arguments. AddTool
	// derives it from its argument type when it is nil; HandleTool sends
	// {"type":"object"} when it is nil.
	InputSchema json.RawMessage
}

// ToolHandler answers a tools/call with the call's raw arguments (nil when
// the host sent none).
//
// The result is sent as it is: build one with TextResult or ErrorResult.
// A returned error becomes an isError result whose text is the error's
// text, since a failed tool is something the model reads and can act on;
// only a returned *protocol.Error is sent as that JSON-RPC error instead. A
// panic becomes a JSON-RPC internal error, with the stack logged.
//
// Each call runs in a goroutine of its own, so calls run concurrently with
// each other and with the connection's other messages. ctx carries the
// Conn (ConnFromContext), and ends when the connection does, or when the
// host cancels the call (MCP's notifications/cancelled): then
// context.Cause(ctx) matches ErrCancelled and gives the host's reason,
// and what the handler returns is not sent, as the host reads no answer
// to a request it cancelled. A handler with long work watches ctx.
type ToolHandler func(ctx context.Context, args json.RawMessage) (protocol.CallToolResult, error)

type tool struct {
	def     protocol.Tool
	handler ToolHandler
}

// HandleTool adds a tool with a handler that decodes its own arguments. A
// tool of the same name is replaced. It panics when t has no name or h is
// nil.
func (s *Server) HandleTool(t Tool, h ToolHandler) {
	if t.Name == "" || h == nil {
		panic("server: HandleTool needs a tool name and a handler")
	}
	schema := t.InputSchema
	if schema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	tl := &tool{
		def:     protocol.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema},
		handler: h,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byName[t.Name]; ok {
		*old = *tl
		return
	}
	s.byName[t.Name] = tl
	s.tools = append(s.tools, tl)
}

// AddTool adds a tool whose arguments decode into In, a struct whose
// exported fields name the arguments by their json tags. When t has no
// InputSchema, one is derived from In (see SchemaFor). Arguments that do
// not decode into In are answered with an isError result saying so, which
// the model can correct; the handler is not called. See ToolHandler for
// how results, errors and concurrency work.
func AddTool[In any](s *Server, t Tool, h func(ctx context.Context, in In) (protocol.CallToolResult, error)) {
	if t.InputSchema == nil {
		t.InputSchema = SchemaFor[In]()
	}
	name := t.Name
	s.HandleTool(t, func(ctx context.Context, args json.RawMessage) (protocol.CallToolResult, error) {
		var in In
		if len(args) > 0 && string(args) != "null" {
			if err := json.Unmarshal(args, &in); err != nil {
				return ErrorResult(fmt.Sprintf("The arguments for %s are not valid: %v.", name, err)), nil
			}
		}
		return h(ctx, in)
	})
}

// TextResult returns a tool result of one text block.
func TextResult(text string) protocol.CallToolResult { return protocol.TextResult(text, false) }

// ErrorResult returns a tool result of one text block with isError set: the
// tool ran and failed, and the text says how.
func ErrorResult(text string) protocol.CallToolResult { return protocol.TextResult(text, true) }

// listTools answers tools/list: every tool, in the order added, in one
// page (no nextCursor).
func (s *Server) listTools() protocol.ListToolsResult {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := protocol.ListToolsResult{Tools: make([]protocol.Tool, 0, len(s.tools))}
	for _, t := range s.tools {
		out.Tools = append(out.Tools, t.def)
	}
	return out
}

// callTool answers tools/call. An unknown tool is a JSON-RPC error
// (-32602), as MCP has it; the handler runs in its own goroutine.
func (c *Conn) callTool(ctx context.Context, req *wire.Request) (any, error) {
	var p protocol.CallToolParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Name == "" {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: tools/call params are not an object with a tool name"}
	}
	c.s.mu.RLock()
	t := c.s.byName[p.Name]
	var h ToolHandler
	if t != nil {
		h = t.handler
	}
	c.s.mu.RUnlock()
	if h == nil {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: fmt.Sprintf("Unknown tool: there is no tool named %q", p.Name)}
	}
	c.goCancellable(ctx, req, func(ctx context.Context) (any, error) { return c.runTool(ctx, p, h) })
	return nil, nil
}

// runTool runs a tool handler and turns what it returns into the answer.
func (c *Conn) runTool(ctx context.Context, p protocol.CallToolParams, h ToolHandler) (result any, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("tool handler panicked", slog.String("tool", p.Name),
				slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			result, err = nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "internal error"}
		}
	}()
	res, err := h(ctx, p.Arguments)
	if err != nil {
		var we *protocol.Error
		if errors.As(err, &we) {
			return nil, we
		}
		return ErrorResult(err.Error()), nil
	}
	if res.Content == nil {
		res.Content = []json.RawMessage{} // MCP requires the array
	}
	return res, nil
}
