package session_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/protocol"
)

// The hazards of reference/interop.md, each reproduced against the real
// test server and survived. Items 4 (the policy answered with a receipt,
// -32601 or nothing) and 5 (notifications/initialized first) are in
// policy_test.go: TestPolicyAccepted, TestPolicyDegraded,
// TestPolicy04MethodNotFound, TestPolicyUnanswered, TestPolicyOnTheWire.
// Item 6 (traffic before policy) is also the before-policy column of the
// admission matrix (TestAdmitBeforePolicy, TestHeldThenDecided).

// Item 1: the server numbers its requests from 1, colliding with the host's
// ids. The host's first tool call after connecting has id 3 (initialize 1,
// the policy 2); the server sends a request with id 3 while that call is
// pending. It is a request to answer, not the answer to the call.
func TestInterop01TwoIDSpaces(t *testing.T) {
	box := newInbox()
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull), Implemented: everything, Handler: handled, OnInbound: box.onInbound})
	for _, id := range []int{3, 1, 2} {
		if got := tool(t, s, "ask_host", map[string]any{"method": protocol.MethodChannelsList, "id": id}); got != "asked" {
			t.Fatalf("ask_host with id %d answered %q, want asked: the inbound request was taken for an answer", id, got)
		}
	}
	in := box.wait(t, 3)
	for _, r := range in {
		if r.Method != protocol.MethodChannelsList || !r.Request || !r.Admitted {
			t.Errorf("inbound %+v, want channels/list admitted as a request", r)
		}
	}
	// The server's own numbering, from 1, on its -early requests: the
	// answers go to it, and the host's own calls are unaffected.
	s2 := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull, "-early", protocol.MethodChannelsList), Implemented: everything, Handler: handled})
	wantResult(t, earlyAnswers(t, s2, 1)[0], `{"handled":"channels/list"}`)
	if got := tool(t, s2, "echo", map[string]string{"text": "x"}); got != "x" {
		t.Errorf("echo = %q", got)
	}
}

// Item 2: featureSets as an array (0.4), a record keyed by name (0.5), or a
// record whose values carry their name.
func TestInterop02FeatureSetShapes(t *testing.T) {
	for _, tc := range []struct{ name, ad string }{
		{"array", `{"version":"0.4","pushEvents":true,"featureSets":[{"name":"chat","description":"c","uses":["pushEvents"]}]}`},
		{"record", `{"version":"0.5","pushEvents":true,"featureSets":{"chat":{"description":"c","uses":["pushEvents"]}}}`},
		{"record with names", `{"version":"0.5","pushEvents":true,"featureSets":{"first":{"name":"chat","description":"c","uses":["pushEvents"]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, session.Config{Dial: spawn(t, "-mcpl", tc.ad)})
			if fs, ok := s.Grant().FeatureSet("chat"); !ok || fs.State != grant.StateEnabled {
				t.Fatalf("feature set chat = %+v (declared %v), want enabled", fs, ok)
			}
			p := policyParams(t, policyReport(t, s).Policies[0].Params)
			if !cmp.Equal(p.Enabled, []string{"chat"}) || len(p.Disabled) != 0 {
				t.Errorf("policy %+v, want chat enabled", p)
			}
			wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "e-"+tc.name)), `{"accepted":true}`)
		})
	}
}

// Item 3: version 0.4 or 0.5; channels as true (every channel leaf), false
// (none), or an object with a leaf no spec defines, which is ignored and
// never granted.
func TestInterop03VersionsAndChannels(t *testing.T) {
	for _, tc := range []struct {
		name, ad  string
		effective []string
		ignored   []string
		register  bool
	}{
		{"0.4 channels true", `{"version":"0.4","channels":true}`, []string{"channels.incoming", "channels.register", "tools"}, []string{}, true},
		{"0.5 channels true", `{"version":"0.5","channels":true}`, []string{"channels.incoming", "channels.register", "tools"}, []string{}, true},
		{"channels false", `{"version":"0.5","channels":false}`, []string{"tools"}, []string{}, false},
		{"non-spec leaf", `{"version":"0.5","channels":{"register":true,"observe":true}}`, []string{"channels.register", "tools"}, []string{"channels.observe"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, session.Config{Dial: spawn(t, "-mcpl", tc.ad), Handler: handled})
			st := s.State()
			if st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted {
				t.Fatalf("policy %+v", st.Policy)
			}
			if diff := cmp.Diff(tc.effective, st.Grant.Effective); diff != "" {
				t.Errorf("effective (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ignored, st.Advertisement.Ignored); diff != "" {
				t.Errorf("ignored (-want +got):\n%s", diff)
			}
			p := policyParams(t, policyReport(t, s).Policies[0].Params)
			if slices.Contains(p.EffectiveCapabilities, "channels.observe") || slices.Contains(p.DeniedCapabilities, "channels.observe") {
				t.Errorf("policy %+v mentions a leaf no spec defines", p)
			}
			a := send(t, s, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`)
			if tc.register {
				wantResult(t, a, `{"results":[{"id":"general","accepted":true}]}`)
			} else {
				wantDenied(t, a, "channels.register", notGranted)
			}
		})
	}
}

// Item 6: several requests before policy, channels/register and even
// inference/request, are all held and answered.
func TestInterop06TrafficBeforePolicy(t *testing.T) {
	box := newInbox()
	s := open(t, session.Config{
		Dial:        spawn(t, "-mcpl", adFull, "-early", protocol.MethodChannelsRegister, "-early", protocol.MethodInferenceRequest),
		Implemented: everything, Handler: handled, OnInbound: box.onInbound,
	})
	got := map[string]bool{}
	for _, a := range earlyAnswers(t, s, 2) {
		got[string(a.Result)] = true
	}
	if !got[`{"results":[{"id":"general","accepted":true}]}`] || !got[`{"handled":"inference/request"}`] {
		t.Errorf("early answers %v, want both admitted", got)
	}
	for _, in := range box.wait(t, 2) {
		if !in.Admitted {
			t.Errorf("inbound %+v", in)
		}
	}
}

// Item 9: channels/changed arrives as a request and gets itemized results,
// one per descriptor (the host's handler builds them; admission passes the
// request through untouched).
func TestInterop09ChannelsChangedRequest(t *testing.T) {
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull), Handler: handled})
	wantResult(t, send(t, s, protocol.MethodChannelsChanged, `{"added":[{"id":"a"},{"id":"b"}],"removed":["c"]}`),
		`{"results":[{"id":"a","accepted":true},{"id":"b","accepted":true},{"id":"c","accepted":true}]}`)
}

// Item 10: an initialize result without protocolVersion or serverInfo.
func TestInterop10NoServerInfo(t *testing.T) {
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull, "-no-server-info")})
	st := s.State()
	if st.Init.ServerInfo != nil || st.Init.ProtocolVersion != "" {
		t.Fatalf("init %+v, want no serverInfo or protocolVersion", st.Init)
	}
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted {
		t.Errorf("policy %+v", st.Policy)
	}
	if got := tool(t, s, "echo", map[string]string{"text": "ok"}); got != "ok" {
		t.Errorf("echo = %q", got)
	}
}

// Item 11: lines that are not JSON-RPC messages, before the handshake and in
// the middle of the connection, are skipped.
func TestInterop11Noise(t *testing.T) {
	noise := []string{"console.log banner", "null", "42", `"just a string"`, "[1,2]", `{"no":"jsonrpc"}`}
	var args []string
	for _, n := range noise {
		args = append(args, "-banner", n)
	}
	s := open(t, session.Config{Dial: spawn(t, append(args, "-mcpl", adFull)...)})
	if st := s.State(); st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted {
		t.Fatalf("policy %+v after a noisy start", st.Policy)
	}
	if got := tool(t, s, "noise", map[string]any{"lines": noise}); got != "after noise" {
		t.Errorf("noise = %q", got)
	}
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "after-noise")), `{"accepted":true}`)
}
