package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/host"
)

// BenchmarkCallTool: one tools/call round trip through Host.CallTool, the
// path an agent's call takes, to the test server over stdio. Its
// allocations are this process's: the host's side, and the test harness's
// own few. bench/ compares the time against a raw echo and other clients.
// With metrics, each call is also counted and timed (Options.Metrics).
func BenchmarkCallTool(b *testing.B) {
	for _, withMetrics := range []bool{false, true} {
		name := "metrics=off"
		if withMetrics {
			name = "metrics=on"
		}
		b.Run(name, func(b *testing.B) {
			var h *host.Host
			if withMetrics {
				var err error
				if h, err = host.New(host.Options{Logger: newRecorder().Logger(), Metrics: prometheus.NewRegistry()}); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { h.Close() })
			} else {
				h, _ = newHost(b)
			}
			if err := h.Connect(b.Context(), server(b, "id: ts\ncommand: "+ts(b))); err != nil {
				b.Fatal(err)
			}
			args := json.RawMessage(`{"text":"a short text, about as long as a chat message is"}`)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := h.CallTool(ctx, "ts--echo", args)
				if err != nil || res.IsError {
					b.Fatal(res, err)
				}
			}
		})
	}
}
