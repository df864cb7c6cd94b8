package term

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// escaped is the test's own statement of what must never reach a terminal
// raw, written from Unicode's tables rather than from the package's list:
// controls, bidirectional controls, the separators, and every format
// character (Cf), the zero-width ones and the tag characters among them.
func escaped(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' ||
		unicode.Is(unicode.Cf, r) || r >= 0xe0000 && r <= 0xe007f || r == '\u200b' || r == '\ufeff'
}

// rawRune returns the first rune of s that must not be raw, or -1. A ZWJ
// between two symbols (an emoji sequence: the first may carry U+FE0F or
// a skin tone) may be raw.
func rawRune(s string) rune { return rawRuneBut(s, "") }

// rawRuneBut is rawRune, the runes of allowed aside.
func rawRuneBut(s, allowed string) rune {
	rs := []rune(s)
	for i, r := range rs {
		if strings.ContainsRune(allowed, r) {
			continue
		}
		if r == '\u200d' && i > 0 && i+1 < len(rs) {
			j := i - 1
			for j > 0 && (rs[j] == '\ufe0f' || rs[j] >= 0x1f3fb && rs[j] <= 0x1f3ff) {
				j--
			}
			if rs[j] != '\ufffd' && rs[i+1] != '\ufffd' && unicode.In(rs[j], unicode.So) && unicode.In(rs[i+1], unicode.So) {
				continue
			}
		}
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
		// Invisible format characters: zero-width, word joiner, BOM, soft
		// hyphen, Mongolian vowel separator, invisible operators.
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"pay\u200cpal\u200d", `pay\u200cpal\u200d`},
		{"\u2060\u2061\u2064\ufeff\u00ad\u180e", `\u2060\u2061\u2064\ufeff\u00ad\u180e`},
		// Tag characters smuggle invisible ASCII ("hi"), even after a flag.
		{"ok\U000e0068\U000e0069", `ok\U000e0068\U000e0069`},
		{"\U0001f3f4\U000e0067\U000e007f", "\U0001f3f4" + `\U000e0067\U000e007f`},
		// A ZWJ outside an emoji sequence: after a letter, at either end,
		// doubled, after an escaped rune.
		{"a\u200d👍", `a\u200d👍`},
		{"👍\u200da", `👍\u200da`},
		{"\u200d👍", `\u200d👍`},
		{"👍\u200d", `👍\u200d`},
		{"👍\u200d\u200d👍", `👍\u200d\u200d👍`},
		{"👍\u200b\u200d👍", `👍\u200b\u200d👍`},
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
		"🏳️‍🌈 flag, 👩🏽‍💻 skin tone, ❤️‍🔥 variation selector",
		"🇫🇷 flag, 👍🏽 skin tone",
		"no-break\u00a0space, variation\ufe0e selector",
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
		if r := rawRuneBut(string(out), "\n\t"); r >= 0 {
			t.Errorf("JSON(%q) = %q: carries %U raw", b.Bytes(), out, r)
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
	if got, want := string(JSON([]byte("\"\x7f\u009b\u202e\u2028\xff\u200b\U000e0041\""))), `"\u007f\u009b\u202e\u2028\ufffd\u200b\udb40\udc41"`; got != want {
		t.Errorf("JSON escapes = %s, want %s", got, want)
	}
	// An emoji's ZWJ stays, another goes.
	if got, want := string(JSON([]byte("\"👩‍💻 a\u200db\""))), "\"👩‍💻 a\\u200db\""; got != want {
		t.Errorf("JSON ZWJ = %s, want %s", got, want)
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
	if r := rawRuneBut(string(out), "\n\r\t"); r >= 0 {
		t.Fatalf("JSON(%q) = %q: %U survived", b, out, r)
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

// Every format character (Cf) Go's tables know is escaped, as \uHHHH or
// \UHHHHHHHH, alone and between letters; nothing else in the BMP's
// letters, marks and symbols is.
func TestLineEveryFormatCharacter(t *testing.T) {
	n := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !unicode.Is(unicode.Cf, r) {
			continue
		}
		n++
		want := fmt.Sprintf(`\u%04x`, r)
		if r > 0xffff {
			want = fmt.Sprintf(`\U%08x`, r)
		}
		if got := Line("a" + string(r) + "b"); got != "a"+want+"b" {
			t.Errorf("Line(a %U b) = %q, want %q", r, got, "a"+want+"b")
		}
	}
	if n < 150 {
		t.Fatalf("only %d Cf runes in Go's tables", n)
	}
	for _, tab := range []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs} {
		for r := rune(0xa0); r <= 0xffff; r++ {
			if unicode.Is(tab, r) && Line(string(r)) != string(r) {
				t.Errorf("Line(%U) = %q, want it unchanged", r, Line(string(r)))
			}
		}
	}
}
