package session_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// privileged lists every privileged inbound method, the capability that
// admits it, params to send, and what the test host (handled) answers when
// it is admitted.
var privileged = []struct {
	method, capability, params, admitted string
}{
	{protocol.MethodPushEvent, "pushEvents", pushParams("chat", "evt-matrix"), `{"accepted":true}`},
	{protocol.MethodChannelsRegister, "channels.register", `{"channels":[{"id":"general","label":"#general"}]}`,
		`{"results":[{"id":"general","accepted":true}]}`},
	{protocol.MethodChannelsChanged, "channels.register", `{"added":[{"id":"random"}],"removed":["general"]}`,
		`{"results":[{"id":"random","accepted":true},{"id":"general","accepted":true}]}`},
	{protocol.MethodChannelsList, "channels.register", `{}`, `{"handled":"channels/list"}`},
	{protocol.MethodChannelsIncoming, "channels.incoming",
		`{"messages":[{"channelId":"general","messageId":"m1","content":[{"type":"text","text":"hi"}]}]}`, `{"handled":"channels/incoming"}`},
	{protocol.MethodInferenceRequest, "inferenceRequest",
		`{"featureSet":"chat","messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}`, `{"handled":"inference/request"}`},
	{protocol.MethodModelInfo, "modelInfo", `{}`, `{"handled":"model/info"}`},
}

// earlyAdmitted is what the test host answers each method sent by -early,
// whose params are always {"channels":[{"id":"general","label":"#general"}]}.
// push/event passes admission and then fails validation: it names no
// feature set.
var earlyAdmitted = map[string]string{
	protocol.MethodChannelsRegister: `{"results":[{"id":"general","accepted":true}]}`,
	protocol.MethodChannelsChanged:  `{"results":[]}`,
	protocol.MethodChannelsList:     `{"handled":"channels/list"}`,
	protocol.MethodChannelsIncoming: `{"handled":"channels/incoming"}`,
	protocol.MethodInferenceRequest: `{"handled":"inference/request"}`,
	protocol.MethodModelInfo:        `{"handled":"model/info"}`,
}

// wantEarlyAdmitted checks the answer to an admitted -early method.
func wantEarlyAdmitted(t testing.TB, method string, a answer) {
	t.Helper()
	if method == protocol.MethodPushEvent {
		wantError(t, a, protocol.CodeFeatureSetNotEnabled, `{"featureSet":""}`)
		return
	}
	wantResult(t, a, earlyAdmitted[method])
}

// wantDenied checks a -32002 naming capability and why.
func wantDenied(t testing.TB, a answer, capability, why string) {
	t.Helper()
	wantError(t, a, protocol.CodeCapabilityDenied, fmt.Sprintf(`{"capability":%q}`, capability), fmt.Sprintf("%q", capability), why)
	for _, other := range []string{notGranted, notEstablished, notImplemented, disabledByPolicy} {
		if other != why && strings.Contains(a.Error.Message, other) {
			t.Fatalf("denial %q says both %q and %q", a.Error.Message, why, other)
		}
	}
}

// The words of a -32002 that say why: the capability is not in an
// established grant, or policy is not established on the connection; or,
// decided at once, before any policy, this host can never grant it.
const (
	notGranted       = "is not in the effective grant"
	notEstablished   = "policy is not yet established"
	notImplemented   = "is not implemented by this host"
	disabledByPolicy = "is disabled by this host's policy"
)

// disableAll is host policy that denies every privileged capability the
// test server advertises.
var disableAll = grant.Policy{Disable: []string{"pushEvents", "channels", "inferenceRequest", "modelInfo"}}

// countingHandler wraps handled and counts what reaches it.
type countingHandler struct {
	mu    sync.Mutex
	calls []string
}

func (h *countingHandler) Serve(ctx context.Context, req *wire.Request) (any, error) {
	h.mu.Lock()
	h.calls = append(h.calls, req.Method)
	h.mu.Unlock()
	return handled.Serve(ctx, req)
}

func (h *countingHandler) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// TestAdmitGranted: the admission matrix's granted column, on the wire.
func TestAdmitGranted(t *testing.T) {
	box := newInbox()
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull), Implemented: everything, Handler: handled, OnPushEvent: box.onPush, OnInbound: box.onInbound})
	for i, m := range privileged {
		wantResult(t, send(t, s, m.method, m.params), m.admitted)
		in := box.wait(t, i+1)[i]
		if in.Method != m.method || !in.Request || !in.Admitted {
			t.Errorf("inbound %+v, want %s admitted", in, m.method)
		}
	}
}

// TestAdmitNotGranted: the not-granted column, for each way a capability
// can be missing from an established grant.
func TestAdmitNotGranted(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ad          string
		implemented []string
		policy      grant.Policy
		why         string
	}{
		{"host policy disables it", adFull, everything, disableAll, disabledByPolicy},
		{"host policy leaves it out", adFull, everything, grant.Policy{Enable: []string{"tools"}}, disabledByPolicy},
		{"the server does not advertise it", `{"version":"0.5","featureSets":{"chat":{"description":"c","uses":["pushEvents"]}}}`, everything, grant.Policy{}, notGranted},
		{"this host does not implement it", adFull, session.DefaultImplemented(), grant.Policy{}, notImplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &countingHandler{}
			box := newInbox()
			s := open(t, session.Config{Dial: spawn(t, "-mcpl", tc.ad), Implemented: tc.implemented, Policy: tc.policy, Handler: h, OnInbound: box.onInbound})
			if st := s.State(); st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted {
				t.Fatalf("policy %+v, want accepted", st.Policy)
			}
			n := 0
			for _, m := range privileged {
				wantDenied(t, send(t, s, m.method, m.params), m.capability, tc.why)
				if !strings.Contains(send(t, s, m.method, m.params).Error.Message, m.method) {
					t.Errorf("the denial of %s does not name the method", m.method)
				}
				n += 2
				in := box.wait(t, n)[n-1]
				if in.Method != m.method || in.Admitted || in.Reason == "" {
					t.Errorf("inbound %+v, want %s rejected with a reason", in, m.method)
				}
			}
			if got := h.got(); len(got) != 0 {
				t.Errorf("denied methods reached the handler: %v", got)
			}
		})
	}
}

// TestAdmitBeforePolicy: the before-policy column. Each method is sent by
// the server right after notifications/initialized, before the policy
// exchange. One host policy could grant is held, then admitted or rejected
// against the grant the exchange settles on; one it can never grant is
// rejected at once (TestNeverGrantableNotHeld times that). Never dropped,
// never left unanswered.
func TestAdmitBeforePolicy(t *testing.T) {
	for _, m := range privileged {
		t.Run(m.method, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name   string
				args   []string
				policy grant.Policy
				check  func(t testing.TB, a answer)
			}{
				{"granted", nil, grant.Policy{}, func(t testing.TB, a answer) { wantEarlyAdmitted(t, m.method, a) }},
				{"never grantable", nil, disableAll, func(t testing.TB, a answer) { wantDenied(t, a, m.capability, disabledByPolicy) }},
				{"not advertised", []string{"-mcpl", `{"version":"0.5"}`}, grant.Policy{}, func(t testing.TB, a answer) { wantDenied(t, a, m.capability, notGranted) }},
				{"policy unanswered", []string{"-policy", "error"}, grant.Policy{}, func(t testing.TB, a answer) { wantDenied(t, a, m.capability, notEstablished) }},
				{"policy refused", []string{"-policy", "refuse"}, grant.Policy{}, func(t testing.TB, a answer) { wantDenied(t, a, m.capability, notEstablished) }},
			} {
				box := newInbox()
				args := append([]string{"-mcpl", adFull, "-early", m.method}, tc.args...)
				s := open(t, session.Config{Dial: spawn(t, args...), Implemented: everything, Policy: tc.policy, Handler: handled, OnInbound: box.onInbound})
				early := earlyAnswers(t, s, 1)
				tc.check(t, early[0])
				if in := box.all(); len(in) != 1 || in[0].Method != m.method || !in[0].Request {
					t.Errorf("%s: inbound %+v, want the one early request", tc.name, in)
				}
				s.Close()
			}
		})
	}
}

// TestAdmitAfterReconnect: the last column. The first connection grants
// everything; the server dies; the grant is dropped at once; the new
// connection's policy exchange fails, and nothing of the old grant
// survives: a request held before the new policy, and one after it, are
// both refused as policy not established.
func TestAdmitAfterReconnect(t *testing.T) {
	for _, m := range privileged {
		t.Run(m.method, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			d := newDialer(t, []string{"-mcpl", adFull}, []string{"-mcpl", adFull, "-policy", "error", "-early", m.method})
			gate := make(chan struct{})
			d.gate = map[int]chan struct{}{2: gate}
			s := open(t, session.Config{
				Dial: d.dial, Implemented: everything, Handler: handled, OnPushEvent: newInbox().onPush, Logger: rec.Logger(),
				Reconnect: session.Reconnect{Enabled: true, Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond},
			})
			wantResult(t, send(t, s, m.method, m.params), m.admitted)

			_, err := toolErr(s, "exit", map[string]int{"code": 1})
			wantFailure(t, err, closedPendingReconnecting)
			if g := s.Grant(); len(g.Effective) != 0 {
				t.Errorf("grant %v after the connection closed, want it dropped at once", g.Effective)
			}
			if st := s.State(); st.Connected || st.Policy != nil {
				t.Errorf("state %+v after the connection closed", st)
			}
			close(gate)
			rec.Wait(t, "reconnected", 1)

			early := earlyAnswers(t, s, 1)
			wantDenied(t, early[0], m.capability, notEstablished)
			wantDenied(t, send(t, s, m.method, m.params), m.capability, notEstablished)
			if g := s.Grant(); len(g.Effective) != 0 {
				t.Errorf("grant %v on the new connection, want none: an old grant is never restored", g.Effective)
			}
		})
	}
}

// TestRemovedMethods: featureSets/changed and scope/elevate get -32601
// saying what replaced them.
func TestRemovedMethods(t *testing.T) {
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull), Implemented: everything, Handler: handled})
	wantError(t, send(t, s, protocol.MethodFeatureSetsChanged, `{"enabled":["chat"]}`), protocol.CodeMethodNotFound, "",
		"featureSets/changed was removed", "mcpl/manifestChanged")
	wantError(t, send(t, s, protocol.MethodScopeElevate, `{"scope":"x"}`), protocol.CodeMethodNotFound, "",
		"scope/elevate was removed", "grant")
	// Any other unknown method is method-not-found too.
	wantError(t, send(t, s, "state/update", `{}`), protocol.CodeMethodNotFound, "", "state/update")
}

// TestUnhandledAdmitted: an admitted method the host does not handle is
// answered with an error, never silence; model/info says there is no
// truthful model information.
func TestUnhandledAdmitted(t *testing.T) {
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull), Implemented: everything})
	wantError(t, send(t, s, protocol.MethodModelInfo, `{}`), protocol.CodeMethodNotFound, "", "model/info", "no truthful model information")
	for _, m := range privileged[1:6] {
		wantError(t, send(t, s, m.method, m.params), protocol.CodeMethodNotFound, "", m.method, "not implemented")
	}
	// Not implemented, it is -32002 all the same.
	s2 := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull)})
	wantDenied(t, send(t, s2, protocol.MethodModelInfo, `{}`), "modelInfo", notImplemented)
}

// TestDeniedNotification: a denied privileged notification is dropped with a
// log line, and the host is told; an admitted one reaches the handler.
func TestDeniedNotification(t *testing.T) {
	rec := newRecorder()
	box := newInbox()
	h := &countingHandler{}
	s := open(t, session.Config{
		Dial: spawn(t, "-mcpl", adFull), Implemented: everything, Handler: h, OnInbound: box.onInbound, Logger: rec.Logger(),
		Policy: grant.Policy{Disable: []string{"channels.incoming"}},
	})
	notify(t, s, protocol.MethodChannelsIncoming, privileged[4].params)
	in := box.wait(t, 1)[0]
	if in.Method != protocol.MethodChannelsIncoming || in.Request || in.Admitted {
		t.Errorf("inbound %+v, want a denied notification", in)
	}
	rec.Wait(t, "privileged notification discarded", 1) // logged after OnInbound is told
	got := rec.One(t, "privileged notification discarded")
	if got.Attr("method") != protocol.MethodChannelsIncoming || got.Attr("capability") != "channels.incoming" {
		t.Errorf("log %+v", got)
	}
	notify(t, s, protocol.MethodChannelsChanged, `{"added":[{"id":"random"}]}`)
	if in := box.wait(t, 2)[1]; !in.Admitted || in.Request {
		t.Errorf("inbound %+v, want an admitted notification", in)
	}
	// The handler runs after OnInbound; a request behind the notification
	// is handled after it.
	send(t, s, protocol.MethodChannelsList, `{}`)
	if calls := h.got(); len(calls) != 2 || calls[0] != protocol.MethodChannelsChanged {
		t.Errorf("handler calls %v, want channels/changed then channels/list", calls)
	}
}
