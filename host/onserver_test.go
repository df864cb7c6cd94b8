package host_test

import (
	"testing"

	"github.com/mcpl-go/mcpl/host"
)

// OnServer never reads a channel's decision: a decision to open whose open
// failed is "open failed", an open out is "opening" even after a failure,
// and what the host can't know is "unknown".
func TestChannelStateOnServer(t *testing.T) {
	reg := host.ChannelState{Registered: true, Lifecycle: true, Decision: "open", Source: "agent-tool"}
	with := func(f func(*host.ChannelState)) host.ChannelState { c := reg; f(&c); return c }
	for _, tc := range []struct {
		c    host.ChannelState
		want string
	}{
		{host.ChannelState{Decision: "open"}, host.OnServerNotRegistered},
		{with(func(c *host.ChannelState) { c.Lifecycle, c.Confirmed, c.Open = false, true, true }), host.OnServerUnknown},
		{reg, host.OnServerUnknown},
		{with(func(c *host.ChannelState) { c.OpenFailed = "no answer" }), host.OnServerOpenFailed},
		{with(func(c *host.ChannelState) { c.CloseFailed = "no answer"; c.Decision = "closed" }), host.OnServerCloseFailed},
		{with(func(c *host.ChannelState) { c.OpenFailed, c.Pending = "no answer", "open" }), host.OnServerOpening},
		{with(func(c *host.ChannelState) { c.Pending = "close" }), host.OnServerClosing},
		{with(func(c *host.ChannelState) { c.Confirmed, c.Open = true, true }), host.OnServerOpen},
		{with(func(c *host.ChannelState) { c.Confirmed = true }), host.OnServerClosed},
	} {
		if got := tc.c.OnServer(); got != tc.want {
			t.Errorf("%+v: OnServer = %q, want %q", tc.c, got, tc.want)
		}
	}
}
