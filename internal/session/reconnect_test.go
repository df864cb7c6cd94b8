package session_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// How a request fails between and across connections: the session must
// pick the right outcome and cause, and say whether it is reconnecting
// (the words are the host's, chosen from these).
var (
	closedPendingReconnecting = failure{wire.NoResponse, wire.CauseClosed, true}
	notSentReconnecting       = failure{wire.NotSent, wire.CauseClosed, true}
	notSentNoReconnect        = failure{wire.NotSent, wire.CauseClosed, false}
	hostClosedPending         = failure{wire.NoResponse, wire.CauseClosedHere, false}
	notSentHostClosed         = failure{wire.NotSent, wire.CauseClosedHere, false}
)

type failure struct {
	outcome      wire.Outcome
	cause        wire.Cause
	reconnecting bool
}

// fast is reconnect for tests against real subprocesses.
var fast = session.Reconnect{Enabled: true, Initial: 20 * time.Millisecond, Max: 40 * time.Millisecond}

// wantFailure fails unless err is a *wire.CallError that failed as want
// says, naming the server.
func wantFailure(t testing.TB, err error, want failure) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %+v", want)
	}
	ce := callError(t, err)
	if got := (failure{ce.Outcome, ce.Cause, ce.Reconnecting}); got != want || ce.Server != server {
		t.Fatalf("error %q: %+v from %q, want %+v from %q", ce.Error(), got, ce.Server, want, server)
	}
}

// TestReconnectAfterKill: the server dies mid-call with reconnect on. The
// call fails with the reconnecting text, the grant is dropped at once, calls
// meanwhile are not sent, the session comes back, the policy is sent again
// from nothing, and a new call works.
func TestReconnectAfterKill(t *testing.T) {
	rec := newRecorder()
	box := newInbox()
	d := newDialer(t, []string{"-mcpl", adFull})
	gate := make(chan struct{})
	d.gate = map[int]chan struct{}{2: gate}
	s := open(t, session.Config{Dial: d.dial, Reconnect: fast, Logger: rec.Logger(), OnPushEvent: box.onPush})
	first := policyReport(t, s)
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "evt-r")), `{"accepted":true}`)

	_, err := toolErr(s, "exit", map[string]int{"code": 1})
	wantFailure(t, err, closedPendingReconnecting)
	if g := s.Grant(); len(g.Effective) != 0 {
		t.Errorf("grant %v after the close, want it dropped at once", g.Effective)
	}
	// The redial is held at the gate: calls meanwhile are not sent.
	err = s.Call(context.Background(), protocol.MethodToolsList, nil, nil)
	wantFailure(t, err, notSentReconnecting)
	wantFailure(t, s.Notify(context.Background(), "notifications/cancelled", nil), notSentReconnecting)
	if !s.Reconnecting() {
		t.Error("Reconnecting() = false while reconnecting")
	}
	rec.Wait(t, "the connection to the server closed", 1)
	closed := rec.One(t, "the connection to the server closed")
	if closed.Attr("will_reconnect") != "true" || closed.Attr("exit_code") != "1" {
		t.Errorf("close log %+v, want will_reconnect and the exit code", closed)
	}
	if n := s.Reconnects(); n != 0 {
		t.Errorf("Reconnects() = %d before the redial, want 0", n)
	}
	close(gate)
	rec.Wait(t, "reconnected", 1)
	if n := s.Reconnects(); n != 1 {
		t.Errorf("Reconnects() = %d after one reconnect, want 1", n)
	}

	r := policyReport(t, s) // the new process: only what this connection sent
	if len(r.Policies) != 1 || !r.Policies[0].AsRequest {
		t.Fatalf("the new server got policies %+v, want one request", r.Policies)
	}
	if !jsonEqual(r.Policies[0].Params, first.Policies[0].Params) {
		t.Errorf("policy after reconnect %s, want %s", r.Policies[0].Params, first.Policies[0].Params)
	}
	if diff := cmp.Diff(fullEffective, s.Grant().Effective); diff != "" {
		t.Errorf("grant after reconnect (-want +got):\n%s", diff)
	}
	if got := tool(t, s, "echo", map[string]string{"text": "back"}); got != "back" {
		t.Errorf("echo after reconnect = %q", got)
	}
	// A push retried across the reconnect gets the same answer and is not
	// handed over twice.
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "evt-r")), `{"accepted":true}`)
	if n := len(box.pushed()); n != 1 {
		t.Errorf("%d events, want 1", n)
	}
	if n := d.n.Load(); n != 2 {
		t.Errorf("%d dials, want 2", n)
	}
}

// TestReconnectClosePromptly: Close during a redial wait returns at once
// and leaves nothing running (goleak checks after the run).
func TestReconnectClosePromptly(t *testing.T) {
	d := newDialer(t, []string{"-mcpl", adFull})
	s := open(t, session.Config{Dial: d.dial, Reconnect: session.Reconnect{Enabled: true, Initial: time.Hour}})
	_, err := toolErr(s, "exit", map[string]int{"code": 0})
	wantFailure(t, err, closedPendingReconnecting)
	start := time.Now()
	s.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v during a redial wait", took)
	}
	if n := d.n.Load(); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
}

// TestBackoffSchedule pins the redial schedule with a fake clock: 5 s,
// doubling, capped at 300 s, each within ±25%, forever; Close stops it at
// once.
func TestBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		ip := &inProcess{fail: 1 << 30, dials: make(chan int, 100)}
		s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: ip.dial, Logger: rec.Logger(), Reconnect: session.Reconnect{Enabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		const attempts = 14
		for range attempts {
			<-ip.dials
		}
		base := []time.Duration{5, 10, 20, 40, 80, 160, 300, 300, 300, 300, 300, 300, 300}
		at := ip.at()
		jittered := false
		for i, b := range base {
			b *= time.Second
			gap := at[i+1].Sub(at[i])
			if gap < b*3/4 || gap > b*5/4 {
				t.Errorf("wait before attempt %d = %v, want %v ±25%%", i+2, gap, b)
			}
			if gap != b {
				jittered = true
			}
		}
		if !jittered {
			t.Error("no wait was jittered")
		}
		synctest.Wait()
		if n := len(rec.Find("reconnect attempt failed")); n != attempts-1 {
			t.Errorf("%d failed attempts logged, want %d", n, attempts-1)
		}
		rec.One(t, "initial connect failed; will retry")
		// Close during the wait returns at once, and nothing dials again.
		before := time.Now()
		s.Close()
		if time.Since(before) != 0 {
			t.Errorf("Close took %v of fake time", time.Since(before))
		}
		time.Sleep(time.Hour)
		if n := ip.count(); n != attempts {
			t.Errorf("%d dials after Close, want %d", n, attempts)
		}
	})
}

// TestFirstConnectFails: with reconnect on, a failed first connect leaves a
// session whose calls are not sent, saying it is reconnecting, while it
// keeps trying; then it connects and the policy exchange runs.
func TestFirstConnectFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		ip := &inProcess{fail: 2, cfgs: []testserver.Config{{MCPL: []byte(adFull)}}}
		s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: ip.dial, Logger: rec.Logger(), Reconnect: session.Reconnect{Enabled: true}})
		if err != nil {
			t.Fatalf("Connect with reconnect on = %v, want a session that keeps trying", err)
		}
		defer ip.wait()
		defer s.Close()
		err = s.Call(context.Background(), protocol.MethodToolsList, nil, nil)
		wantFailure(t, err, notSentReconnecting)
		if ce := callError(t, err); ce.Method != protocol.MethodToolsList {
			t.Errorf("method %q", ce.Method)
		}
		if st := s.State(); st.Connected || s.Connected() || !s.Reconnecting() {
			t.Errorf("state %+v connected %v reconnecting %v", st, s.Connected(), s.Reconnecting())
		}
		time.Sleep(5*time.Second*5/4 + 10*time.Second*5/4 + time.Second)
		synctest.Wait()
		if n := ip.count(); n != 3 {
			t.Fatalf("%d dials, want 3", n)
		}
		rec.One(t, "reconnected")
		if st := s.State(); !st.Connected || !s.Connected() || st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted {
			t.Fatalf("state %+v (connected %v) after connecting", st, s.Connected())
		}
		if r := policyReport(t, s); len(r.Policies) != 1 {
			t.Errorf("policies %+v", r.Policies)
		}
		if got := tool(t, s, "echo", map[string]string{"text": "hi"}); got != "hi" {
			t.Errorf("echo = %q", got)
		}
	})
}

// scripts is a Dial that hands out one script per dial, in order.
type scripts struct {
	mu   sync.Mutex
	list []*script
	n    int
}

func (ss *scripts) dial(ctx context.Context) (transport.Stream, error) {
	ss.mu.Lock()
	sc := ss.list[ss.n]
	ss.n++
	ss.mu.Unlock()
	return sc.dial(ctx)
}

// TestReconnectNeverRestoresGrant: each reconnect computes its grant from the
// new connection alone, sends the policy again from nothing, and admits
// against that.
func TestReconnectNeverRestoresGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first, second := newScript(t), newScript(t)
		ss := &scripts{list: []*script{first, second}}
		c := connectAsync(session.Config{Dial: ss.dial, Implemented: everything, Handler: handled, Reconnect: session.Reconnect{Enabled: true}})
		first.initialize(adFull)
		first.reply(first.expect(protocol.MethodFeatureSetsUpdate), `{"accepted":true}`)
		s := c.ok(t)
		first.request(1, protocol.MethodModelInfo, `{}`)
		wantResult(t, first.answerTo(1), `{"handled":"model/info"}`)

		drop := time.Now()
		first.end()
		second.initialize(`{"version":"0.5","pushEvents":true}`)
		if at := time.Since(drop); at < 5*time.Second*3/4 || at > 5*time.Second*5/4 {
			t.Errorf("redialed %v after the drop, want 5s ±25%%", at)
		}
		pol := second.expect(protocol.MethodFeatureSetsUpdate)
		// Sent on the new connection before its policy: what the new
		// connection does not advertise is refused at once, whatever the
		// old grant held; what it does is held and decided against the
		// new grant.
		second.request(1, protocol.MethodModelInfo, `{}`)
		second.request(3, protocol.MethodPushEvent, pushParams("chat", "r1"))
		synctest.Wait()
		got := second.pending()
		if len(got) != 1 || string(got[0].ID) != "1" {
			t.Fatalf("before the new policy settled the host wrote %v; want only the refusal of 1", got)
		}
		wantDenied(t, got[0].asAnswer(), "modelInfo", notGranted)
		p := policyParams(t, pol.Params)
		if !cmp.Equal(p.EffectiveCapabilities, []string{"pushEvents", "tools"}) || !cmp.Equal(p.DeniedCapabilities, []string{}) {
			t.Errorf("policy after reconnect %+v, want only the new connection's grant", p)
		}
		second.reply(pol, `{"accepted":true}`)
		wantError(t, second.answerTo(3), protocol.CodeUnknownFeatureSet, `{"featureSet":"chat"}`)
		synctest.Wait()
		if diff := cmp.Diff([]string{"pushEvents", "tools"}, s.Grant().Effective); diff != "" {
			t.Errorf("grant after reconnect (-want +got):\n%s", diff)
		}
		second.request(2, protocol.MethodChannelsList, `{}`)
		wantDenied(t, second.answerTo(2), "channels.register", notGranted)
	})
}

// TestReconnectRefusedCloseStops: a reconnect whose policy is refused with
// fallback close closes and stops reconnecting.
func TestReconnectRefusedCloseStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		ip := &inProcess{cfgs: []testserver.Config{{MCPL: []byte(adFull)}, {MCPL: []byte(adFull), Policy: "refuse-close"}}}
		var (
			mu          sync.Mutex
			disconnects []bool // what OnDisconnect heard: will it reconnect
		)
		s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: ip.dial, Logger: rec.Logger(), Reconnect: session.Reconnect{Enabled: true},
			OnDisconnect: func(_ *session.Session, will bool) { mu.Lock(); disconnects = append(disconnects, will); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		defer ip.wait()
		defer s.Close()
		_, err = toolErr(s, "exit", map[string]int{})
		wantFailure(t, err, closedPendingReconnecting)
		time.Sleep(24 * time.Hour)
		if n := ip.count(); n != 2 {
			t.Errorf("%d dials, want 2: a refusal with fallback close stops reconnecting", n)
		}
		if s.Reconnecting() {
			t.Error("Reconnecting() after a refusal with fallback close")
		}
		wantFailure(t, s.Call(context.Background(), protocol.MethodToolsList, nil, nil), notSentNoReconnect)
		if st := s.State(); st.Connected || st.Policy == nil || st.Policy.Outcome != grant.OutcomeRefused || st.Policy.Fallback != protocol.FallbackClose {
			t.Errorf("state %+v policy %+v, want the refusal recorded", st, st.Policy)
		}
		rec.One(t, "the server refused the initial policy")
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(disconnects, []bool{true, false}) {
			t.Errorf("OnDisconnect heard %v, want [true false]: first a drop it would reconnect after, then that it won't", disconnects)
		}
	})
}

// TestCloseNeverReconnects: an explicit Close fails what is pending with the
// host-closed texts and never reconnects.
func TestCloseNeverReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ip := &inProcess{cfgs: []testserver.Config{{MCPL: []byte(adFull)}}}
		s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: ip.dial, Logger: discard, Reconnect: session.Reconnect{Enabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		hung := make(chan error, 1)
		go func() { _, err := toolErr(s, "hang", map[string]any{}); hung <- err }()
		synctest.Wait()
		s.Close()
		wantFailure(t, <-hung, hostClosedPending)
		wantFailure(t, s.Call(context.Background(), protocol.MethodToolsList, nil, nil), notSentHostClosed)
		wantFailure(t, s.Notify(context.Background(), "notifications/cancelled", nil), notSentHostClosed)
		if s.Reconnecting() {
			t.Error("Reconnecting() after Close")
		}
		time.Sleep(24 * time.Hour)
		if n := ip.count(); n != 1 {
			t.Errorf("%d dials after Close, want 1", n)
		}
		ip.wait()
		s.Close() // a second Close is harmless
	})
}

// TestCloseDuringReconnectHandshake: Close while a redial's initialize is
// unanswered returns at once and closes that connection.
func TestCloseDuringReconnectHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ip := &inProcess{cfgs: []testserver.Config{{MCPL: []byte(adFull)}}}
		sc := newScript(t)
		dial := func(ctx context.Context) (transport.Stream, error) {
			if ip.count() == 0 {
				return ip.dial(ctx)
			}
			return sc.dial(ctx)
		}
		s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: dial, Logger: discard, Reconnect: session.Reconnect{Enabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = toolErr(s, "exit", map[string]int{})
		wantFailure(t, err, closedPendingReconnecting)
		sc.expect(protocol.MethodInitialize) // the redial, left unanswered
		before := time.Now()
		s.Close()
		if time.Since(before) != 0 {
			t.Errorf("Close took %v of fake time", time.Since(before))
		}
		if !sc.isClosed() {
			t.Error("the half-made connection was not closed")
		}
		ip.wait()
	})
}

// TestReconnectLogsEachAttempt: each failed attempt and the success are
// logged.
func TestReconnectLogsEachAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		ip := &inProcess{cfgs: []testserver.Config{{MCPL: []byte(adFull)}}}
		dial := func(ctx context.Context) (transport.Stream, error) {
			if n := ip.count(); n >= 1 && n <= 3 {
				ip.mu.Lock()
				ip.n++
				ip.mu.Unlock()
				return nil, errDial
			}
			return ip.dial(ctx)
		}
		s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: dial, Logger: rec.Logger(), Reconnect: session.Reconnect{Enabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer ip.wait()
		defer s.Close()
		_, err = toolErr(s, "exit", map[string]int{})
		wantFailure(t, err, closedPendingReconnecting)
		time.Sleep(time.Hour)
		fails := rec.Find("reconnect attempt failed")
		if len(fails) != 3 {
			t.Fatalf("%d failures logged, want 3", len(fails))
		}
		for i, f := range fails {
			if f.Attr("attempt") != fmt.Sprint(i+1) || f.Attr("error") != errDial.Error() || f.Attr("server") != server {
				t.Errorf("failure log %+v", f)
			}
		}
		if ok := rec.One(t, "reconnected"); ok.Attr("attempt") != "4" {
			t.Errorf("success log %+v, want attempt 4", ok)
		}
		if !s.State().Connected {
			t.Error("not connected")
		}
	})
}

// TestMissingCommandNotRetried: with reconnect on, a first connect that
// fails because the server's command does not exist fails for good: no
// redial mends a configuration mistake, and the host lists the server
// failed rather than reconnecting forever.
func TestMissingCommandNotRetried(t *testing.T) {
	rec := newRecorder()
	dial := func(context.Context) (transport.Stream, error) {
		// The real spawn, of a program that is not there.
		p, err := transport.Spawn(transport.Command{Argv: []string{filepath.Join(t.TempDir(), "no-such-server")}}, transport.StdioOptions{})
		if err != nil {
			return nil, err
		}
		p.Close()
		return nil, errors.New("the program exists")
	}
	s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: dial, Logger: rec.Logger(), Reconnect: session.Reconnect{Enabled: true}})
	if err == nil {
		s.Close()
		t.Fatal("Connect to a command that does not exist succeeded with reconnect on, want its error")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Connect = %v, want an error that is fs.ErrNotExist", err)
	}
	rec.One(t, "the server's command does not exist, so it is not retried; correct the configuration and restart the host")
	if n := len(rec.Find("initial connect failed; will retry")); n != 0 {
		t.Errorf("%d 'will retry' lines, want none", n)
	}
}
