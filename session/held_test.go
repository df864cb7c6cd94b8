package session_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/session"
)

// These tests play the server by hand inside a synctest bubble, so "held"
// is exact: synctest.Wait() lets the host do everything it can, and then
// whatever it has not written, it is holding.

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
