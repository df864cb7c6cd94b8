package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

type greetArgs struct {
	Name  string `json:"name" jsonschema:"who to greet"`
	Times int    `json:"times,omitempty"`
}

func toolServer(t *testing.T) *host {
	s := server.New("tools", "1.0.0", &server.Options{Logger: quiet})
	server.AddTool(s, server.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, in greetArgs) (protocol.CallToolResult, error) {
			if _, ok := server.ConnFromContext(ctx); !ok {
				return server.ErrorResult("no conn in ctx"), nil
			}
			if in.Name == "" {
				return server.ErrorResult("Say who to greet."), nil
			}
			out := ""
			for range max(in.Times, 1) {
				out += "hello " + in.Name + "\n"
			}
			return server.TextResult(out), nil
		})
	server.AddTool(s, server.Tool{Name: "fail"}, func(context.Context, struct{}) (protocol.CallToolResult, error) {
		return protocol.CallToolResult{}, errors.New("the disk is full")
	})
	server.AddTool(s, server.Tool{Name: "rpcfail"}, func(context.Context, struct{}) (protocol.CallToolResult, error) {
		return protocol.CallToolResult{}, fmt.Errorf("wrapped: %w", &protocol.Error{Code: -32050, Message: "custom"})
	})
	server.AddTool(s, server.Tool{Name: "panic"}, func(context.Context, struct{}) (protocol.CallToolResult, error) {
		panic("boom")
	})
	server.AddTool(s, server.Tool{Name: "empty"}, func(context.Context, struct{}) (protocol.CallToolResult, error) {
		return protocol.CallToolResult{}, nil
	})
	s.HandleTool(server.Tool{Name: "raw", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{}}}`)},
		func(_ context.Context, args json.RawMessage) (protocol.CallToolResult, error) {
			return server.TextResult("args: " + string(args)), nil
		})
	h := start(t, s)
	h.initialize()
	return h
}

func callTool(h *host, name, args string) protocol.CallToolResult {
	h.t.Helper()
	var res protocol.CallToolResult
	p := protocol.CallToolParams{Name: name}
	if args != "" {
		p.Arguments = json.RawMessage(args)
	}
	h.call(protocol.MethodToolsCall, p, &res)
	return res
}

func TestTools(t *testing.T) {
	h := toolServer(t)
	for _, tc := range []struct {
		tool, args string
		text       string
		isError    bool
	}{
		{"greet", `{"name":"ada","times":2}`, "hello ada\nhello ada\n", false},
		{"greet", `{}`, "Say who to greet.", true},
		{"greet", ``, "Say who to greet.", true},
		{"greet", `{"name":42}`, "The arguments for greet are not valid: json: cannot unmarshal number into Go struct field greetArgs.name of type string.", true},
		{"fail", `{}`, "the disk is full", true},
		{"raw", `{"x":[1]}`, `args: {"x":[1]}`, false},
		{"empty", `{}`, "", false},
	} {
		res := callTool(h, tc.tool, tc.args)
		if res.Text() != tc.text || res.IsError != tc.isError {
			t.Errorf("%s(%s) = %q isError=%v, want %q isError=%v", tc.tool, tc.args, res.Text(), res.IsError, tc.text, tc.isError)
		}
	}
	var raw json.RawMessage
	h.call(protocol.MethodToolsCall, protocol.CallToolParams{Name: "empty"}, &raw)
	if want := `{"content":[]}`; string(raw) != want {
		t.Errorf("empty result = %s, want %s", raw, want)
	}

	for _, tc := range []struct {
		params any
		code   int64
	}{
		{protocol.CallToolParams{Name: "nope"}, protocol.CodeInvalidParams},
		{map[string]int{"name": 1}, protocol.CodeInvalidParams},
		{protocol.CallToolParams{Name: "rpcfail"}, -32050},
		{protocol.CallToolParams{Name: "panic"}, protocol.CodeInternalError},
	} {
		if ce := h.callErr(protocol.MethodToolsCall, tc.params); ce.Answer.Code != tc.code {
			t.Errorf("tools/call %+v: code %d, want %d", tc.params, ce.Answer.Code, tc.code)
		}
	}
}

func TestToolsList(t *testing.T) {
	h := toolServer(t)
	var res protocol.ListToolsResult
	h.call(protocol.MethodToolsList, struct{}{}, &res)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if fmt.Sprint(names) != "[greet fail rpcfail panic empty raw]" || res.NextCursor != "" {
		t.Errorf("tools = %v, cursor %q", names, res.NextCursor)
	}
	want := `{"type":"object","properties":{"name":{"type":"string","description":"who to greet"},"times":{"type":"integer"}},"required":["name"]}`
	if got := string(res.Tools[0].InputSchema); got != want {
		t.Errorf("greet schema:\ngot  %s\nwant %s", got, want)
	}
	if got := string(res.Tools[5].InputSchema); got != `{"type":"object","properties":{"x":{}}}` {
		t.Errorf("raw schema = %s, want the one given", got)
	}
	if got := string(res.Tools[1].InputSchema); got != `{"type":"object","properties":{}}` {
		t.Errorf("fail schema = %s", got)
	}
}

func TestToolsRunConcurrently(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	s := server.New("slow", "1.0.0", &server.Options{Logger: quiet})
	server.AddTool(s, server.Tool{Name: "block"}, func(ctx context.Context, _ struct{}) (protocol.CallToolResult, error) {
		close(started)
		select {
		case <-release:
			return server.TextResult("released"), nil
		case <-ctx.Done():
			return server.ErrorResult("connection ended"), nil
		}
	})
	server.AddTool(s, server.Tool{Name: "quick"}, func(context.Context, struct{}) (protocol.CallToolResult, error) {
		return server.TextResult("quick"), nil
	})
	h := start(t, s)
	h.initialize()
	blocked := make(chan protocol.CallToolResult, 1)
	go func() {
		var res protocol.CallToolResult
		h.peer.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "block"}, &res)
		blocked <- res
	}()
	waitClosed(t, started, "the blocking tool starting")
	if res := callTool(h, "quick", ""); res.Text() != "quick" {
		t.Errorf("quick = %q while another call is running", res.Text())
	}
	close(release)
	select {
	case res := <-blocked:
		if res.Text() != "released" {
			t.Errorf("block = %q", res.Text())
		}
	case <-time.After(waitFor):
		t.Fatal("the blocking tool never answered")
	}
}

// TestToolCtxEndsWithConnection: a tool still running when the host goes
// ends, and Serve waits for it.
func TestToolCtxEndsWithConnection(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan struct{})
	s := server.New("slow", "1.0.0", &server.Options{Logger: quiet})
	server.AddTool(s, server.Tool{Name: "wait"}, func(ctx context.Context, _ struct{}) (protocol.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		close(ended)
		return server.ErrorResult("gone"), nil
	})
	h := start(t, s)
	h.initialize()
	go h.peer.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "wait"}, nil)
	waitClosed(t, started, "the tool starting")
	h.peer.Close()
	select {
	case err := <-h.served:
		h.served <- err
		if !closed(ended) {
			t.Error("Serve returned before the tool did")
		}
	case <-time.After(waitFor):
		t.Fatal("Serve did not return")
	}
}

func TestHandleToolPanicsOnMisuse(t *testing.T) {
	s := server.New("x", "1", nil)
	defer func() {
		if recover() == nil {
			t.Error("HandleTool without a name did not panic")
		}
	}()
	s.HandleTool(server.Tool{}, func(context.Context, json.RawMessage) (protocol.CallToolResult, error) {
		return server.TextResult(""), nil
	})
}

func TestSchemaFor(t *testing.T) {
	type inner struct {
		A bool `json:"a"`
	}
	type Embedded struct {
		E string `json:"e"`
	}
	type node struct {
		Next *node `json:"next"`
	}
	type all struct {
		Embedded
		S      string            `json:"s"`
		Skip   string            `json:"-"`
		Opt    string            `json:"opt,omitzero"`
		Ptr    *int              `json:"ptr"`
		F      float64           `json:"f"`
		U      uint8             `json:"u"`
		List   []inner           `json:"list"`
		Bytes  []byte            `json:"bytes"`
		M      map[string]int    `json:"m"`
		Any    any               `json:"any"`
		Raw    json.RawMessage   `json:"raw"`
		When   time.Time         `json:"when"`
		Arr    [2]string         `json:"arr"`
		NoTag  int               // no tag: the Go name is the JSON name
		Nested map[string][]bool `json:"nested,omitempty"`
		//lint:ignore U1000 unexported, so left out of the schema: what this checks
		hidden int
	}
	for _, tc := range []struct {
		got, want string
	}{
		{string(server.SchemaFor[struct{}]()), `{"type":"object","properties":{}}`},
		{string(server.SchemaFor[map[string]any]()), `{"type":"object"}`},
		{string(server.SchemaFor[json.RawMessage]()), `{"type":"object"}`},
		{string(server.SchemaFor[*inner]()), `{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}`},
		{string(server.SchemaFor[node]()), `{"type":"object","properties":{"next":{}}}`},
		{string(server.SchemaFor[all]()), `{"type":"object","properties":{` +
			`"e":{"type":"string"},"s":{"type":"string"},"opt":{"type":"string"},"ptr":{"type":"integer"},` +
			`"f":{"type":"number"},"u":{"type":"integer"},` +
			`"list":{"type":"array","items":{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}},` +
			`"bytes":{"type":"string"},"m":{"type":"object"},"any":{},"raw":{},"when":{"type":"string"},` +
			`"arr":{"type":"array","items":{"type":"string"}},"NoTag":{"type":"integer"},"nested":{"type":"object"}},` +
			`"required":["e","s","f","u","list","bytes","m","any","raw","when","arr","NoTag"]}`},
	} {
		if tc.got != tc.want {
			t.Errorf("schema:\ngot  %s\nwant %s", tc.got, tc.want)
		}
	}
}
