package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpl-go/mcpl/internal/metrics"
)

// A server that is not connected keeps its series: connected reads 0,
// mcpl_server_state has a series for every state with 1 on its own, and
// the last error's time is there (0 for a server that never failed).
func TestServerStateSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	at := time.Unix(1700000000, 500_000_000)
	snap := metrics.Snapshot{Servers: []metrics.Server{
		{ID: "up", Connected: true, State: "connected"},
		{ID: "dead", State: "failed", LastErrorAt: at},
	}}
	if _, err := metrics.New(reg, func() metrics.Snapshot { return snap }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP mcpl_server_connected 1 while the server's connection is open, else 0.
# TYPE mcpl_server_connected gauge
mcpl_server_connected{server="dead"} 0
mcpl_server_connected{server="up"} 1
# HELP mcpl_server_last_error_timestamp_seconds When the server's last failure (a connect, dial or dropped connection) was seen, in Unix seconds; 0 for none.
# TYPE mcpl_server_last_error_timestamp_seconds gauge
mcpl_server_last_error_timestamp_seconds{server="dead"} 1.7000000005e+09
mcpl_server_last_error_timestamp_seconds{server="up"} 0
# HELP mcpl_server_state 1 for the server's state now, 0 for its other states.
# TYPE mcpl_server_state gauge
mcpl_server_state{server="dead",state="connected"} 0
mcpl_server_state{server="dead",state="connecting"} 0
mcpl_server_state{server="dead",state="disconnected"} 0
mcpl_server_state{server="dead",state="failed"} 1
mcpl_server_state{server="dead",state="reconnecting"} 0
mcpl_server_state{server="up",state="connected"} 1
mcpl_server_state{server="up",state="connecting"} 0
mcpl_server_state{server="up",state="disconnected"} 0
mcpl_server_state{server="up",state="failed"} 0
mcpl_server_state{server="up",state="reconnecting"} 0
`
	names := []string{"mcpl_server_connected", "mcpl_server_state", "mcpl_server_last_error_timestamp_seconds"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}
