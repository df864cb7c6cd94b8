package content

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func testimony(t *testing.T, block string) *Testimony {
	t.Helper()
	b := Classify(json.RawMessage(block))
	if b.Kind != KindReference {
		t.Fatalf("Classify(%.80s) = %+v, want a reference", block, b)
	}
	return b.Ref
}

func TestTestimonyFieldRules(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		rejected    []string
		check       func(t *testing.T, tm *Testimony)
	}{
		{"all good", `{"type":"resource","uri":"https://x/a","mimeType":"audio/wav","sizeBytes":12,"digest":"sha256:47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU","expiresAt":"2030-01-01T00:00:00Z","name":"a.wav","disposition":"never"}`,
			nil, func(t *testing.T, tm *Testimony) {
				if !tm.HasSize || tm.SizeBytes != 12 || tm.Disposition != "never" || tm.Digest == "" || tm.Name != "a.wav" {
					t.Errorf("%+v", tm)
				}
			}},
		{"size -1", `{"type":"resource","uri":"https://x/a","sizeBytes":-1}`, []string{"sizeBytes"}, nil},
		{"size 3.5", `{"type":"resource","uri":"https://x/a","sizeBytes":3.5}`, []string{"sizeBytes"}, nil},
		{"size 2^53", `{"type":"resource","uri":"https://x/a","sizeBytes":9007199254740992}`, []string{"sizeBytes"}, nil},
		{"size as a string", `{"type":"resource","uri":"https://x/a","sizeBytes":"12"}`, []string{"sizeBytes"}, nil},
		{"size 2^53-1", `{"type":"resource","uri":"https://x/a","sizeBytes":9007199254740991}`, nil, func(t *testing.T, tm *Testimony) {
			if tm.SizeBytes != 9007199254740991 {
				t.Errorf("size = %d", tm.SizeBytes)
			}
		}},
		{"size 1e3", `{"type":"resource","uri":"https://x/a","sizeBytes":1e3}`, nil, func(t *testing.T, tm *Testimony) {
			if tm.SizeBytes != 1000 {
				t.Errorf("size = %d", tm.SizeBytes)
			}
		}},
		{"bad digest", `{"type":"resource","uri":"https://x/a","digest":"md5:abc"}`, []string{"digest"}, nil},
		{"bad disposition", `{"type":"resource","uri":"https://x/a","disposition":"inline-ok"}`, []string{"disposition"}, nil},
		{"name not a string", `{"type":"resource","uri":"https://x/a","name":5}`, []string{"name"}, nil},
		{"mime not a string", `{"type":"resource","uri":"https://x/a","mimeType":[]}`, []string{"mimeType"}, nil},
		{"expiry over 64", `{"type":"resource","uri":"https://x/a","expiresAt":"` + strings.Repeat("9", 65) + `"}`, []string{"expiresAt"}, nil},
		{"expiry not a string", `{"type":"resource","uri":"https://x/a","expiresAt":1}`, []string{"expiresAt"}, nil},
		{"expiry null", `{"type":"resource","uri":"https://x/a","expiresAt":null}`, []string{"expiresAt"}, nil},
		{"name over 255", `{"type":"resource","uri":"https://x/a","name":"` + strings.Repeat("n", 256) + `"}`, []string{"name"}, nil},
		{"name of 255 characters in more bytes", `{"type":"resource","uri":"https://x/a","name":"` + strings.Repeat("é", 255) + `"}`, nil, func(t *testing.T, tm *Testimony) {
			if tm.Name != strings.Repeat("é", 255) {
				t.Errorf("name = %q", tm.Name)
			}
		}},
		{"mime over 255", `{"type":"resource","uri":"https://x/a","mimeType":"` + strings.Repeat("m", 256) + `"}`, []string{"mimeType"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := testimony(t, tc.block)
			if !slices.Equal(tm.Rejected, tc.rejected) {
				t.Errorf("rejected %q, want %q", tm.Rejected, tc.rejected)
			}
			if tc.check != nil {
				tc.check(t, tm)
			}
		})
	}
}

func TestStubShape(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, block, provenance string
		bound                   bool
		want                    string
	}{
		{"full", `{"type":"resource","uri":"https://x/a?sig=secret","mimeType":"audio/wav","sizeBytes":4233704,"name":"chord.wav","disposition":"never"}`,
			ProvenanceChannelMessage, true,
			"[ref_1] chord.wav — audio/wav, ~4.0 MiB claimed — attachment on channel message — fetch with fetch_reference"},
		{"bare", `{"type":"resource","uri":"https://x/a"}`, ProvenanceToolResult, true,
			"[ref_1] unnamed — type not given, size not claimed — from tool result — fetch with fetch_reference"},
		{"small", `{"type":"image","uri":"https://x/a","mimeType":"image/png","sizeBytes":12}`, ProvenancePushEvent, true,
			"[ref_1] unnamed — image/png, ~12 bytes claimed — attachment on push event — fetch with fetch_reference"},
		{"unbound", `{"type":"resource","uri":"https://x/a","name":"a"}`, ProvenanceToolResult, false,
			"[ref_1] a — type not given, size not claimed — from tool result — not tied to any server, so there's nowhere to fetch it from"},
		{"expired", `{"type":"resource","uri":"https://x/a","name":"a","expiresAt":"2026-01-01T00:00:00Z"}`, ProvenanceToolResult, true,
			"[ref_1] a — type not given, size not claimed — from tool result — expired"},
		{"expiry unreadable", `{"type":"resource","uri":"https://x/a","name":"a","expiresAt":"soon"}`, ProvenanceToolResult, true,
			"[ref_1] a — type not given, size not claimed — from tool result — treated as expired, since its expiry time can't be read"},
		{"expiry rejected", `{"type":"resource","uri":"https://x/a","name":"a","expiresAt":5}`, ProvenanceToolResult, true,
			"[ref_1] a — type not given, size not claimed — from tool result — treated as expired, since its expiry time isn't in a form this host accepts"},
		{"expiry ahead", `{"type":"resource","uri":"https://x/a","name":"a","expiresAt":"2027-01-01T00:00:00Z"}`, ProvenanceToolResult, true,
			"[ref_1] a — type not given, size not claimed — from tool result — fetch with fetch_reference"},
		{"link in the name", `{"type":"resource","uri":"https://x/a?sig=secret","name":"see https://x/a?sig=secret"}`, ProvenanceToolResult, true,
			"[ref_1] see (link withheld) — type not given, size not claimed — from tool result — fetch with fetch_reference"},
		{"controls in labels", `{"type":"resource","uri":"https://x/a","name":"a\u001b[2J\u202eb","mimeType":"audio/\nwav"}`, ProvenanceToolResult, true,
			"[ref_1] a[2Jb — audio/ wav, size not claimed — from tool result — fetch with fetch_reference"},
	} {
		tm := testimony(t, tc.block)
		got := Stub("ref_1", tm, tc.provenance, Tail(tm, tc.bound, now))
		if got != tc.want {
			t.Errorf("%s: stub\n  %q\nwant\n  %q", tc.name, got, tc.want)
		}
	}
}

func TestStubBounded(t *testing.T) {
	tm := testimony(t, `{"type":"resource","uri":"https://x/a","name":"`+strings.Repeat("n", 255)+`","mimeType":"`+strings.Repeat("m", 255)+`","sizeBytes":9007199254740991}`)
	s := Stub("ref_1", tm, strings.Repeat("p", 1<<20), strings.Repeat("t", 1<<20))
	if n := len([]rune(s)); n > MaxStubRunes {
		t.Errorf("stub is %d runes, over %d", n, MaxStubRunes)
	}
	if !strings.Contains(s, strings.Repeat("n", 79)+"…") || !strings.Contains(s, strings.Repeat("m", 59)+"…") || !strings.Contains(s, "PiB claimed") {
		t.Errorf("stub = %q", s)
	}
	// Over its schema bound, a label is absent, not cut.
	tm = testimony(t, `{"type":"resource","uri":"https://x/a","name":"`+strings.Repeat("n", 1<<20)+`"}`)
	if s := Stub("ref_1", tm, ProvenanceToolResult, TailFetch); !strings.HasPrefix(s, "[ref_1] unnamed — ") {
		t.Errorf("stub = %.100q", s)
	}
}

// TestStubWithholdsPiecesOfTheLink: a label holding a piece of the link
// (a cut copy, its signed query) doesn't show it.
func TestStubWithholdsPiecesOfTheLink(t *testing.T) {
	link := "https://srv.example/files?path=%2Fa%2Fb.wav&signature=SECRET123456"
	for _, tc := range []struct{ name, mime string }{
		{link + strings.Repeat("x", 100), "audio/wav"},
		{"see signature=SECRET123456 here", "audio/wav"},
		{"a.wav", "x/" + link},
	} {
		block, _ := json.Marshal(map[string]any{"type": "resource", "uri": link, "name": tc.name, "mimeType": tc.mime})
		tm := testimony(t, string(block))
		s := Stub("ref_1", tm, ProvenanceToolResult, TailFetch)
		if strings.Contains(s, "SECRET") || strings.Contains(s, "srv.example") {
			t.Errorf("stub %q shows the link", s)
		}
		if !strings.Contains(s, "(link withheld)") {
			t.Errorf("stub %q doesn't say it withheld the link", s)
		}
	}
}
