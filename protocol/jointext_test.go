package protocol

import (
	"encoding/json"
	"testing"
)

// joinTextRef is JoinText as encoding/json reads each block: what JoinText
// must return for every input.
func joinTextRef(blocks []json.RawMessage) string {
	var out []byte
	for _, raw := range blocks {
		var b TextContent
		if json.Unmarshal(raw, &b) != nil || b.Type != "text" {
			continue
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, b.Text...)
	}
	return string(out)
}

var joinTextSeeds = []string{
	`{"type":"text","text":"hello"}`,
	` { "type" : "text" , "text" : "spaced" } `,
	`{"text":"first","type":"text"}`,
	`{"type":"text","text":""}`,
	`{"type":"image","data":"x"}`,
	`{"type":"text","text":"esc\"aped\n"}`,
	`{"type":"text","text":"\u00e9\ud83d\ude00 \ud800"}`,
	"{\"type\":\"text\",\"text\":\"bad utf8 \xff\"}",
	"{\"type\":\"text\",\"text\":\"ctl \x01\"}",
	`{"TYPE":"text","Text":"folded keys"}`,
	`{"type":"text","text":"a","text":"last wins"}`,
	`{"type":"text","type":"image","text":"dup type"}`,
	`{"type":"text","text":null}`,
	`{"type":null,"text":"t"}`,
	`{"type":"text","text":5}`,
	`{"type":"text","text":"x","annotations":{"audience":["user"]}}`,
	`{"type":"text","text":"x"} trailing`,
	`{"type":"text","text":"x"`,
	`{"type":"text",}`,
	`{}`,
	`null`,
	`[]`,
	`"text"`,
	``,
	`{"ſtext":"long s"}`,
	`{"type":"Text","text":"type is case-sensitive"}`,
	`{"type":"text","text":"ok"}` + "\n",
}

func TestJoinTextIsUnmarshal(t *testing.T) {
	for _, a := range joinTextSeeds {
		for _, b := range joinTextSeeds {
			blocks := []json.RawMessage{json.RawMessage(a), json.RawMessage(b)}
			if got, want := JoinText(blocks), joinTextRef(blocks); got != want {
				t.Errorf("JoinText(%q, %q) = %q, want %q", a, b, got, want)
			}
		}
	}
}

// FuzzJoinText checks JoinText against encoding/json's reading of each
// block.
func FuzzJoinText(f *testing.F) {
	for i, s := range joinTextSeeds {
		f.Add(s, joinTextSeeds[(i+1)%len(joinTextSeeds)])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		blocks := []json.RawMessage{json.RawMessage(a), json.RawMessage(b)}
		if got, want := JoinText(blocks), joinTextRef(blocks); got != want {
			t.Errorf("JoinText(%q, %q) = %q, want %q", a, b, got, want)
		}
	})
}

func BenchmarkJoinText(b *testing.B) {
	blocks := []json.RawMessage{json.RawMessage(`{"type":"text","text":"a short text, about as long as a chat message is, answered by a tool"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if JoinText(blocks) == "" {
			b.Fatal("no text")
		}
	}
}
