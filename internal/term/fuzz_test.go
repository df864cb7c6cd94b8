package term

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

var seeds = []string{
	"", "plain", "\x1b]0;pwned\x07", "\x1b[2J", "\u009b2J", "name\npolicy: accepted",
	"evil\u202Etxt.exe", "\xff\xfe", "\xc3", "\xed\xa0\x80", "\u2028\u2029", "\r\n\t\x00\x7f",
	"👩‍👩‍👧‍👦", "العربية", "\u061c\u200e\u2066", `\x1b`, "\ufffd",
	"zero\u200bwidth\ufeff", "👍🏽\u200d\u200d💻", "a\u200db", "🏴\U000e0067\U000e007f", "\u00ad\u2060",
}

func FuzzLine(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Line(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Line(%q) = %q: not valid UTF-8", s, out)
		}
		if r := rawRune(out); r >= 0 {
			t.Fatalf("Line(%q) = %q: %U survived", s, out, r)
		}
		if utf8.ValidString(s) && rawRune(s) < 0 && out != s {
			t.Fatalf("Line(%q) = %q: changed a string with nothing to escape", s, out)
		}
		if again := Line(out); again != out {
			t.Fatalf("Line(Line(%q)) = %q, want %q", s, again, out)
		}
		lines := Lines(s)
		if len(lines) != bytes.Count([]byte(s), []byte("\n"))+1 {
			t.Fatalf("Lines(%q) = %q: one line per \\n-separated part wanted", s, lines)
		}
		for _, l := range lines {
			if r := rawRune(l); r >= 0 || !utf8.ValidString(l) {
				t.Fatalf("Lines(%q) has %q: %U survived or not UTF-8", s, l, r)
			}
		}
	})
}

func FuzzJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		checkJSON(t, b)
		var plain, got string
		json.Unmarshal(b, &plain)
		if err := json.Unmarshal(JSON(b), &got); err != nil || got != plain {
			t.Fatalf("JSON(%q) unmarshals to %q (%v), want %q", b, got, err, plain)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("JSON(json.Marshal(%q)) unmarshals to %q", s, got)
		}
		// The same string raw inside a JSON text, as a RawMessage from a
		// server carries it, when that is valid JSON.
		if raw := []byte(`{"k":"` + s + `"}`); json.Valid(raw) {
			checkJSON(t, raw)
		}
	})
}
