package transport_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

type shoutIn struct {
	Text string `json:"text" jsonschema:"the text to upper-case"`
}

// sdkHTTPServer serves the official Go SDK's Streamable HTTP handler, with
// one tool (shout), on 127.0.0.1.
func sdkHTTPServer(t *testing.T, opts *mcp.StreamableHTTPOptions) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "shout", Description: "Answers the text upper-cased."},
		func(ctx context.Context, req *mcp.CallToolRequest, in shoutIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// sdkSession drives a peer over a Streamable HTTP stream through
// initialize, tools/list and tools/call.
func sdkSession(t *testing.T, url string) *transport.StreamableHTTP {
	t.Helper()
	ctx := testCtx(t, testTimeout)
	s, err := transport.DialStreamableHTTP(ctx, url, transport.HTTPOptions{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	peer := wire.NewPeer(s, wire.Options{Name: "sdk", Logger: discardLogger})
	t.Cleanup(func() { peer.Close() })

	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}
	err = peer.Call(ctx, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "test", "version": "0"},
	}, &init)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if init.ProtocolVersion != "2025-11-25" || init.ServerInfo.Name != "sdk" {
		t.Fatalf("initialize result = %+v", init)
	}
	if err := peer.Notify(ctx, "notifications/initialized", map[string]any{}); err != nil {
		t.Fatalf("notifications/initialized: %v", err)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := peer.Call(ctx, "tools/list", map[string]any{}, &list); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "shout" {
		t.Fatalf("tools/list = %+v", list)
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := peer.Call(ctx, "tools/call", map[string]any{"name": "shout", "arguments": map[string]any{"text": "hello"}}, &res); err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].Text != "HELLO" {
		raw, _ := json.Marshal(res)
		t.Fatalf("tools/call result = %s", raw)
	}
	return s
}

// Against the official Go SDK's handler, answering in JSON bodies and in
// event streams, a peer over the stream initializes, lists the tools and
// calls one; the session id the server gave is kept.
func TestStreamableHTTPAgainstGoSDK(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{
		{"sse", nil},
		{"json", &mcp.StreamableHTTPOptions{JSONResponse: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := sdkSession(t, sdkHTTPServer(t, tc.opts))
			if s.SessionID() == "" {
				t.Error("no session id kept from the SDK server")
			}
		})
	}
}
