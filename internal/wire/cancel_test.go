package wire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// wire names MCP's methods itself, as it imports nothing above it; they
// are protocol's.
func TestCancelMethodsAreProtocols(t *testing.T) {
	if wire.MethodCancelled != protocol.MethodCancelled || wire.MethodInitialize != protocol.MethodInitialize {
		t.Errorf("wire names %q and %q, protocol %q and %q",
			wire.MethodCancelled, wire.MethodInitialize, protocol.MethodCancelled, protocol.MethodInitialize)
	}
	// What the peer writes decodes as protocol's params.
	var p protocol.CancelledParams
	if err := json.Unmarshal([]byte(`{"requestId":7,"reason":"why"}`), &p); err != nil || string(p.RequestID) != "7" || p.Reason != "why" {
		t.Errorf("CancelledParams = %+v, %v", p, err)
	}
}

// A call its caller abandons after it was written is cancelled on the
// other side: one notifications/cancelled naming its id, before the call
// returns. The answer that comes anyway is dropped quietly, and the next
// call goes on as usual.
func TestCancelledWhenCallerAbandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, far, rec := pipePeer(t, wire.Options{Timeout: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Call(ctx, "tools/call", map[string]string{"name": "slow"}, nil) }()
		m := far.mustRead()
		cancel()
		callError(t, <-errc, wire.NoResponse, wire.CauseCanceled)
		far.mustCancelled(m.ID, reasonAbandoned)

		// The answer comes anyway: dropped, at debug.
		far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, m.ID)
		var res struct{ N int }
		go func() { errc <- p.Call(t.Context(), "next", nil, &res) }()
		next := far.mustRead() // the next message is the next call: one cancellation only
		if next.Method != "next" {
			t.Fatalf("far end read %s, want the next call", next.raw)
		}
		far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"n":3}}`, next.ID)
		if err := <-errc; err != nil || res.N != 3 {
			t.Fatalf("the call after a cancellation = %d, %v", res.N, err)
		}
		r := rec.One(t, "late answer to an abandoned request dropped")
		if r.Level != slog.LevelDebug {
			t.Errorf("the late answer logged at %v, want debug", r.Level)
		}
		wantAttrs(t, rec.One(t, "cancellation sent"), map[string]any{"method": "tools/call", "id": 1, "reason": reasonAbandoned})
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 0 {
			t.Errorf("a cancellation logged warnings: %v", got)
		}
	})
}

// A call whose own deadline passes is cancelled with the deadline as its
// reason: WithTimeout's, or the connection's Options.Timeout.
func TestCancelledWhenDeadlinePasses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		def    time.Duration
		opts   []wire.CallOption
		reason string
	}{
		{"WithTimeout", 0, []wire.CallOption{wire.WithTimeout(time.Second)}, reasonWithin1s},
		{"Options.Timeout", 1500 * time.Millisecond, nil, "no answer within 1.5s"},
		{"30s", 0, []wire.CallOption{wire.WithTimeout(30 * time.Second)}, "no answer within 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, far, _ := pipePeer(t, wire.Options{Timeout: tc.def})
				errc := make(chan error, 1)
				go func() { errc <- p.Call(t.Context(), "tools/call", nil, nil, tc.opts...) }()
				m := far.mustRead()
				callError(t, <-errc, wire.NoResponse, wire.CauseDeadline)
				far.mustCancelled(m.ID, tc.reason)
				go func() { errc <- p.Call(t.Context(), "next", nil, nil) }()
				if next := far.mustRead(); next.Method != "next" {
					t.Fatalf("far end read %s, want the next call", next.raw)
				}
			})
		})
	}
}

// initialize is never cancelled, whether its caller gives up or its
// deadline passes.
func TestInitializeNeverCancelled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []wire.CallOption
		cause wire.Cause
	}{
		{"caller gives up", nil, wire.CauseCanceled},
		{"deadline", []wire.CallOption{wire.WithTimeout(time.Second)}, wire.CauseDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, far, rec := pipePeer(t, wire.Options{})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				errc := make(chan error, 1)
				go func() { errc <- p.Call(ctx, protocol.MethodInitialize, nil, nil, tc.opts...) }()
				far.mustRead()
				if tc.cause == wire.CauseCanceled {
					cancel()
				}
				callError(t, <-errc, wire.NoResponse, tc.cause)
				go func() { errc <- p.Call(t.Context(), "next", nil, nil) }()
				if next := far.mustRead(); next.Method != "next" {
					t.Fatalf("far end read %s after initialize was abandoned, want the next call", next.raw)
				}
				if len(rec.Find("cancellation sent")) != 0 {
					t.Error("initialize was cancelled")
				}
			})
		})
	}
}

// holdingStream holds each write of a message containing marker until its
// context ends, as a transport that takes none of it does.
type holdingStream struct {
	transport.Stream
	marker string
}

func (s *holdingStream) Write(ctx context.Context, msg []byte) error {
	if strings.Contains(string(msg), s.marker) {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Stream.Write(ctx, msg)
}

// A call that never went out is not cancelled: its caller gave up while
// it waited to be written, or the transport refused it.
func TestNoCancelForCallNeverWritten(t *testing.T) {
	t.Run("caller gave up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := transport.Pipe(0)
			p, _ := newPeer(t, &holdingStream{Stream: a, marker: `"held"`}, wire.Options{})
			far := &farEnd{t: t, s: b}
			t.Cleanup(func() { b.Close() })
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- p.Call(ctx, "held", nil, nil) }()
			synctest.Wait()
			cancel()
			callError(t, <-errc, wire.NotSent, wire.CauseCanceled)
			go func() { errc <- p.Call(t.Context(), "next", nil, nil) }()
			if next := far.mustRead(); next.Method != "next" {
				t.Fatalf("far end read %s, want the next call", next.raw)
			}
		})
	})
	t.Run("write refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := transport.Pipe(0)
			rs := &refusingStream{Stream: a}
			rs.refuse.Store(true)
			p, _ := newPeer(t, rs, wire.Options{})
			far := &farEnd{t: t, s: b}
			t.Cleanup(func() { b.Close() })
			callError(t, p.Call(t.Context(), "refused", nil, nil), wire.NotSent, wire.CauseWriteFailed)
			rs.refuse.Store(false)
			errc := make(chan error, 1)
			go func() { errc <- p.Call(t.Context(), "next", nil, nil) }()
			if next := far.mustRead(); next.Method != "next" {
				t.Fatalf("far end read %s, want the next call", next.raw)
			}
		})
	})
}

// A call the connection's end answers is not cancelled: there is no one
// left to tell.
func TestNoCancelWhenConnectionEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause wire.Cause
	}{
		{"the other side ends it", wire.CauseClosed},
		{"this side closes it", wire.CauseClosedHere},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := transport.Pipe(0)
				var mu sync.Mutex
				var written []string
				tap := &tapStream{Stream: a, onWrite: func(msg []byte) {
					mu.Lock()
					defer mu.Unlock()
					written = append(written, string(msg))
				}}
				p, rec := newPeer(t, tap, wire.Options{})
				far := &farEnd{t: t, s: b}
				t.Cleanup(func() { b.Close() })
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				errc := make(chan error, 1)
				go func() { errc <- p.Call(ctx, "tools/call", nil, nil) }()
				far.mustRead()
				if tc.cause == wire.CauseClosed {
					b.Close()
				} else {
					p.Close()
				}
				callError(t, <-errc, wire.NoResponse, tc.cause)
				cancel() // after the end: changes nothing
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if len(written) != 1 {
					t.Errorf("wrote %q, want the call alone", written)
				}
				if len(rec.Find("cancellation sent")) != 0 {
					t.Error("a call the close answered was cancelled")
				}
			})
		})
	}
}

// A cancellation the other side takes none of holds its caller for
// CancelWrite at most, is dropped with an info line, and leaves the
// connection open: a bound that short says nothing of whether the other
// side still reads.
func TestCancelWriteBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := transport.Pipe(0)
		p, rec := newPeer(t, &holdingStream{Stream: a, marker: wire.MethodCancelled}, wire.Options{})
		far := &farEnd{t: t, s: b}
		t.Cleanup(func() { b.Close() })
		errc := make(chan error, 1)
		start := time.Now()
		go func() { errc <- p.Call(t.Context(), "tools/call", nil, nil, wire.WithTimeout(time.Second)) }()
		far.mustRead()
		callError(t, <-errc, wire.NoResponse, wire.CauseDeadline)
		if took := time.Since(start); took != time.Second+wire.CancelWrite {
			t.Errorf("the call took %v, want its 1s deadline and %v for its cancellation", took, wire.CancelWrite)
		}
		r := rec.One(t, "cancellation not sent; the other side may still work on the request")
		wantAttrs(t, r, map[string]any{"method": "tools/call", "id": 1})
		if r.Level != slog.LevelInfo {
			t.Errorf("logged at %v, want info", r.Level)
		}
		var res struct{ N int }
		go func() { errc <- p.Call(t.Context(), "next", nil, &res) }()
		next := far.mustRead()
		far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"n":1}}`, next.ID)
		if err := <-errc; err != nil || res.N != 1 {
			t.Fatalf("the call after a dropped cancellation = %d, %v", res.N, err)
		}
	})
}

// Against the real test server, whose handler knows no
// notifications/cancelled: the call hanging there is cancelled, the
// server takes the notification as any it does not know, and the
// connection goes on.
func TestCancelRealServer(t *testing.T) {
	proc := spawnProc(t, transport.StdioOptions{})
	s, hangWritten := writtenWhen(proc, `"name":"hang"`)
	s, sent := writtenWhen(s, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"`+reasonAbandoned+`"}}`)
	p, _ := newPeer(t, s, wire.Options{})
	initialize(t, p)
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := callTool(ctx, p, "hang", nil)
		errc <- err
	}()
	select {
	case <-hangWritten:
	case <-time.After(15 * time.Second):
		t.Fatal("the call was not written")
	}
	cancel()
	callError(t, <-errc, wire.NoResponse, wire.CauseCanceled)
	select {
	case <-sent:
	default:
		t.Fatal("the call returned before its cancellation was written")
	}
	echo(t, p, "after the cancellation")
}

// ErrNoReply sends no answer, returned by a handler or given to a
// deferred reply, and the request counts as answered: the observer hears
// "unanswered", and a connection the other side ends does not wait for
// it.
func TestErrNoReplySendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := newObserved()
		replies := make(chan func(any, error), 1)
		p, far, _ := pipePeer(t, wire.Options{Observer: obs, Handler: wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
			switch r.Method {
			case "now":
				return map[string]int{"n": 1}, wire.ErrNoReply
			case "later":
				replies <- r.Defer()
				return nil, nil
			}
			return map[string]int{}, nil
		})})
		far.send(`{"jsonrpc":"2.0","id":1,"method":"now"}`)
		far.send(`{"jsonrpc":"2.0","id":2,"method":"later"}`)
		(<-replies)(map[string]int{"n": 2}, fmt.Errorf("cancelled: %w", wire.ErrNoReply))
		far.send(`{"jsonrpc":"2.0","id":3,"method":"next"}`)
		if m := far.mustRead(); string(m.ID) != "3" {
			t.Fatalf("far end read %s, want the answer to 3 alone", m.raw)
		}
		got := obs.wait(t, 3)
		want := []string{"answered now unanswered", "answered later unanswered", "answered next ok"}
		if !slices.Equal(got, want) {
			t.Errorf("observed %q, want %q", got, want)
		}
		// Nothing is owed: the connection ends at once when the other
		// side ends it (no owedGrace wait).
		start := time.Now()
		far.s.Close()
		<-p.Done()
		if took := time.Since(start); took != 0 {
			t.Errorf("the connection took %v to end, want no wait for an owed answer", took)
		}
	})
}
