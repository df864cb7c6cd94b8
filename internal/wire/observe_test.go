package wire_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// observed records what an Observer heard.
type observed struct {
	mu    sync.Mutex
	lines []string
	durs  []time.Duration
	heard chan struct{}
}

func newObserved() *observed { return &observed{heard: make(chan struct{}, 16)} }

func (o *observed) add(line string, d time.Duration) {
	o.mu.Lock()
	o.lines = append(o.lines, line)
	o.durs = append(o.durs, d)
	o.mu.Unlock()
	o.heard <- struct{}{}
}

func (o *observed) Called(method, outcome string, d time.Duration) {
	o.add("called "+method+" "+outcome, d)
}

func (o *observed) Answered(method, outcome string, d time.Duration) {
	o.add("answered "+method+" "+outcome, d)
}

func (o *observed) wait(t *testing.T, n int) []string {
	t.Helper()
	for range n {
		select {
		case <-o.heard:
		case <-time.After(10 * time.Second):
			t.Fatalf("the observer heard %d of %d", len(o.snapshot()), n)
		}
	}
	return o.snapshot()
}

func (o *observed) snapshot() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.lines)
}

// Every call this side makes and every request it answers is told to the
// observer once, with its outcome and how long it took: an answer, an
// error answer, a call abandoned by its caller, one not sent on a closed
// connection; a request answered and one refused. In a synctest bubble,
// so the durations are exact: the first call answered after 3s, the ping
// answered after its handler's 2s.
func TestObserverHearsEveryRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := newObserved()
		p, far, _ := pipePeer(t, wire.Options{Observer: obs, Handler: wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
			switch r.Method {
			case "bad":
				return nil, &jsonrpc.Error{Code: -32001, Message: "no"}
			case "ping":
				time.Sleep(2 * time.Second)
			}
			return map[string]int{}, nil
		})})

		errc := make(chan error, 1)
		go func() { errc <- p.Call(t.Context(), "tools/call", nil, nil) }()
		m := far.mustRead()
		time.Sleep(3 * time.Second)
		far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		go func() { errc <- p.Call(t.Context(), "channels/open", nil, nil) }()
		m = far.mustRead()
		far.sendf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"no"}}`, m.ID)
		<-errc
		ctx, cancel := context.WithCancel(t.Context())
		go func() { errc <- p.Call(ctx, "channels/close", nil, nil) }()
		m = far.mustRead()
		cancel()
		<-errc
		far.mustCancelled(m.ID, reasonAbandoned)

		far.send(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
		far.mustRead()
		far.send(`{"jsonrpc":"2.0","id":8,"method":"bad"}`)
		far.mustRead()
		far.send(`{"jsonrpc":"2.0","method":"note"}`) // a notification: no answer, not told

		got := obs.wait(t, 5)
		want := []string{
			"called tools/call ok",
			"called channels/open error-response",
			"called channels/close no-response",
			"answered ping ok",
			"answered bad error",
		}
		if !slices.Equal(got, want) {
			t.Errorf("observed:\n got %q\nwant %q", got, want)
		}
		p.Close()
		if err := p.Call(t.Context(), "tools/list", nil, nil); err == nil {
			t.Fatal("a call on a closed connection succeeded")
		}
		if got := obs.wait(t, 1); got[len(got)-1] != "called tools/list not-sent" {
			t.Errorf("a call on a closed connection observed as %q", got[len(got)-1])
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		// The call canceled at once notices within CtxPoll (read.go):
		// at once when it was waiting for another reader, CtxPoll later
		// when it was reading its own answer, which of the two the
		// scheduler decides.
		wantDurs := []time.Duration{3 * time.Second, 0, wire.CtxPoll, 2 * time.Second, 0, 0}
		durs := slices.Clone(obs.durs)
		if len(durs) == len(wantDurs) && durs[2] == 0 {
			durs[2] = wire.CtxPoll
		}
		if !slices.Equal(durs, wantDurs) {
			t.Errorf("durations %v, want %v, the third 0 or %v (for %q)", obs.durs, wantDurs, wire.CtxPoll, obs.lines)
		}
	})
}

// Queued counts the messages waiting for a handler that is busy.
func TestQueuedCountsWaitingMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		p, far, _ := pipePeer(t, wire.Options{Handler: wire.HandlerFunc(func(context.Context, *wire.Request) (any, error) {
			<-release
			return nil, nil
		})})
		far.send(`{"jsonrpc":"2.0","method":"a"}`)
		far.send(`{"jsonrpc":"2.0","method":"b"}`)
		far.send(`{"jsonrpc":"2.0","method":"c"}`)
		synctest.Wait()
		if n := p.Queued(); n != 2 {
			t.Errorf("Queued = %d while the handler holds the first of three, want 2", n)
		}
		close(release)
		synctest.Wait()
		if n := p.Queued(); n != 0 {
			t.Errorf("Queued = %d after all were handled", n)
		}
		p.Close()
	})
}
