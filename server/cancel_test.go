package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// blocker is a tool that runs until its ctx ends, then says why on ended,
// and answers anyway: an answer the SDK must not send for a call the
// host cancelled.
type blocker struct {
	started chan struct{}
	ended   chan error // context.Cause of the handler's ctx
}

func newBlocker(s *server.Server) *blocker {
	b := &blocker{started: make(chan struct{}, 8), ended: make(chan error, 8)}
	server.AddTool(s, server.Tool{Name: "block"}, func(ctx context.Context, _ struct{}) (protocol.CallToolResult, error) {
		b.started <- struct{}{}
		<-ctx.Done()
		b.ended <- context.Cause(ctx)
		return server.TextResult("finished after all"), nil
	})
	server.AddTool(s, server.Tool{Name: "echo"}, func(_ context.Context, in struct{ Text string }) (protocol.CallToolResult, error) {
		return server.TextResult(in.Text), nil
	})
	return b
}

func (b *blocker) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-b.started:
	case <-time.After(waitFor):
		t.Fatal("the tool handler did not start")
	}
}

func (b *blocker) waitEnded(t *testing.T) error {
	t.Helper()
	select {
	case err := <-b.ended:
		return err
	case <-time.After(waitFor):
		t.Fatal("the tool handler's ctx did not end")
		return nil
	}
}

// rawHost is a host driven by hand over a pipe: the test writes the
// messages and reads every one the server writes.
type rawHost struct {
	t *testing.T
	s transport.Stream
}

func startRaw(t *testing.T, s *server.Server) *rawHost {
	t.Helper()
	a, b := transport.Pipe(0)
	served := make(chan error, 1)
	go func() { served <- server.ServeStream(s, context.Background(), b) }()
	t.Cleanup(func() {
		a.Close()
		select {
		case <-served:
		case <-time.After(waitFor):
			t.Error("Serve did not return after the host closed")
		}
	})
	h := &rawHost{t: t, s: a}
	h.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	h.answer(`"init"`)
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return h
}

func (h *rawHost) send(line string) {
	h.t.Helper()
	if err := h.s.Write(context.Background(), []byte(line)); err != nil {
		h.t.Fatalf("host: write %s: %v", line, err)
	}
}

// answer reads the next message, which must be the answer to id, and
// returns its result.
func (h *rawHost) answer(id string) json.RawMessage {
	h.t.Helper()
	type result struct {
		msg []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		msg, err := h.s.Read()
		ch <- result{msg, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(waitFor):
		h.s.Close() // ends the read
		<-ch
		h.t.Fatalf("no answer to %s", id)
	}
	if r.err != nil {
		h.t.Fatalf("host: read: %v", r.err)
	}
	var m struct {
		ID     json.RawMessage
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.Unmarshal(r.msg, &m); err != nil || string(m.ID) != id || m.Error != nil {
		h.t.Fatalf("host read %s, want the answer to %s", r.msg, id)
	}
	return m.Result
}

// A tool call the host cancels with notifications/cancelled has its
// handler's ctx ended, with ErrCancelled and the host's reason as the
// cause; what the handler returns then is not sent, and the connection
// goes on. A cancellation naming no running request, or malformed, is
// ignored.
func TestHostCancelsToolCall(t *testing.T) {
	rec := logtest.New()
	conns := make(chan *server.Conn, 1)
	s := server.New("cancel", "1", &server.Options{Logger: rec.Logger(),
		OnConnect: func(_ context.Context, c *server.Conn) { conns <- c }})
	b := newBlocker(s)
	h := startRaw(t, s)
	c := recvConn(t, conns)

	h.send(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"block"}}`)
	b.waitStarted(t)
	if n := server.Running(c); n != 1 {
		t.Errorf("%d requests running, want 1", n)
	}
	// Ignored: no such request, a number where the running one's id is a
	// string, no id, params that are no object.
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-9"}}`)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"no id"}}`)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	h.answer("2")
	select {
	case err := <-b.ended:
		t.Fatalf("a cancellation for another request ended the handler's ctx: %v", err)
	default:
	}

	// The id as the host escaped it names the same request.
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call\u002d1","reason":"the user pressed stop"}}`)
	cause := b.waitEnded(t)
	if !errors.Is(cause, server.ErrCancelled) || cause.Error() != "cancelled by the host: the user pressed stop" {
		t.Errorf("cause = %v, want ErrCancelled with the host's reason", cause)
	}
	rec.Wait(t, "answer withheld: the host cancelled the request", 1)
	if n := server.Running(c); n != 0 {
		t.Errorf("%d requests running after the call ended, want 0", n)
	}
	wantLog(t, rec.One(t, "the host cancelled a request; its handler's ctx ends"),
		map[string]string{"method": "tools/call", "id": `"call-1"`, "reason": "the user pressed stop"})

	// The next message is the next call's answer: none for call-1.
	h.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
	var res protocol.CallToolResult
	if err := json.Unmarshal(h.answer("3"), &res); err != nil || res.Text() != "still here" {
		t.Fatalf("the call after a cancellation = %+v, %v", res, err)
	}
	// Finished: a cancellation now finds nothing to end.
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	h.send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	h.answer("4")
	if n := len(rec.Find("the host cancelled a request; its handler's ctx ends")); n != 1 {
		t.Errorf("%d cancellations acted on, want 1", n)
	}
}

// A cancellation without a reason gives ErrCancelled's own text.
func TestHostCancelsWithoutReason(t *testing.T) {
	s := server.New("cancel", "1", &server.Options{Logger: quiet})
	b := newBlocker(s)
	h := startRaw(t, s)
	h.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block"}}`)
	b.waitStarted(t)
	h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	if cause := b.waitEnded(t); cause == nil || cause.Error() != "cancelled by the host" {
		t.Errorf("cause = %v", cause)
	}
	h.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	h.answer("8")
}

// The host's own peer (package wire) abandoning a call, by its caller's
// ctx or by the call's deadline, ends the handler's ctx on the server: a
// handler the host abandoned no longer runs until the connection ends.
func TestHostAbandonEndsHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []wire.CallOption
		cancel bool
		reason string
		cause  wire.Cause
	}{
		{"caller gives up", nil, true, "the request was abandoned by its caller", wire.CauseCanceled},
		{"deadline", []wire.CallOption{wire.WithTimeout(200 * time.Millisecond)}, false, "no answer within 200ms", wire.CauseDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := logtest.New()
			conns := make(chan *server.Conn, 1)
			s := server.New("cancel", "1", &server.Options{Logger: rec.Logger(),
				OnConnect: func(_ context.Context, c *server.Conn) { conns <- c }})
			b := newBlocker(s)
			h := start(t, s)
			h.initialize()
			c := recvConn(t, conns)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				errc <- h.peer.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: "block"}, nil, tc.opts...)
			}()
			b.waitStarted(t)
			if tc.cancel {
				cancel()
			}
			var ce *wire.CallError
			if err := <-errc; !errors.As(err, &ce) || ce.Cause != tc.cause {
				t.Fatalf("the call = %v, want it abandoned (%d)", err, tc.cause)
			}
			cause := b.waitEnded(t)
			if want := "cancelled by the host: " + tc.reason; !errors.Is(cause, server.ErrCancelled) || cause.Error() != want {
				t.Errorf("cause = %v, want %q", cause, want)
			}
			// Withheld once untracked.
			rec.Wait(t, "answer withheld: the host cancelled the request", 1)
			if n := server.Running(c); n != 0 {
				t.Errorf("%d requests running after the call ended, want 0", n)
			}
			if res := callTool(h, "echo", `{"text":"after"}`); res.Text() != "after" {
				t.Errorf("the call after = %q", res.Text())
			}
		})
	}
}

// wantLog checks a log record's attributes by their printed form.
func wantLog(t *testing.T, r logtest.Record, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got := r.Attr(k); got != w {
			t.Errorf("log %q: %s = %s, want %s", r.Message, k, got, w)
		}
	}
}
