package session_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/session"
)

// These tests play the server by hand inside a synctest bubble, so "held"
// is exact: synctest.Wait() lets the host do everything it can, and then
// whatever it has not written, it is holding.

// TestHeldThenDecided is the acceptance: a server's privileged
// requests before policy are held (not answered while the exchange is
// open), then admitted when granted or rejected with -32002 when not, in
// the order they came, never dropped or left unanswered.
func TestHeldThenDecided(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  grant.Policy
		receipt string
		want    func(t testing.TB, method, capability string, a answer)
	}{
		{"granted", grant.Policy{}, `{"accepted":true}`, func(t testing.TB, method, _ string, a answer) {
			wantEarlyAdmitted(t, method, a)
		}},
		{"not granted", disableAll, `{"accepted":true}`, func(t testing.TB, _, capability string, a answer) {
			wantDenied(t, a, capability, notGranted)
		}},
		{"refused", grant.Policy{}, `{"accepted":false,"fallback":"mcp-only","reason":"no"}`, func(t testing.TB, _, capability string, a answer) {
			wantDenied(t, a, capability, notEstablished)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := newScript(t)
				box := newInbox()
				c := connectAsync(session.Config{Dial: sc.dial, Implemented: everything, Policy: tc.policy, Handler: handled, OnInbound: box.onInbound})
				sc.initialize(adFull)
				pol := sc.expect(protocol.MethodFeatureSetsUpdate)
				for i, m := range privileged {
					sc.request(i+1, m.method, `{"channels":[{"id":"general","label":"#general"}]}`)
				}
				synctest.Wait()
				if got := sc.pending(); len(got) != 0 {
					t.Fatalf("the host answered before the policy settled: %v", got)
				}
				if in := box.all(); len(in) != 0 {
					t.Fatalf("admission decided before the policy settled: %+v", in)
				}
				sc.reply(pol, tc.receipt)
				c.ok(t)
				for i, m := range privileged {
					tc.want(t, m.method, m.capability, sc.answerTo(i+1))
				}
				if in := box.all(); len(in) != len(privileged) {
					t.Errorf("%d inbound records, want %d", len(in), len(privileged))
				}
			})
		})
	}
}

// TestHeldRefusedClose: a refusal with fallback close closes the connection
// with held requests in it; they do not outlive it (goleak, and the bubble,
// would see a handler still waiting).
func TestHeldRefusedClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		c := connectAsync(session.Config{Dial: sc.dial, Implemented: everything, Handler: handled})
		sc.initialize(adFull)
		pol := sc.expect(protocol.MethodFeatureSetsUpdate)
		sc.request(1, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`)
		synctest.Wait()
		sc.reply(pol, `{"accepted":false,"fallback":"close","reason":"bye"}`)
		_, err := c.wait(t)
		if !errors.Is(err, session.ErrRefusedClose) {
			t.Fatalf("Connect = %v, want ErrRefusedClose", err)
		}
		if !sc.isClosed() {
			t.Error("the connection was not closed after a refusal with fallback close")
		}
		for _, m := range sc.pending() {
			if m.Error == nil || m.Error.Code != protocol.CodeCapabilityDenied {
				t.Errorf("the host wrote %s: a held request may only be refused", m)
			}
		}
	})
}
