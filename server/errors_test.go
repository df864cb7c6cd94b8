package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// hostWords are what only a host's agent-facing texts say; a server built
// with the SDK never reads them.
var hostWords = []string{"this host", "whoever runs", "agent", "Check its effect"}

func wantNoHostWords(t *testing.T, err error) {
	t.Helper()
	for _, w := range hostWords {
		if strings.Contains(err.Error(), w) {
			t.Errorf("error %q talks like a host to an agent (%q)", err, w)
		}
	}
}

// TestRequestErrors: what a Conn's request to the host fails with, in the
// SDK's terms: errors.Is on each sentinel, errors.As to the host's error
// answer, and texts that are an operator's, never a host's words to an
// agent.
func TestRequestErrors(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	c := recvConn(t, conns)

	// Before the policy: refused here, nothing sent.
	_, err := c.RegisterChannels(context.Background(), protocol.ChannelDescriptor{ID: "general"})
	var ge *server.GrantError
	if !errors.As(err, &ge) || !errors.Is(err, server.ErrNoPolicy) || !errors.Is(err, server.ErrNotSent) ||
		errors.Is(err, server.ErrNoAnswer) || errors.Is(err, server.ErrConnectionClosed) {
		t.Errorf("before the policy: %v", err)
	}
	h.initialize()
	h.policy(allCaps, nil, nil)

	// The host goes: a request after it is not sent. (Serve's result is
	// put back for the test's cleanup.)
	h.peer.Close()
	served := <-h.served
	h.served <- served
	_, err = c.PushEvent(context.Background(), server.Event{FeatureSet: "chat.alerts", EventID: "e-1", Content: server.TextContent("hi")})
	if !errors.Is(err, server.ErrConnectionClosed) || !errors.Is(err, server.ErrNotSent) || errors.Is(err, server.ErrNoAnswer) {
		t.Errorf("after the host closed: %v; want ErrConnectionClosed and ErrNotSent", err)
	}
	if want := `push/event to "host" not sent: the connection is closed`; err.Error() != want {
		t.Errorf("text %q, want %q", err, want)
	}
	wantNoHostWords(t, err)
}

// TestErrorAnswerReachable: a host's JSON-RPC error answer is reached with
// errors.As, code, message and data, and the text is the operator's line.
func TestErrorAnswerReachable(t *testing.T) {
	s, conns := chatServer(nil)
	a, b := transport.Pipe(0)
	refuse := wire.HandlerFunc(func(context.Context, *wire.Request) (any, error) {
		return nil, protocol.NewError(protocol.CodeCapabilityDenied, "push/event rejected: capability \"pushEvents\" is not implemented by this host", map[string]string{"capability": "pushEvents"})
	})
	peer := wire.NewPeer(a, wire.Options{Name: "server", Handler: refuse, Logger: quiet, Timeout: waitFor})
	served := make(chan error, 1)
	go func() { served <- server.ServeStream(s, context.Background(), b) }()
	defer func() { peer.Close(); <-served }()
	c := recvConn(t, conns)
	var init protocol.InitializeResult
	if err := peer.Call(context.Background(), protocol.MethodInitialize, protocol.InitializeParams{}, &init); err != nil {
		t.Fatal(err)
	}
	var rec json.RawMessage
	if err := peer.Call(context.Background(), protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{EffectiveCapabilities: allCaps}, &rec); err != nil {
		t.Fatal(err)
	}
	<-c.Ready()
	_, err := c.PushEvent(context.Background(), server.Event{FeatureSet: "chat.alerts", Content: server.TextContent("hi")})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeCapabilityDenied || string(pe.Data) != `{"capability":"pushEvents"}` {
		t.Fatalf("error %v, want the host's -32002 with its data", err)
	}
	if errors.Is(err, server.ErrNotSent) || errors.Is(err, server.ErrNoAnswer) || errors.Is(err, server.ErrConnectionClosed) {
		t.Errorf("an error answer matches an outcome sentinel: %v", err)
	}
	if want := `push/event to "host": error -32002: push/event rejected: capability "pushEvents" is not implemented by this host`; err.Error() != want {
		t.Errorf("text %q, want %q", err, want)
	}
}

// TestClosedBeforeAnswer: a request the host never answers before the
// connection closes fails as no answer and a closed connection, in an
// operator's words.
func TestClosedBeforeAnswer(t *testing.T) {
	s, conns := chatServer(nil)
	a, b := transport.Pipe(0)
	got := make(chan struct{})
	silent := wire.HandlerFunc(func(_ context.Context, req *wire.Request) (any, error) {
		if req.Method == protocol.MethodChannelsRegister {
			req.Defer() // the host goes before it answers
			close(got)
		}
		return nil, nil
	})
	peer := wire.NewPeer(a, wire.Options{Name: "server", Handler: silent, Logger: quiet, Timeout: waitFor})
	served := make(chan error, 1)
	go func() { served <- server.ServeStream(s, context.Background(), b) }()
	c := recvConn(t, conns)
	var rec json.RawMessage
	if err := peer.Call(context.Background(), protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{EffectiveCapabilities: allCaps}, &rec); err != nil {
		t.Fatal(err)
	}
	<-c.Ready()
	errc := make(chan error, 1)
	go func() {
		_, err := c.RegisterChannels(context.Background(), protocol.ChannelDescriptor{ID: "general"})
		errc <- err
	}()
	<-got
	peer.Close()
	err := <-errc
	<-served
	if !errors.Is(err, server.ErrNoAnswer) || !errors.Is(err, server.ErrConnectionClosed) || errors.Is(err, server.ErrNotSent) {
		t.Errorf("error %v, want ErrNoAnswer and ErrConnectionClosed", err)
	}
	if want := `channels/register to "host": the connection closed before an answer`; err == nil || err.Error() != want {
		t.Errorf("text %v, want %q", err, want)
	}
	wantNoHostWords(t, err)
}

type ctxKey struct{}

// TestServeHTTPContextValues: the values of the HTTP request's context
// (a middleware's) reach a tool handler, and those of ServeConn's ctx do
// too.
func TestServeHTTPContextValues(t *testing.T) {
	s := server.New("values", "1", &server.Options{Logger: quiet})
	got := make(chan any, 2)
	server.AddTool(s, server.Tool{Name: "who"}, func(ctx context.Context, _ struct{}) (protocol.CallToolResult, error) {
		got <- ctx.Value(ctxKey{})
		return server.TextResult("ok"), nil
	})
	withUser := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, "ada")))
	})
	srv := httptest.NewServer(withUser)
	defer srv.Close()
	ws, err := transport.DialWebSocket(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), transport.WebSocketOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	peer := wire.NewPeer(ws, wire.Options{Name: "server", Logger: quiet, Timeout: waitFor})
	defer peer.Close()
	var res protocol.CallToolResult
	if err := peer.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "who"}, &res); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != "ada" {
		t.Errorf("the tool handler's ctx carries %v, want the request's value", v)
	}

	h := startCtx(t, context.WithValue(context.Background(), ctxKey{}, "grace"), s)
	h.call(protocol.MethodToolsCall, protocol.CallToolParams{Name: "who"}, &res)
	if v := <-got; v != "grace" {
		t.Errorf("over ServeConn, the tool handler's ctx carries %v, want Serve's value", v)
	}
}
