package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
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

// policyParams decodes a featureSets/update's params, failing unless all
// four lists are present and JSON arrays (never null, never absent: SPEC
// §5.3 reads an absent list as something else).
func policyParams(t testing.TB, raw json.RawMessage) protocol.FeatureSetsUpdateParams {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("policy params %s: %v", raw, err)
	}
	for _, k := range []string{"effectiveCapabilities", "deniedCapabilities", "enabled", "disabled"} {
		v, ok := fields[k]
		if !ok || len(v) == 0 || v[0] != '[' {
			t.Fatalf("policy params %s: %q is %s, want an array", raw, k, v)
		}
	}
	var p protocol.FeatureSetsUpdateParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The grant the default host computes for adFull.
var (
	fullEffective = []string{"channels.incoming", "channels.register", "pushEvents", "tools"}
	fullDenied    = []string{"channels.acknowledge", "channels.lifecycle", "channels.publish", "channels.streaming",
		"channels.typing", "inferenceRequest", "inferenceRequest.streaming", "modelInfo"}
)

func TestPolicyAccepted(t *testing.T) {
	rec := newRecorder()
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull), Logger: rec.Logger()})
	st := s.State()
	if !st.Connected || st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted {
		t.Fatalf("state %+v, want connected with the policy accepted", st)
	}
	if diff := cmp.Diff(fullEffective, s.Grant().Effective); diff != "" {
		t.Errorf("effective grant (-want +got):\n%s", diff)
	}
	r := policyReport(t, s)
	if len(r.Policies) != 1 || !r.Policies[0].AsRequest {
		t.Fatalf("the server got policies %+v, want one, as a request", r.Policies)
	}
	p := policyParams(t, r.Policies[0].Params)
	want := protocol.FeatureSetsUpdateParams{
		EffectiveCapabilities: fullEffective,
		DeniedCapabilities:    fullDenied,
		Enabled:               []string{"chat"},
		Disabled:              []string{"lifecycle"},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("policy on the wire (-want +got):\n%s", diff)
	}
	if got := rec.One(t, "policy established"); got.Attr("outcome") != string(grant.OutcomeAccepted) {
		t.Errorf("log %+v, want outcome accepted", got)
	}
	// Established: an admitted push/event works on the wire.
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "evt-accepted")), `{"accepted":true}`)
}

// TestPolicyDegraded: a degraded receipt establishes the grant and logs each
// unavailable feature set with its effect.
func TestPolicyDegraded(t *testing.T) {
	rec := newRecorder()
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull, "-policy", "degrade"), Logger: rec.Logger()})
	st := s.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeDegraded || st.Policy.Receipt == nil {
		t.Fatalf("policy %+v, want degraded with its receipt", st.Policy)
	}
	if diff := cmp.Diff(fullEffective, st.Grant.Effective); diff != "" {
		t.Errorf("effective grant (-want +got):\n%s", diff)
	}
	got := rec.One(t, "feature set degraded by the server")
	if got.Attr("feature_set") != "memory.extraction" || got.Attr("effect") != "disabled" {
		t.Errorf("degraded log %+v, want memory.extraction with effect disabled", got)
	}
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "evt-degraded")), `{"accepted":true}`)
}

// TestPolicyRefusedMCPOnly: MCPL stays off, tools keep working, one log line
// carries the server's reason, and the refusal widens nothing: the one
// policy message stands, no second one is sent to satisfy it.
func TestPolicyRefusedMCPOnly(t *testing.T) {
	rec := newRecorder()
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull, "-policy", "refuse"), Logger: rec.Logger()})
	st := s.State()
	if !st.Connected || st.Policy == nil || st.Policy.Outcome != grant.OutcomeRefused ||
		st.Policy.Fallback != protocol.FallbackMCPOnly || st.Policy.Reason != "this server needs inject.system" {
		t.Fatalf("state %+v policy %+v, want connected, refused mcp-only with the server's reason", st, st.Policy)
	}
	if len(st.Grant.Effective) != 0 {
		t.Errorf("effective grant %v after a refusal, want none", st.Grant.Effective)
	}
	for _, fs := range st.Grant.FeatureSets {
		if fs.State != grant.StateDisabled {
			t.Errorf("feature set %+v enabled after a refusal", fs)
		}
	}
	got := rec.One(t, "the server refused the initial policy")
	if got.Attr("reason") != "this server needs inject.system" || got.Attr("fallback") != protocol.FallbackMCPOnly {
		t.Errorf("refusal log %+v, want the server's reason and fallback", got)
	}
	if got := tool(t, s, "echo", map[string]string{"text": "still here"}); got != "still here" {
		t.Errorf("echo = %q after a refusal", got)
	}
	wantError(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "evt-refused")),
		protocol.CodeCapabilityDenied, `{"capability":"pushEvents"}`, `"pushEvents"`, "policy is not yet established")
	r := policyReport(t, s)
	if len(r.Policies) != 1 {
		t.Fatalf("the server got %d policy messages after refusing, want 1: %+v", len(r.Policies), r.Policies)
	}
	if p := policyParams(t, r.Policies[0].Params); slices.Contains(p.EffectiveCapabilities, "contextHooks.beforeInference.inject.system") {
		t.Errorf("policy %+v grants what the refusal asked for", p)
	}
}

// TestPolicyRefusedClose: Connect fails, naming the server's reason, and
// (reconnect on) nothing is redialed: goleak would find a redial loop.
func TestPolicyRefusedClose(t *testing.T) {
	rec := newRecorder()
	d := newDialer(t, []string{"-mcpl", adFull, "-policy", "refuse-close"})
	s, err := session.Connect(context.Background(), session.Config{
		ID: server, Dial: d.dial, Logger: rec.Logger(),
		Reconnect: session.Reconnect{Enabled: true, Initial: time.Millisecond, Max: time.Millisecond},
	})
	if err == nil {
		s.Close()
		t.Fatal("Connect succeeded against a server that refused with fallback close")
	}
	if !errors.Is(err, session.ErrRefusedClose) || !strings.Contains(err.Error(), "this server will not run without channels.publish") {
		t.Errorf("Connect error %q, want ErrRefusedClose with the server's reason", err)
	}
	if n := d.n.Load(); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
	if got := rec.One(t, "the server refused the initial policy"); got.Attr("fallback") != protocol.FallbackClose {
		t.Errorf("refusal log %+v, want fallback close", got)
	}
}

// TestPolicy04MethodNotFound: a 0.4 server that refuses the Request form gets
// the same policy as a Notification, and the grant holds.
func TestPolicy04MethodNotFound(t *testing.T) {
	rec := newRecorder()
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", ad04, "-policy", "method-not-found"), Logger: rec.Logger()})
	st := s.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeNotification {
		t.Fatalf("policy %+v, want the 0.4 notification path", st.Policy)
	}
	if diff := cmp.Diff([]string{"channels.incoming", "channels.register", "pushEvents", "tools"}, st.Grant.Effective); diff != "" {
		t.Errorf("effective grant (-want +got):\n%s", diff)
	}
	rec.One(t, "a 0.4 server refused the policy as a Request; sent it again as a notification (the 0.4 path)")
	r := policyReport(t, s)
	if len(r.Policies) != 2 || !r.Policies[0].AsRequest || r.Policies[1].AsRequest {
		t.Fatalf("policies %+v, want a request then a notification", r.Policies)
	}
	if !jsonEqual(r.Policies[0].Params, r.Policies[1].Params) {
		t.Errorf("the notification carried %s, the request %s: want the same policy", r.Policies[1].Params, r.Policies[0].Params)
	}
	policyParams(t, r.Policies[1].Params)
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "evt-04")), `{"accepted":true}`)
}

// TestPolicyMethodNotFoundNot04: the notification path is for 0.4 only; a
// 0.5 server (or one naming no version) that answers -32601 leaves MCPL off.
func TestPolicyMethodNotFoundNot04(t *testing.T) {
	for _, ad := range []string{adFull, `{"pushEvents":true,"channels":true}`} {
		rec := newRecorder()
		s := open(t, session.Config{Dial: spawn(t, "-mcpl", ad, "-policy", "method-not-found"), Logger: rec.Logger()})
		st := s.State()
		if st.Policy == nil || st.Policy.Outcome != grant.OutcomeUnanswered || !strings.Contains(st.Policy.Reason, "-32601") {
			t.Fatalf("%s: policy %+v, want unanswered naming -32601", ad, st.Policy)
		}
		if len(st.Grant.Effective) != 0 {
			t.Errorf("%s: effective grant %v, want none", ad, st.Grant.Effective)
		}
		if r := policyReport(t, s); len(r.Policies) != 1 || !r.Policies[0].AsRequest {
			t.Errorf("%s: policies %+v, want the request alone", ad, r.Policies)
		}
		if got := rec.One(t, "the initial policy was not answered; MCPL's privileged surface stays off, tools work"); !strings.Contains(got.Attr("reason"), "-32601") {
			t.Errorf("%s: log %+v, want the reason", ad, got)
		}
		if n := len(rec.Find("a 0.4 server refused the policy as a Request; sent it again as a notification (the 0.4 path)")); n != 0 {
			t.Errorf("%s: the 0.4 path was logged", ad)
		}
	}
}

// TestPolicyError: any other error answer leaves MCPL off, tools working, and
// one log line says why.
func TestPolicyError(t *testing.T) {
	rec := newRecorder()
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull, "-policy", "error"), Logger: rec.Logger()})
	st := s.State()
	const reason = "error -32000: policy store unavailable"
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeUnanswered || st.Policy.Reason != reason {
		t.Fatalf("policy %+v, want unanswered: %s", st.Policy, reason)
	}
	if got := rec.One(t, "the initial policy was not answered; MCPL's privileged surface stays off, tools work"); got.Attr("reason") != reason {
		t.Errorf("log %+v, want reason %q", got, reason)
	}
	if got := tool(t, s, "echo", map[string]string{"text": "tools work"}); got != "tools work" {
		t.Errorf("echo = %q", got)
	}
	wantError(t, send(t, s, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`),
		protocol.CodeCapabilityDenied, `{"capability":"channels.register"}`, `"channels.register"`, "policy is not yet established")
}

// inProcess is a Dial that runs the test server in this process over a pipe
// (for synctest bubbles, where no subprocess may run). The server's Exit
// closes its end. Each dial starts a fresh server, configured by cfgs (the
// last repeating); the first fail dials fail instead.
type inProcess struct {
	cfgs  []testserver.Config
	fail  int
	dials chan int // told each dial's number, when not nil

	mu    sync.Mutex
	n     int
	times []time.Time
	done  []chan struct{}
}

var errDial = errors.New("dial refused")

func (ip *inProcess) dial(context.Context) (transport.Stream, error) {
	ip.mu.Lock()
	ip.n++
	n := ip.n
	ip.times = append(ip.times, time.Now())
	ip.mu.Unlock()
	if ip.dials != nil {
		ip.dials <- n
	}
	if n <= ip.fail {
		return nil, errDial
	}
	cfg := ip.cfgs[min(n-ip.fail, len(ip.cfgs))-1]
	host, srv := transport.Pipe(0)
	cfg.Exit = func(int) { srv.Close() }
	done := make(chan struct{})
	ip.mu.Lock()
	ip.done = append(ip.done, done)
	ip.mu.Unlock()
	go func() {
		defer close(done)
		testserver.Serve(srv, cfg)
	}()
	return host, nil
}

// count returns how many dials there have been.
func (ip *inProcess) count() int {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return ip.n
}

// at returns when each dial happened.
func (ip *inProcess) at() []time.Time {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return append([]time.Time(nil), ip.times...)
}

// wait waits for every server it started to finish.
func (ip *inProcess) wait() {
	ip.mu.Lock()
	done := append([]chan struct{}(nil), ip.done...)
	ip.mu.Unlock()
	for _, d := range done {
		<-d
	}
}

// TestPolicyUnanswered: a server that never answers the policy request is
// given 15 s; then MCPL stays off and tools keep working.
func TestPolicyUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		sc := newScript(t)
		start := time.Now()
		c := connectAsync(session.Config{Dial: sc.dial, Logger: rec.Logger(), Handler: handled})
		sc.initialize(adFull)
		policy := sc.expect(protocol.MethodFeatureSetsUpdate) // never answered
		s := c.ok(t)
		if took := time.Since(start); took != 15*time.Second {
			t.Errorf("Connect took %v, want the 15s policy deadline", took)
		}
		sc.expectCancelled(policy, "no answer within 15s")
		st := s.State()
		if st.Policy == nil || st.Policy.Outcome != grant.OutcomeUnanswered || st.Policy.Reason != "no answer within 15s" {
			t.Errorf("policy %+v, want unanswered within 15s", st.Policy)
		}
		if len(st.Grant.Effective) != 0 {
			t.Errorf("grant %v, want none", st.Grant.Effective)
		}
		if got := rec.One(t, "the initial policy was not answered; MCPL's privileged surface stays off, tools work"); got.Attr("reason") != "no answer within 15s" {
			t.Errorf("log %+v", got)
		}
		done := make(chan error, 1)
		go func() {
			done <- s.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "echo"}, nil)
		}()
		sc.reply(sc.expect(protocol.MethodToolsCall), `{"content":[]}`)
		if err := <-done; err != nil {
			t.Errorf("a tool call with MCPL off: %v", err)
		}
		sc.request(1, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`)
		wantDenied(t, sc.answerTo(1), "channels.register", notEstablished)
	})
}

// TestPolicyUnansweredInProcess: the same against the real test server's
// own "ignore" policy, run in process.
func TestPolicyUnansweredInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ip := &inProcess{cfgs: []testserver.Config{{MCPL: []byte(adFull), Policy: "ignore"}}}
		defer ip.wait()
		start := time.Now()
		s, err := session.Connect(context.Background(), session.Config{ID: server, Dial: ip.dial, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if took := time.Since(start); took != 15*time.Second {
			t.Errorf("Connect took %v, want the 15s policy deadline", took)
		}
		if st := s.State(); st.Policy == nil || st.Policy.Outcome != grant.OutcomeUnanswered {
			t.Errorf("policy %+v", st.Policy)
		}
		if got := tool(t, s, "echo", map[string]string{"text": "ok"}); got != "ok" {
			t.Errorf("echo = %q", got)
		}
	})
}

// TestPolicyOnTheWire plays the server by hand and checks what the host
// writes, in order: initialize with the host's advertisement, then
// notifications/initialized before anything else (interop item 5: some
// servers drop or choke on any other message there), then the policy as a
// Request carrying all four lists even when nothing is enabled or denied.
func TestPolicyOnTheWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		c := connectAsync(session.Config{Dial: sc.dial, ClientName: "testhost", ClientVersion: "9.9"})
		init := sc.expect(protocol.MethodInitialize)
		var ip protocol.InitializeParams
		if err := json.Unmarshal(init.Params, &ip); err != nil {
			t.Fatal(err)
		}
		if ip.ProtocolVersion != protocol.LegacyVersions[0] || ip.ClientInfo != (protocol.Implementation{Name: "testhost", Version: "9.9"}) {
			t.Errorf("initialize params %s", init.Params)
		}
		if !jsonEqual(ip.Capabilities.Experimental["mcpl"], session.HostAdvertisement(served)) {
			t.Errorf("advertised %s, want HostAdvertisement(served)", ip.Capabilities.Experimental["mcpl"])
		}
		synctest.Wait()
		if extra := sc.pending(); len(extra) != 0 {
			t.Fatalf("the host wrote %v before initialize was answered", extra)
		}
		sc.reply(init, `{"capabilities":{"experimental":{"mcpl":{"version":"0.5"}}}}`)
		sc.expect(protocol.MethodInitialized)
		pol := sc.expect(protocol.MethodFeatureSetsUpdate)
		if pol.ID == nil {
			t.Fatalf("the policy was sent as a notification: %s", pol)
		}
		p := policyParams(t, pol.Params)
		if len(p.EffectiveCapabilities)+len(p.DeniedCapabilities)+len(p.Enabled)+len(p.Disabled) != 0 {
			t.Errorf("policy %+v, want every list empty", p)
		}
		sc.reply(pol, `{"accepted":true}`)
		s := c.ok(t)
		if st := s.State(); st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted || st.Init.ServerInfo != nil {
			t.Errorf("state %+v", st)
		}
	})
}

// TestPlainMCPServer: a server without experimental.mcpl gets no policy
// message at all (SPEC §3.3); tools work and MCPL is off.
func TestPlainMCPServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		c := connectAsync(session.Config{Dial: sc.dial})
		sc.initialize("")
		s := c.ok(t)
		if st := s.State(); st.Advertisement != nil || st.Policy != nil || len(st.Grant.Effective) != 0 {
			t.Errorf("state %+v, want MCPL off with no policy", st)
		}
		go s.Call(context.Background(), protocol.MethodToolsList, nil, nil)
		list := sc.expect(protocol.MethodToolsList) // not featureSets/update
		sc.reply(list, `{"tools":[]}`)
		// A privileged request from a plain server is refused, not left
		// hanging.
		sc.request(1, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`)
		wantError(t, sc.answerTo(1), protocol.CodeCapabilityDenied, `{"capability":"channels.register"}`, `"channels.register"`)
	})
}

// TestPolicyConnectionDies: a server that dies during the policy exchange
// leaves no session claiming to be connected: Connect fails.
func TestPolicyConnectionDies(t *testing.T) {
	rec := newRecorder()
	s, err := session.Connect(context.Background(), session.Config{
		ID: server, Dial: spawn(t, "-mcpl", adFull, "-crash-after", "2"), Logger: rec.Logger(),
	})
	if err == nil {
		st := s.State()
		s.Close()
		t.Fatalf("Connect succeeded on a connection that died during the policy exchange (state %+v)", st)
	}
	if !errors.Is(err, wire.ErrConnClosed) || !strings.Contains(err.Error(), "connection closed during the policy exchange") {
		t.Errorf("Connect error %q", err)
	}
	if n := len(rec.Find("the initial policy was not answered; MCPL's privileged surface stays off, tools work")); n != 0 {
		t.Error("logged that tools work on a connection that is gone")
	}
}

// TestPolicyCanceled: a caller that gives up during the policy exchange gets
// an error, not a session with MCPL quietly off.
func TestPolicyCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			s, err := session.Connect(ctx, session.Config{ID: server, Dial: sc.dial, Logger: discard})
			if err == nil {
				s.Close()
			}
			done <- err
		}()
		sc.initialize(adFull)
		sc.expect(protocol.MethodFeatureSetsUpdate)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Connect after its context was cancelled = %v, want context.Canceled", err)
		}
		if !sc.isClosed() {
			t.Error("the abandoned connection was not closed")
		}
	})
}
