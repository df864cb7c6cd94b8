package term

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// escaped is the test's own statement of what must never reach a terminal
// raw, written from Unicode's tables rather than from the package's list.
func escaped(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// rawRune returns the first rune of s that must not be raw, or -1.
func rawRune(s string) rune {
	for _, r := range s {
		if escaped(r) {
			return r
		}
	}
	return -1
}

func TestLineHostile(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"\x1b[2J", `\x1b[2J`},
		{"\u009b2J", `\u009b2J`},
		{"name\npolicy: accepted", `name\npolicy: accepted`},
		{"a\r\nb\tc", `a\r\nb\tc`},
		{"over\rwrite", `over\rwrite`},
		{"evil\u202Etxt.exe", `evil\u202etxt.exe`},
		{"\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"line\u2028sep\u2029para", `line\u2028sep\u2029para`},
		{"\x00\x01\x1f\x7f", `\x00\x01\x1f\x7f`},
		{"\u0080\u0085\u009f", `\u0080\u0085\u009f`},
		{"bad \xff\xfe bytes", `bad \xff\xfe bytes`},
		{"cut \xc3", `cut \xc3`},
		{"\xc3(", `\xc3(`},
		{"\xed\xa0\x80", `\xed\xa0\x80`}, // an encoded surrogate is not UTF-8
		{"ok é\x1b", `ok é\x1b`},
	} {
		got := Line(tc.in)
		if got != tc.want {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if r := rawRune(got); r >= 0 || !utf8.ValidString(got) {
			t.Errorf("Line(%q) = %q: carries %U raw or is not UTF-8", tc.in, got, r)
		}
	}
}

func TestLineBenignUnchanged(t *testing.T) {
	for _, s := range []string{
		"hello, world",
		"Grüße, naïve café",
		"日本語のテキスト",
		"العربية והעברית",
		"👩‍👩‍👧‍👦 family (ZWJ sequence)",
		"🇫🇷 flag, 👍🏽 skin tone",
		"zero\u200bwidth and\u00a0nbsp and \ufeffbom",
		"a real \ufffd replacement rune",
		`back\slash and "quotes"`,
		"{\"json\":[1,2,3]}",
	} {
		got := Line(s)
		if got != s {
			t.Errorf("Line(%q) = %q, want it unchanged", s, got)
		}
		if unsafe.StringData(got) != unsafe.StringData(s) {
			t.Errorf("Line(%q) copied a string that needed no escape", s)
		}
	}
	if Line("") != "" {
		t.Error(`Line("") is not ""`)
	}
}

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"one", []string{"one"}},
		{"one\ntwo", []string{"one", "two"}},
		{"one\r\ntwo\r\n", []string{"one", "two", ""}},
		{"a\n\nb", []string{"a", "", "b"}},
		{"name\npolicy: accepted\x1b[2J", []string{"name", `policy: accepted\x1b[2J`}},
		{"cr\ronly\n\tindent", []string{`cr\ronly`, `\tindent`}},
		{"x\u2028y", []string{`x\u2028y`}},
	} {
		if got := Lines(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Lines(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestJSON(t *testing.T) {
	type report struct {
		Name string          `json:"name"`
		Raw  json.RawMessage `json:"raw"`
	}
	for _, tc := range []struct {
		name, raw string // raw is a JSON text a server sent, kept as RawMessage
	}{
		{"\x1b]0;pwned\x07", `{"a":1}`},
		{"\u009b2J\u007f", `"\u009b2J"`},
		{"evil\u202Etxt", "\"evil\u202Etxt\""},
		{"line\u2028sep", "[\"raw\u2028sep\u2029\"]"},
		{"del\x7f", "\"raw del \x7f, c1 \u0085, bidi \u2066\""},
		{"bad\xff", "{\"bad\":\"\xff\xfe\"}"},
		{"name\npolicy: accepted", "{\n  \"spaced\" :\t\"out\"\n}"},
	} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report{Name: tc.name, Raw: json.RawMessage(tc.raw)}); err != nil {
			t.Fatal(err)
		}
		out := JSON(b.Bytes())
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("JSON(%q) = %q: not valid JSON in UTF-8", b.Bytes(), out)
		}
		for _, r := range string(out) {
			if escaped(r) && r != '\n' && r != ' ' && r != '\t' {
				t.Errorf("JSON(%q) = %q: carries %U raw", b.Bytes(), out, r)
			}
		}
		var want, got any
		if err := json.Unmarshal(b.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if wb, gb := mustMarshal(t, want), mustMarshal(t, got); !bytes.Equal(wb, gb) {
			t.Errorf("JSON changed the value: %s, want %s", gb, wb)
		}
	}
	// What needs no escape is returned as is.
	in := []byte("{\n  \"name\": \"日本語 👩‍👩‍👧 \\u001b\"\n}\n")
	if out := JSON(in); &out[0] != &in[0] || !bytes.Equal(out, in) {
		t.Errorf("JSON(%q) = %q, want the same slice", in, out)
	}
	// The escapes' exact forms.
	if got, want := string(JSON([]byte("\"\x7f\u009b\u202e\u2028\xff\""))), `"\u007f\u009b\u202e\u2028\ufffd"`; got != want {
		t.Errorf("JSON escapes = %s, want %s", got, want)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkJSON checks that JSON(b) is valid UTF-8 JSON with the value of b
// and no raw rune outside JSON's whitespace that must not reach a
// terminal.
func checkJSON(t *testing.T, b []byte) {
	t.Helper()
	out := JSON(b)
	if !json.Valid(out) || !utf8.Valid(out) {
		t.Fatalf("JSON(%q) = %q: not valid JSON in UTF-8", b, out)
	}
	for _, r := range string(out) {
		if escaped(r) && r != '\n' && r != '\r' && r != '\t' {
			t.Fatalf("JSON(%q) = %q: %U survived", b, out, r)
		}
	}
	var want, got any
	json.Unmarshal(b, &want)
	json.Unmarshal(out, &got)
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if !bytes.Equal(wb, gb) {
		t.Fatalf("JSON(%q) = %q: the value changed: %s, want %s", b, out, gb, wb)
	}
}
