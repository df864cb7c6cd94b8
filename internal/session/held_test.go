package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
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
		ad      string
		receipt string
		want    func(t testing.TB, method, capability string, a answer)
	}{
		{"granted", adFull, `{"accepted":true}`, func(t testing.TB, method, _ string, a answer) {
			wantEarlyAdmitted(t, method, a)
		}},
		{"refused", adFull, `{"accepted":false,"fallback":"mcp-only","reason":"no"}`, func(t testing.TB, _, capability string, a answer) {
			wantDenied(t, a, capability, notEstablished)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := newScript(t)
				box := newInbox()
				c := connectAsync(session.Config{Dial: sc.dial, Implemented: everything, Handler: handled, OnInbound: box.onInbound})
				sc.initialize(tc.ad)
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

// TestNeverGrantableNotHeld: a privileged request that can never be
// granted on the connection (not implemented, disabled by host policy, not
// advertised by the server) is rejected at once, while the policy exchange
// is open and behind a held request, and so is a ping answered at once:
// holding is a side queue, not a stop. The held request is decided when
// the policy settles.
func TestNeverGrantableNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		box := newInbox()
		c := connectAsync(session.Config{
			Dial: sc.dial, Implemented: []string{"tools", "channels.register", "channels.incoming", "modelInfo"},
			Policy: grant.Policy{Disable: []string{"channels.incoming"}}, Handler: handled, OnInbound: box.onInbound,
		})
		sc.initialize(`{"version":"0.5","pushEvents":true,"channels":true}`)
		pol := sc.expect(protocol.MethodFeatureSetsUpdate)
		sc.request(1, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`)
		sc.request(2, protocol.MethodPushEvent, pushParams("chat", "e1"))
		sc.request(3, protocol.MethodChannelsIncoming, privileged[4].params)
		sc.request(4, protocol.MethodPing, `{}`)
		sc.request(5, protocol.MethodModelInfo, `{}`)
		synctest.Wait()
		got := map[string]msg{}
		for _, m := range sc.pending() {
			got[string(m.ID)] = m
		}
		if _, answered := got["1"]; answered || len(got) != 4 {
			t.Fatalf("before the policy settled the host wrote %v; want answers to 2, 3, 4 and 5 only", sc.pending())
		}
		wantDenied(t, got["2"].asAnswer(), "pushEvents", notImplemented)
		wantDenied(t, got["3"].asAnswer(), "channels.incoming", disabledByPolicy)
		wantResult(t, got["4"].asAnswer(), `{}`) // the session answers ping itself
		wantDenied(t, got["5"].asAnswer(), "modelInfo", notGranted)
		if !strings.Contains(got["5"].Error.Message, "the server did not advertise it") {
			t.Errorf("model/info refused with %q, want the reason: not advertised", got["5"].Error.Message)
		}
		sc.reply(pol, `{"accepted":true}`)
		c.ok(t)
		wantResult(t, sc.answerTo(1), `{"results":[{"id":"general","accepted":true}]}`)
		in := box.all()
		if len(in) != 4 || in[0].Method != protocol.MethodPushEvent || in[3].Method != protocol.MethodChannelsRegister || !in[3].Admitted {
			t.Errorf("inbound %+v: want the three rejections, then the held register admitted", in)
		}
	})
}

// TestHeldBound: at most MaxHeld requests are held; beyond that they are
// refused at once (-32000), and the held ones are still decided.
func TestHeldBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxHeld = 5
		sc := newScript(t)
		c := connectAsync(session.Config{Dial: sc.dial, Implemented: everything, Handler: handled, MaxHeld: maxHeld})
		sc.initialize(adFull)
		pol := sc.expect(protocol.MethodFeatureSetsUpdate)
		// The first is taken up and held; the rest queue behind it.
		sc.request(1, protocol.MethodChannelsList, `{}`)
		synctest.Wait()
		const sent = maxHeld + 3
		for id := 2; id <= sent; id++ {
			sc.request(id, protocol.MethodChannelsList, `{}`)
		}
		synctest.Wait()
		refused := map[string]bool{}
		for _, m := range sc.pending() {
			if m.Error == nil || m.Error.Code != wire.CodeOverloaded {
				t.Fatalf("before the policy settled the host wrote %s, want only overload refusals", m)
			}
			refused[string(m.ID)] = true
		}
		if held := sent - len(refused); held != maxHeld {
			t.Errorf("%d requests held, want MaxHeld = %d (refused %v)", held, maxHeld, refused)
		}
		sc.reply(pol, `{"accepted":true}`)
		c.ok(t)
		synctest.Wait()
		answered := 0
		for _, m := range sc.pending() {
			if refused[string(m.ID)] {
				t.Errorf("request %s answered twice", m.ID)
			}
			wantResult(t, m.asAnswer(), `{"handled":"channels/list"}`)
			answered++
		}
		if answered != sent-len(refused) {
			t.Errorf("%d held requests answered after the policy, want %d", answered, sent-len(refused))
		}
	})
}

// TestHeldConnectionEnds: a request held when the connection ends is
// answered (while the stream still takes writes) as refused, policy not
// established, and the host is told; Connect fails, as the connection is
// gone.
func TestHeldConnectionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		box := newInbox()
		c := connectAsync(session.Config{Dial: sc.dial, Implemented: everything, Handler: handled, OnInbound: box.onInbound})
		sc.initialize(adFull)
		sc.expect(protocol.MethodFeatureSetsUpdate)
		sc.request(7, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`)
		synctest.Wait()
		sc.end()
		wantDenied(t, sc.answerTo(7), "channels.register", notEstablished)
		if _, err := c.wait(t); err == nil {
			t.Error("Connect succeeded on a connection that ended during the policy exchange")
		}
		if in := box.all(); len(in) != 1 || in[0].Admitted {
			t.Errorf("inbound %+v, want the held request rejected", in)
		}
		if !sc.isClosed() {
			t.Error("the connection was not closed")
		}
	})
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

// TestGrantDroppedAtOnce: when the connection ends, the grant is gone at
// that moment, even while the connection's handler is still finishing
// something; a request already received then is not admitted on a
// connection that is gone.
func TestGrantDroppedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newScript(t)
		box := newInbox()
		release := make(chan struct{})
		slow := wire.HandlerFunc(func(ctx context.Context, req *wire.Request) (any, error) {
			if req.Method == protocol.MethodChannelsList {
				<-release // a handler slow to notice the end
			}
			return handled.Serve(ctx, req)
		})
		c := connectAsync(session.Config{Dial: sc.dial, Implemented: everything, Handler: slow, OnInbound: box.onInbound})
		sc.initialize(adFull)
		sc.reply(sc.expect(protocol.MethodFeatureSetsUpdate), `{"accepted":true}`)
		s := c.ok(t)
		if g := s.Grant(); !g.Has("channels.register") {
			t.Fatalf("grant %v", g.Effective)
		}
		sc.request(1, protocol.MethodChannelsList, `{}`)
		sc.request(2, protocol.MethodChannelsRegister, `{"channels":[{"id":"general"}]}`)
		synctest.Wait() // channels/list is in the handler; channels/register waits behind it
		sc.end()
		synctest.Wait()
		if g := s.Grant(); len(g.Effective) != 0 {
			t.Errorf("grant %v after the connection ended, want it dropped at once", g.Effective)
		}
		if st := s.State(); st.Connected || st.Policy != nil || len(st.Grant.Effective) != 0 {
			t.Errorf("state %+v after the connection ended", st)
		}
		err := s.Call(context.Background(), protocol.MethodToolsList, nil, nil)
		wantFailure(t, err, notSentNoReconnect)
		close(release)
		wantResult(t, sc.answerTo(1), `{"handled":"channels/list"}`)
		wantDenied(t, sc.answerTo(2), "channels.register", notEstablished)
		in := box.all()
		if len(in) != 2 || !in[0].Admitted || in[1].Admitted {
			t.Errorf("inbound %+v: want channels/list admitted before the end, channels/register not after it", in)
		}
	})
}
