package wire

import (
	"encoding/json"
	"testing"
)

// BenchmarkParse measures routing one inbound answer by shape, with the
// one-pass scanner the peer uses beside encoding/json doing the same job
// (the baseline it replaced).
func BenchmarkParse(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"the quick brown fox"}]}}`)
	b.Run("via=scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, k := parse(msg); k != kindResponse {
				b.Fatal("not a response")
			}
		}
	})
	b.Run("via=encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var env envelope
			if err := json.Unmarshal(msg, &env); err != nil || env.Result == nil {
				b.Fatal("not a response")
			}
		}
	})
}
