package content

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/term"
)

// printable reports whether s holds nothing term would escape: no
// control, bidirectional control or invalid UTF-8.
func printable(s string) bool { return term.Line(s) == s }

// FuzzClassify: any bytes classify without a panic; a marker, an embedded
// resource's line and a resource link's line never hold a control or
// bidirectional character or a line break, whatever the server's strings.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		`{"type":"text","text":"hi"}`, `{"type":"image","data":"AA","mimeType":"image/png"}`,
		`{"type":"vi\u001bdeo"}`, `{"type":"\u202e"}`, `{"type":"resource","uri":"https://x/a","name":"a"}`,
		`{"type":"image","uri":"","data":"AA"}`, `[1]`, `"x"`, `{"type":"audio"}`, `{`,
		`{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain","text":"x"}}`,
		`{"type":"resource","resource":{"uri":"file:///a
]","blob":"AAAA"}}`,
		`{"type":"resource_link","uri":"file:///a","name":"a b","size":12,"description":"d"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		b := Classify(json.RawMessage(raw))
		if (b.Kind == KindMarker || b.Kind == KindResourceLink) && !printable(b.Text) {
			t.Errorf("host line %q holds a control character", b.Text)
		}
		if b.Kind == KindResource && !printable(b.Header) {
			t.Errorf("resource line %q holds a control character", b.Header)
		}
		if b.Kind == KindReference && b.Ref == nil {
			t.Error("a reference without testimony")
		}
	})
}

// FuzzStub: a stub never holds its link, stays within its bound, and
// holds no control or bidirectional character, whatever the server sent.
func FuzzStub(f *testing.F) {
	f.Add("https://x/a?sig=s", "a.wav", "audio/wav", int64(12), "2030-01-01T00:00:00Z", "never")
	f.Add("https://x/a", "see https://x/a", "\u202eaudio", int64(-1), "soon", "ref")
	f.Add("a", "a\x00b\x1b[2J", "x", int64(0), "", "")
	f.Add("https://srv.example/files?path=%2Fa%2Fb.wav&signature=SECRETSECRETSECRET", "https://srv.example/files?path=%2Fa%2Fb.wav&signature=SECRETSECRETSECRET-and-more-words-to-pass-eighty-characters", "x/signature=SECRETSECRET", int64(12), "", "never")
	f.Fuzz(func(t *testing.T, uri, name, mime string, size int64, expires, disposition string) {
		block, _ := json.Marshal(map[string]any{"type": "resource", "uri": uri, "name": name, "mimeType": mime,
			"sizeBytes": size, "expiresAt": expires, "disposition": disposition})
		b := Classify(block)
		if b.Kind != KindReference {
			return
		}
		s := Stub("ref_1", b.Ref, ProvenanceToolResult, Tail(b.Ref, true, time.Unix(1_780_000_000, 0)))
		if n := len([]rune(s)); n > MaxStubRunes {
			t.Errorf("stub is %d runes, over %d", n, MaxStubRunes)
		}
		// No 8 bytes of the link that the stub's labels brought in: what
		// a stub with no labels doesn't hold itself.
		bare := Stub("ref_1", &Testimony{URI: b.Ref.URI, SizeBytes: b.Ref.SizeBytes, HasSize: b.Ref.HasSize}, ProvenanceToolResult, Tail(b.Ref, true, time.Unix(1_780_000_000, 0)))
		for i := 0; i+8 <= len(uri); i++ {
			if g := uri[i : i+8]; strings.Contains(s, g) && !strings.Contains(bare, g) && !strings.Contains("(link withheld) unnamed type not given", g) {
				t.Errorf("stub %q holds %q of the link %q", s, g, uri)
				break
			}
		}
		if !printable(s) {
			t.Errorf("stub %q holds a control character", s)
		}
	})
}
