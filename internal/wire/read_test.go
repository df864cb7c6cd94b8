package wire_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// The reading role (read.go): a call reads its own answer when no one else
// reads. These tests run over transport.Pipe, whose read can be
// interrupted, so calls take the role; a stream that hides that leaves
// all the reading to the reader goroutine, and the same tests run over it.

// plainStream hides the stream's SetReadDeadline: the peer reads it from
// its reader goroutine alone.
type plainStream struct{ transport.Stream }

// bothReaders runs f over a pipe whose read the peer can interrupt, and
// over one it can't.
func bothReaders(t *testing.T, f func(t *testing.T, wrap func(transport.Stream) transport.Stream)) {
	t.Run("interruptible", func(t *testing.T) {
		f(t, func(s transport.Stream) transport.Stream { return s })
	})
	t.Run("reader goroutine only", func(t *testing.T) {
		f(t, func(s transport.Stream) transport.Stream { return plainStream{s} })
	})
}

// recordingHandler records the methods it is given and answers each
// request with its method.
type recordingHandler struct {
	mu   sync.Mutex
	seen []string
	got  chan string
}

func newRecordingHandler() *recordingHandler { return &recordingHandler{got: make(chan string, 16)} }

func (h *recordingHandler) Serve(_ context.Context, r *wire.Request) (any, error) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Method)
	h.mu.Unlock()
	h.got <- r.Method
	return r.Method, nil
}

func wrappedPipePeer(t *testing.T, wrap func(transport.Stream) transport.Stream, opts wire.Options) (*wire.Peer, *farEnd) {
	t.Helper()
	a, b := transport.Pipe(0)
	p, _ := newPeer(t, wrap(a), opts)
	t.Cleanup(func() { b.Close() })
	return p, &farEnd{t: t, s: b}
}

// Whoever reads hands on everything: with two calls waiting, a
// notification, a request and the answers (the later call's first) each
// reach the right place, in order.
func TestReaderHandsOnWhatItReads(t *testing.T) {
	bothReaders(t, func(t *testing.T, wrap func(transport.Stream) transport.Stream) {
		h := newRecordingHandler()
		p, far := wrappedPipePeer(t, wrap, wire.Options{Handler: h})
		type result struct {
			n   int
			err error
		}
		call := func(method string) <-chan result {
			ch := make(chan result, 1)
			go func() {
				var res struct{ N int }
				err := p.Call(testCtx(t), method, nil, &res)
				ch <- result{res.N, err}
			}()
			return ch
		}
		a := call("a")
		ma := far.mustRead()
		b := call("b")
		mb := far.mustRead()
		far.send(`{"jsonrpc":"2.0","method":"note/one"}`)
		far.send(`{"jsonrpc":"2.0","id":"r1","method":"ask/one"}`)
		far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"n":2}}`, mb.ID)
		far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"n":1}}`, ma.ID)
		if r := <-b; r.err != nil || r.n != 2 {
			t.Errorf("call b = %d, %v; want 2", r.n, r.err)
		}
		if r := <-a; r.err != nil || r.n != 1 {
			t.Errorf("call a = %d, %v; want 1", r.n, r.err)
		}
		if m := far.mustRead(); string(m.ID) != `"r1"` || string(m.Result) != `"ask/one"` {
			t.Errorf("answer to the request: %s", m.raw)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.seen) != 2 || h.seen[0] != "note/one" || h.seen[1] != "ask/one" {
			t.Errorf("handler was given %q, want note/one then ask/one", h.seen)
		}
	})
}

// Between calls, what the other side sends unasked is still read: the
// reader goroutine takes the reading back once no call has waited for
// QuietAfter.
func TestUnaskedMessageBetweenCallsIsRead(t *testing.T) {
	bothReaders(t, func(t *testing.T, wrap func(transport.Stream) transport.Stream) {
		synctest.Test(t, func(t *testing.T) {
			h := newRecordingHandler()
			p, far := wrappedPipePeer(t, wrap, wire.Options{Handler: h})
			for i := range 3 {
				errc := make(chan error, 1)
				go func() { errc <- p.Call(t.Context(), "op", nil, nil) }()
				m := far.mustRead()
				far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
				if err := <-errc; err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			start := time.Now()
			far.send(`{"jsonrpc":"2.0","method":"note/after"}`)
			if got := <-h.got; got != "note/after" {
				t.Fatalf("handler was given %q", got)
			}
			if took := time.Since(start); took > wire.QuietAfter {
				t.Errorf("the notification was read after %v, want within %v", took, wire.QuietAfter)
			}
		})
	})
}

// A call reading for its own answer ends when its deadline passes, and
// when its context ends: at once after the first CtxPoll, within CtxPoll
// before (the price of arming no callback for an answer that comes
// quickly); the next call then reads (the role was put back). A call the
// reader goroutine reads for ends at once either way.
func TestCallEndsWhileReadingItsAnswer(t *testing.T) {
	tests := []struct {
		name  string
		after time.Duration // when ctx is canceled; 0: never
		opts  []wire.CallOption
		cause wire.Cause
		took  time.Duration
		// tookReading, if set, is when a call reading for itself ends.
		tookReading time.Duration
		reason      string // the notifications/cancelled's
	}{
		{name: "canceled at once", after: time.Nanosecond, cause: wire.CauseCanceled, took: time.Nanosecond, tookReading: wire.CtxPoll, reason: reasonAbandoned},
		{name: "canceled after a while", after: 5 * time.Second, cause: wire.CauseCanceled, took: 5 * time.Second, reason: reasonAbandoned},
		{name: "deadline", opts: []wire.CallOption{wire.WithTimeout(3 * time.Second)}, cause: wire.CauseDeadline, took: 3 * time.Second, reason: "no answer within 3s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bothReaders(t, func(t *testing.T, wrap func(transport.Stream) transport.Stream) {
				synctest.Test(t, func(t *testing.T) {
					p, far := wrappedPipePeer(t, wrap, wire.Options{})
					want := tc.took
					if _, plain := wrap(nil).(plainStream); !plain && tc.tookReading != 0 {
						want = tc.tookReading
					}
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					if tc.after > 0 {
						time.AfterFunc(tc.after, cancel)
					}
					start := time.Now()
					errc := make(chan error, 1)
					go func() { errc <- p.Call(ctx, "slow", nil, nil, tc.opts...) }()
					slow := far.mustRead()
					callError(t, <-errc, wire.NoResponse, tc.cause)
					if took := time.Since(start); took != want {
						t.Errorf("the call ended after %v, want %v", took, want)
					}
					far.mustCancelled(slow.ID, tc.reason)

					var res struct{ N int }
					go func() { errc <- p.Call(t.Context(), "next", nil, &res) }()
					m := far.mustRead()
					far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"n":7}}`, m.ID)
					if err := <-errc; err != nil || res.N != 7 {
						t.Errorf("the next call = %d, %v", res.N, err)
					}
				})
			})
		})
	}
}

// A connection that ends while a call reads for its answer ends the call
// as closed, and the peer's goroutines all finish.
func TestConnectionEndsWhileACallReads(t *testing.T) {
	bothReaders(t, func(t *testing.T, wrap func(transport.Stream) transport.Stream) {
		p, far := wrappedPipePeer(t, wrap, wire.Options{})
		errc := make(chan error, 2)
		for range 2 {
			go func() { errc <- p.Call(testCtx(t), "op", nil, nil) }()
			far.mustRead()
		}
		far.s.Close()
		for range 2 {
			callError(t, <-errc, wire.NoResponse, wire.CauseClosed)
		}
		waitDone(t, p)
	})
}

// Many calls at once, answered in a shuffled order with notifications
// between, each get their own answer.
func TestManyCallsEachGetTheirAnswer(t *testing.T) {
	bothReaders(t, func(t *testing.T, wrap func(transport.Stream) transport.Stream) {
		h := newRecordingHandler()
		h.got = make(chan string, 100)
		p, far := wrappedPipePeer(t, wrap, wire.Options{Handler: h})
		const n = 40
		type result struct {
			want, got int
			err       error
		}
		results := make(chan result, n)
		for i := range n {
			go func() {
				var res struct{ N int }
				err := p.Call(testCtx(t), "op", map[string]int{"n": i}, &res)
				results <- result{i, res.N, err}
			}()
		}
		type req struct {
			id json.RawMessage
			n  int
		}
		var reqs []req
		for range n {
			m := far.mustRead()
			var params struct{ N int }
			if err := json.Unmarshal(m.Params, &params); err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, req{m.ID, params.N})
		}
		// Answer every third first, then the rest backwards.
		var order []req
		for i := 0; i < n; i += 3 {
			order = append(order, reqs[i])
		}
		for i := n - 1; i >= 0; i-- {
			if i%3 != 0 {
				order = append(order, reqs[i])
			}
		}
		for i, r := range order {
			if i%5 == 0 {
				far.send(`{"jsonrpc":"2.0","method":"note"}`)
			}
			far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"n":%d}}`, r.id, r.n)
		}
		for range n {
			r := <-results
			if r.err != nil || r.got != r.want {
				t.Errorf("call %d = %d, %v", r.want, r.got, r.err)
			}
		}
		for range (n + 4) / 5 {
			if got := <-h.got; got != "note" {
				t.Errorf("handler was given %q", got)
			}
		}
	})
}

// A server that closes its stdout and stays: the call reading for its
// answer still ends at its own deadline, not when the process goes.
func TestCallDeadlineWhenTheServerClosesItsStdout(t *testing.T) {
	proc, err := transport.Spawn(transport.Command{Argv: []string{"sh", "-c", "read req; exec 1>&-; read never"}},
		transport.StdioOptions{StopWait: time.Minute, Logger: newRecorder().Logger()})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := newPeer(t, proc, wire.Options{})
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "op", nil, nil, wire.WithTimeout(300*time.Millisecond)) }()
	select {
	case err := <-errc:
		callError(t, err, wire.NoResponse, wire.CauseDeadline)
	case <-time.After(15 * time.Second):
		t.Fatal("the call did not end at its deadline")
	}
}
