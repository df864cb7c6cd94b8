package host_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type shoutArgs struct {
	Text string `json:"text" jsonschema:"the text to upper-case"`
}

// sdkHTTP serves the official Go SDK's Streamable HTTP handler on
// 127.0.0.1, with one tool (shout). While forget is set, the next POST
// carrying a session id is answered 404, as by a server that has dropped
// the session.
func sdkHTTP(t *testing.T) (url string, forget *atomic.Bool) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "sdkhttp", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "shout", Description: "Answers the text upper-cased."},
		func(ctx context.Context, req *mcp.CallToolRequest, in shoutArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	forget = &atomic.Bool{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" && forget.CompareAndSwap(true, false) {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		// The session the wrapper made the host forget was never
		// deleted: end it, and its goroutines, here.
		for ss := range server.Sessions() {
			ss.Close()
		}
	})
	return ts.URL + "/mcp", forget
}

// A server at an http:// URL is reached over Streamable HTTP: its tools
// are listed and called through the host.
func TestStreamableHTTPServer(t *testing.T) {
	url, _ := sdkHTTP(t)
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: web\nurl: "+url)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toolNames(h), " "); got != "web--shout" {
		t.Fatalf("Tools = %s", got)
	}
	wantOK(t, h, "web--shout", `{"text":"over http"}`, "OVER HTTP")
	st, _ := h.Server("web")
	if st.ServerInfo == nil || st.ServerInfo.Name != "sdkhttp" || !st.Connected {
		t.Errorf("server state = %+v", st)
	}
}

// A session the server has forgotten (404 for its id) ends the stream,
// and with reconnect on the host connects again with a new initialize,
// after which calls work.
func TestStreamableHTTPSessionExpiryReconnects(t *testing.T) {
	url, forget := sdkHTTP(t)
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: web\nurl: "+url+"\nreconnect: {enabled: true, initial: 10ms, max: 10ms}")); err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "web--shout", `{"text":"before"}`, "BEFORE")
	forget.Store(true)
	if _, err := call(t, h, "web--shout", `{"text":"lost"}`); err == nil {
		t.Fatal("a call on an expired session succeeded")
	}
	waitLog(t, rec, logReconnected, "web", 1)
	waitLog(t, rec, logListed, "web", 2)
	wantOK(t, h, "web--shout", `{"text":"after"}`, "AFTER")
}
