package host_test

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkCallTool: one tools/call round trip through Host.CallTool, the
// path an agent's call takes, to the test server over stdio. Its
// allocations are this process's: the host's side, and the test harness's
// own few. bench/ compares the time against a raw echo and other clients.
func BenchmarkCallTool(b *testing.B) {
	h, _ := newHost(b)
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
}
