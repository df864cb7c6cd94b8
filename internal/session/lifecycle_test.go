package session_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// TestCloseFromCallbacks: Close may be called from OnConnect and from
// OnDisconnect, on the first connect and on a reconnect (before, a
// callback's Close waited on its own goroutine for ever).
func TestCloseFromCallbacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		// closeIn says which callback calls Close, and on which connection
		// (1 the first).
		onConnect, onDisconnect int
	}{
		{"OnConnect of the first connection", 1, 0},
		{"OnConnect of a reconnect", 2, 0},
		{"OnDisconnect", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ip := &inProcess{cfgs: []testserver.Config{{MCPL: []byte(adFull)}}}
				closed := make(chan struct{})
				var connects, disconnects atomic.Int32
				cfg := session.Config{ID: server, Dial: ip.dial, Logger: discard, Reconnect: fast,
					OnConnect: func(s *session.Session) {
						if int(connects.Add(1)) == tc.onConnect {
							s.Close()
							close(closed)
						}
					},
					OnDisconnect: func(s *session.Session, _ bool) {
						if int(disconnects.Add(1)) == tc.onDisconnect {
							s.Close()
							close(closed)
						}
					},
				}
				s, err := session.Connect(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer ip.wait()
				if tc.onConnect != 1 {
					_, err := toolErr(s, "exit", map[string]int{})
					wantFailure(t, err, closedPendingReconnecting)
				}
				select {
				case <-closed:
				case <-time.After(time.Hour):
					t.Fatal("the callback's Close did not return")
				}
				synctest.Wait()
				if s.Reconnecting() {
					t.Error("still reconnecting after a callback closed the session")
				}
				wantFailure(t, s.Call(context.Background(), protocol.MethodToolsList, nil, nil), notSentHostClosed)
				s.Close() // a second Close, from outside, returns too
				s.Wait()
				time.Sleep(time.Hour)
				if n := ip.count(); n != max(tc.onConnect, 1) {
					t.Errorf("%d dials, want %d: nothing redials after Close", n, max(tc.onConnect, 1))
				}
			})
		})
	}
}

// TestConnectContextEnds: when Connect's ctx ends before the connect is
// done, Connect returns ctx's error, reconnect on or off, and leaves
// nothing running or redialing (before, with reconnect on, it returned a
// session that kept redialing).
func TestConnectContextEnds(t *testing.T) {
	for _, recon := range []bool{false, true} {
		t.Run(map[bool]string{false: "no reconnect", true: "reconnect"}[recon], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var dials atomic.Int32
				sc := newScript(t)
				dial := func(ctx context.Context) (transport.Stream, error) {
					dials.Add(1)
					return sc.dial(ctx)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var disconnected atomic.Bool
				s, err := session.Connect(ctx, session.Config{ID: server, Dial: dial, Logger: discard,
					Reconnect:    session.Reconnect{Enabled: recon, Initial: time.Second},
					OnDisconnect: func(*session.Session, bool) { disconnected.Store(true) },
				}) // the script never answers initialize
				if s != nil || !errors.Is(err, context.DeadlineExceeded) || err != ctx.Err() {
					t.Fatalf("Connect = %v, %v; want nil and the context's error", s, err)
				}
				if !sc.isClosed() {
					t.Error("the connection was left open")
				}
				time.Sleep(time.Hour)
				if n := dials.Load(); n != 1 || disconnected.Load() {
					t.Errorf("%d dials and OnDisconnect %v after Connect returned; want 1 and none", n, disconnected.Load())
				}
			})
		})
	}
}

type ctxKey struct{}

// TestHandlerContextValues: the values of Connect's ctx reach the handlers
// and the push consumer, on the first connection and on a reconnect, and
// outlive Connect's own deadline.
func TestHandlerContextValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ip := &inProcess{cfgs: []testserver.Config{{MCPL: []byte(adFull)}}}
		var mu sync.Mutex
		var seen []any
		record := func(ctx context.Context) {
			mu.Lock()
			seen = append(seen, ctx.Value(ctxKey{}), ctx.Err())
			mu.Unlock()
		}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "from Connect"), time.Minute)
		connected := make(chan struct{}, 2)
		s, err := session.Connect(ctx, session.Config{ID: server, Dial: ip.dial, Logger: discard, Reconnect: fast, Implemented: served,
			OnConnect: func(*session.Session) { connected <- struct{}{} },
			Handler: wire.HandlerFunc(func(ctx context.Context, req *wire.Request) (any, error) {
				record(ctx)
				return handled.Serve(ctx, req)
			}),
			OnPushEvent: func(ctx context.Context, ev session.PushEvent) (protocol.PushEventResult, error) {
				record(ctx)
				return protocol.PushEventResult{Accepted: true}, nil
			},
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		defer ip.wait()
		defer s.Close()
		send(t, s, protocol.MethodChannelsList, `{}`)
		send(t, s, protocol.MethodPushEvent, pushParams("chat", "v1"))
		_, err = toolErr(s, "exit", map[string]int{})
		wantFailure(t, err, closedPendingReconnecting)
		<-connected // the first connection
		<-connected // the reconnect
		send(t, s, protocol.MethodChannelsList, `{}`)
		mu.Lock()
		defer mu.Unlock()
		want := []any{"from Connect", nil, "from Connect", nil, "from Connect", nil}
		if len(seen) != len(want) {
			t.Fatalf("seen %v, want %v", seen, want)
		}
		for i := range want {
			if seen[i] != want[i] {
				t.Errorf("seen %v, want %v: handlers carry Connect's values, not its end", seen, want)
				break
			}
		}
	})
}

// TestPushConsumer: the consumer's answer is the server's: accepted with
// an inferenceId, or declined with a reason; the server's answer waits for
// the consumer's work; only an answer given is remembered for a retry.
func TestPushConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		release := make(chan struct{})
		var calls atomic.Int32
		c := connectAsync(session.Config{Dial: sc.dial, Implemented: served,
			OnPushEvent: func(_ context.Context, ev session.PushEvent) (protocol.PushEventResult, error) {
				n := calls.Add(1)
				switch ev.Params.EventID {
				case "slow":
					<-release // storing the event
					return protocol.PushEventResult{Accepted: true, InferenceID: "inf-1"}, nil
				case "declined":
					return protocol.PushEventResult{Accepted: false, Reason: "muted"}, nil
				case "flaky":
					if n == 3 {
						return protocol.PushEventResult{}, errors.New("the store is down")
					}
				case "empty":
					if n == 5 {
						return protocol.PushEventResult{}, protocol.NewError(protocol.CodeInvalidParams, "Invalid params: empty", map[string]string{"reason": "empty-content"})
					}
				}
				return protocol.PushEventResult{Accepted: true}, nil
			}})
		sc.initialize(adFull)
		sc.reply(sc.expect(protocol.MethodFeatureSetsUpdate), `{"accepted":true}`)
		c.ok(t)

		sc.request(1, protocol.MethodPushEvent, pushParams("chat", "slow"))
		synctest.Wait()
		if got := sc.pending(); len(got) != 0 {
			t.Fatalf("answered %v before the consumer was done", got)
		}
		close(release)
		wantResult(t, sc.answerTo(1), `{"accepted":true,"inferenceId":"inf-1"}`)
		sc.request(2, protocol.MethodPushEvent, pushParams("chat", "declined"))
		wantResult(t, sc.answerTo(2), `{"accepted":false,"reason":"muted"}`)
		// The consumer fails: an internal error, not remembered, so the
		// retry is handled anew; that answer is remembered.
		sc.request(3, protocol.MethodPushEvent, pushParams("chat", "flaky"))
		wantError(t, sc.answerTo(3), protocol.CodeInternalError, "")
		sc.request(4, protocol.MethodPushEvent, pushParams("chat", "flaky"))
		wantResult(t, sc.answerTo(4), `{"accepted":true}`)
		sc.request(5, protocol.MethodPushEvent, pushParams("chat", "flaky"))
		wantResult(t, sc.answerTo(5), `{"accepted":true}`)
		sc.request(6, protocol.MethodPushEvent, pushParams("chat", "declined"))
		wantResult(t, sc.answerTo(6), `{"accepted":false,"reason":"muted"}`)
		// The consumer refuses the event with an error of its own: sent
		// as it is, and not remembered either.
		sc.request(7, protocol.MethodPushEvent, pushParams("chat", "empty"))
		wantError(t, sc.answerTo(7), protocol.CodeInvalidParams, `{"reason":"empty-content"}`, "Invalid params: empty")
		sc.request(8, protocol.MethodPushEvent, pushParams("chat", "empty"))
		wantResult(t, sc.answerTo(8), `{"accepted":true}`)
		if n := calls.Load(); n != 6 {
			t.Errorf("the consumer was called %d times, want 6: once per answer given, again after each error", n)
		}
	})
}

// TestPushWithoutConsumer: a host that implements pushEvents with no
// consumer declines each event, saying so.
func TestPushWithoutConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		done := make(chan *session.Session)
		go func() { // not connectAsync, which gives a consumer
			s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: sc.dial, Implemented: served, Logger: discard})
			if err != nil {
				t.Error(err)
			}
			done <- s
		}()
		sc.initialize(adFull)
		sc.reply(sc.expect(protocol.MethodFeatureSetsUpdate), `{"accepted":true}`)
		if s := <-done; s != nil {
			defer s.Close()
		}
		sc.request(1, protocol.MethodPushEvent, pushParams("chat", "e"))
		wantResult(t, sc.answerTo(1), `{"accepted":false,"reason":"this host has nothing to deliver events to"}`)
	})
}

// TestPolicyUnansweredWithHeld: when the policy goes unanswered while one
// of the server's own requests is held, the result and the log say so; and
// the policy's deadline is Config.PolicyTimeout.
func TestPolicyUnansweredWithHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		sc := newScript(t)
		start := time.Now()
		c := connectAsync(session.Config{Dial: sc.dial, Logger: rec.Logger(), Handler: handled, PolicyTimeout: 2 * time.Second})
		sc.initialize(adFull)
		policy := sc.expect(protocol.MethodFeatureSetsUpdate) // never answered
		sc.request(1, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`)
		s := c.ok(t)
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("the policy was given up after %s, want PolicyTimeout (2s)", d)
		}
		sc.expectCancelled(policy, "no answer within 2s")
		st := s.State()
		if st.Policy == nil || st.Policy.Reason != "no answer within 2s" || len(st.Policy.Held) != 1 || st.Policy.Held[0] != protocol.MethodChannelsRegister {
			t.Errorf("policy %+v, want unanswered with channels/register held", st.Policy)
		}
		wantDenied(t, sc.answerTo(1), "channels.register", notEstablished)
		r := rec.One(t, "the server's own requests were waiting on this host when the policy went unanswered: a server that waits for their answers before it reads the policy deadlocks there")
		if r.Attr("held") != "[channels/register]" {
			t.Errorf("log %+v", r)
		}
	})
}

// TestWaitForACallback: Close from outside returns while a callback is
// still running (it may be the callback that needs Close to return), and
// Wait waits for the callback to end.
func TestWaitForACallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ip := &inProcess{cfgs: []testserver.Config{{MCPL: []byte(adFull)}}}
		in, release := make(chan struct{}), make(chan struct{})
		s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: ip.dial, Logger: discard,
			OnDisconnect: func(*session.Session, bool) { close(in); <-release }})
		if err != nil {
			t.Fatal(err)
		}
		defer ip.wait()
		_, err = toolErr(s, "exit", map[string]int{})
		wantFailure(t, err, failure{wire.NoResponse, wire.CauseClosed, false})
		<-in
		s.Close()
		waited := make(chan struct{})
		go func() { s.Wait(); close(waited) }()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("Wait returned while OnDisconnect was running")
		default:
		}
		close(release)
		<-waited
	})
}
