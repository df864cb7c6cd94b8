package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// fake is a plain MCP server the test drives by hand, over WebSocket on
// 127.0.0.1: it tells the test of each connection's initialize, tools/list
// and hanging tools/call as they arrive, and holds what the test asks it
// to hold. Each connection is numbered from 1.
type fake struct {
	t   testing.TB
	srv *httptest.Server
	url string

	lists chan *heldList // tools/list requests, while lists are held
	calls chan int       // each hang call's connection, as it arrives
	conns chan *fakeConn // each connection, as its initialize arrives

	mu        sync.Mutex
	n         int
	peers     []*wire.Peer
	holdInit  map[int]chan struct{} // connection number -> closed to answer its initialize
	holdLists bool
	dropInit  bool     // answer initialize, then close the connection at once
	tools     []string // what an unheld tools/list answers
	listed    int      // tools/list requests received
	inFlight  int      // tools/list requests not yet answered
	maxFlight int      // the most tools/list requests unanswered at once
}

// fakeConn is one connection to the fake server.
type fakeConn struct {
	n    int
	peer *wire.Peer
}

// heldList is a tools/list request the test answers.
type heldList struct {
	conn  int
	reply func(tools ...string)
}

func newFake(t testing.TB, tools ...string) *fake {
	t.Helper()
	f := &fake{
		t:        t,
		lists:    make(chan *heldList, 16),
		calls:    make(chan int, 16),
		conns:    make(chan *fakeConn, 64),
		holdInit: map[int]chan struct{}{},
		tools:    tools,
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.accept))
	f.url = "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/"
	t.Cleanup(f.close)
	return f
}

func (f *fake) accept(w http.ResponseWriter, r *http.Request) {
	ws, err := transport.AcceptWebSocket(w, r, transport.WebSocketOptions{PingInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return
	}
	f.mu.Lock()
	f.n++
	c := &fakeConn{n: f.n}
	c.peer = wire.NewPeer(ws, wire.Options{
		Name:    "host",
		Handler: wire.HandlerFunc(func(ctx context.Context, req *wire.Request) (any, error) { return f.serve(c, req) }),
		Logger:  slog.New(slog.DiscardHandler),
	})
	f.peers = append(f.peers, c.peer)
	f.mu.Unlock()
}

// holdInitialize holds connection n's initialize answer until release (or
// cleanup).
func (f *fake) holdInitialize(n int) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.holdInit[n] = ch
	f.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	f.t.Cleanup(release)
	return release
}

// holdListing makes every later tools/list wait for the test's answer,
// handed over on f.lists.
func (f *fake) holdListing() {
	f.mu.Lock()
	f.holdLists = true
	f.mu.Unlock()
}

// stats returns how many tools/list requests arrived, and the most that
// were unanswered at once.
func (f *fake) stats() (listed, maxInFlight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listed, f.maxFlight
}

func (f *fake) serve(c *fakeConn, req *wire.Request) (any, error) {
	switch req.Method {
	case protocol.MethodInitialize:
		select {
		case f.conns <- c:
		default: // a test that connects often need not read them all
		}
		f.mu.Lock()
		held := f.holdInit[c.n]
		f.mu.Unlock()
		if held != nil {
			<-held
		}
		res := map[string]any{
			"protocolVersion": protocol.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
			"serverInfo":      protocol.Implementation{Name: "fake", Version: "1.0.0"},
		}
		f.mu.Lock()
		drop := f.dropInit
		f.mu.Unlock()
		if drop {
			reply := req.Defer()
			go func() {
				reply(res, nil)
				c.peer.Close()
			}()
			return nil, nil
		}
		return res, nil
	case protocol.MethodInitialized:
		return nil, nil
	case protocol.MethodToolsList:
		f.mu.Lock()
		f.listed++
		f.inFlight++
		f.maxFlight = max(f.maxFlight, f.inFlight)
		held, tools := f.holdLists, f.tools
		f.mu.Unlock()
		reply := req.Defer()
		answer := func(names ...string) {
			f.mu.Lock()
			f.inFlight--
			f.mu.Unlock()
			var res protocol.ListToolsResult
			res.Tools = []protocol.Tool{}
			for _, n := range names {
				res.Tools = append(res.Tools, protocol.Tool{Name: n})
			}
			reply(res, nil)
		}
		if !held {
			answer(tools...)
			return nil, nil
		}
		f.lists <- &heldList{conn: c.n, reply: answer}
		return nil, nil
	case protocol.MethodToolsCall:
		var p protocol.CallToolParams
		json.Unmarshal(req.Params, &p)
		var a struct{ Text string }
		json.Unmarshal(p.Arguments, &a)
		switch p.Name {
		case "echo":
			return protocol.TextResult(fmt.Sprintf("conn %d: %s", c.n, a.Text), false), nil
		case "hang":
			req.Defer()
			f.calls <- c.n
			return nil, nil
		}
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "unknown tool: " + p.Name}
	}
	return nil, wire.ErrMethodNotFound
}

// nextList returns the next held tools/list request.
func (f *fake) nextList() *heldList {
	f.t.Helper()
	select {
	case l := <-f.lists:
		return l
	case <-time.After(waitFor):
		f.t.Fatal("no tools/list came")
	}
	return nil
}

// nextConn returns the next connection whose initialize arrived.
func (f *fake) nextConn() *fakeConn {
	f.t.Helper()
	select {
	case c := <-f.conns:
		return c
	case <-time.After(waitFor):
		f.t.Fatal("no connection came")
	}
	return nil
}

func (f *fake) close() {
	// Held initializes were released by their own cleanups, which run
	// before this one.
	f.mu.Lock()
	peers := f.peers
	f.mu.Unlock()
	for _, p := range peers {
		p.Close()
		<-p.Done()
	}
	f.srv.Close()
}

// roundTrip sends the host a request on c and waits for its answer: the
// host handles what a connection brings in order, so once this is
// answered, everything c sent before it has been handled.
func (c *fakeConn) roundTrip(t testing.TB) {
	t.Helper()
	err := c.peer.Call(context.Background(), "ping", nil, nil)
	var ce *wire.CallError
	if err != nil && !(asCallError(err, &ce) && ce.Outcome == wire.ErrorResponse) {
		t.Fatalf("ping: %v", err)
	}
}

// listChanged sends the host notifications/tools/list_changed.
func (c *fakeConn) listChanged(t testing.TB) {
	t.Helper()
	if err := c.peer.Notify(context.Background(), protocol.MethodToolsListChanged, nil); err != nil {
		t.Fatal(err)
	}
}

func asCallError(err error, target **wire.CallError) bool {
	ce, ok := err.(*wire.CallError)
	if ok {
		*target = ce
	}
	return ok
}
