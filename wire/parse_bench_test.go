package wire

import "testing"

// BenchmarkParse measures routing one inbound answer by shape.
func BenchmarkParse(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"the quick brown fox"}]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, k := parse(msg); k != kindResponse {
			b.Fatal("not a response")
		}
	}
}
