package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpl-go/mcpl/internal/metrics"
)

// A server that invents method names can't grow the series: every name
// outside the protocol is counted as "other".
func TestInventedMethodsAreOther(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, func() metrics.Snapshot { return metrics.Snapshot{} })
	if err != nil {
		t.Fatal(err)
	}
	o := m.Server("evil")
	for i := range 1000 {
		o.Answered("x/"+strings.Repeat("y", i%7), "error", time.Millisecond)
	}
	o.Called("channels/open", "ok", time.Millisecond)
	if n := testutil.CollectAndCount(reg, "mcpl_requests_total"); n != 2 {
		t.Errorf("%d request series, want 2 (other, and channels/open)", n)
	}
	want := `
# HELP mcpl_requests_total JSON-RPC requests that ended, by server, direction (sent by this host, or answered by it), method and outcome.
# TYPE mcpl_requests_total counter
mcpl_requests_total{direction="answered",method="other",outcome="error",server="evil"} 1000
mcpl_requests_total{direction="sent",method="channels/open",outcome="ok",server="evil"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpl_requests_total"); err != nil {
		t.Error(err)
	}
}

// The live figures are read from the snapshot at each scrape.
func TestLiveFigures(t *testing.T) {
	reg := prometheus.NewRegistry()
	snap := metrics.Snapshot{Servers: []metrics.Server{{ID: "a", Connected: true, Queued: 3, Reconnects: 2, Channels: 4, Open: 1}}}
	if _, err := metrics.New(reg, func() metrics.Snapshot { return snap }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP mcpl_inbound_queue_depth The server's messages waiting for this host's handler.
# TYPE mcpl_inbound_queue_depth gauge
mcpl_inbound_queue_depth{server="a"} 3
# HELP mcpl_reconnects_total Reconnects to the server after a drop.
# TYPE mcpl_reconnects_total counter
mcpl_reconnects_total{server="a"} 2
# HELP mcpl_channels_open The server's channels open now.
# TYPE mcpl_channels_open gauge
mcpl_channels_open{server="a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpl_inbound_queue_depth", "mcpl_reconnects_total", "mcpl_channels_open"); err != nil {
		t.Error(err)
	}
	snap.Servers[0].Queued = 0
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.Replace(want, `{server="a"} 3`, `{server="a"} 0`, 1)), "mcpl_inbound_queue_depth", "mcpl_reconnects_total", "mcpl_channels_open"); err != nil {
		t.Errorf("after the queue drained: %v", err)
	}
	if _, err := metrics.New(reg, func() metrics.Snapshot { return snap }); err == nil {
		t.Error("a second registration on one registry succeeded")
	}
}

// A nil *Metrics counts nothing and observes nothing.
func TestNilMetrics(t *testing.T) {
	var m *metrics.Metrics
	m.Turn("a", "end_turn")
	m.ModelCall("a", "openai", true, false, time.Second, metrics.Tokens{In: 1, Out: 2})
	if o := m.Server("x"); o != nil {
		t.Errorf("Server on nil = %v, want a nil observer", o)
	}
}
