package wire

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestShortDuration(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{60 * time.Second, "60s"},
		{90 * time.Second, "90s"},
		{1500 * time.Millisecond, "1.5s"},
		{200 * time.Millisecond, "200ms"},
		{0, "0s"},
		{time.Second, "1s"},
		{time.Hour, "3600s"},
		{2500 * time.Millisecond, "2.5s"},
		{time.Second + time.Millisecond, "1.001s"},
		{time.Nanosecond, "1ns"},
	}
	for _, c := range cases {
		if got := ShortDuration(c.d); got != c.want {
			t.Errorf("ShortDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// TestFlatten: the one cleaning of a peer's words, for the operator's line
// (OneLine) and the agent's (host's serverWords).
func TestFlatten(t *testing.T) {
	cases := []struct{ in, want string }{
		{"disk full", "disk full"},
		{"  padded  ", "padded"},
		{"", ""},
		{"   ", ""},
		{"\t\r\n", ""},
		{"two\nlines", "two lines"},
		{"crlf\r\nend", "crlf  end"},
		{"tab\there", "tab here"},
		{"bell\x07 and esc\x1b[31mred", "bell and esc[31mred"},
		{"nul\x00byte", "nulbyte"},
		{"del\x7fchar", "delchar"},
		{"c1\u0085next\u009bcsi", "c1 nextcsi"},
		{"line\u2028sep\u2029para", "line sep para"},
		{"vt\vff\f.", "vt ff ."},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{"\xc3", "\uFFFD"},
		{"ünïcödé ✓", "ünïcödé ✓"},
	}
	for _, c := range cases {
		if got := Flatten(c.in); got != c.want {
			t.Errorf("Flatten(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := OneLine(c.in, 500); got != c.want {
			t.Errorf("OneLine(%q, 500) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestOneLineBounded(t *testing.T) {
	cases := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"at the bound", strings.Repeat("a", 500), 500, strings.Repeat("a", 500)},
		{"a byte over", strings.Repeat("a", 501), 500, strings.Repeat("a", 500) + "…"},
		{"two-byte characters, cut between them", strings.Repeat("é", 300), 500, strings.Repeat("é", 250) + "…"},
		{"two-byte characters, cut inside one", "a" + strings.Repeat("é", 300), 500, "a" + strings.Repeat("é", 249) + "…"},
		{"three-byte characters", strings.Repeat("✓", 5), 8, "✓✓…"},
		{"four-byte characters", strings.Repeat("😀", 3), 7, "😀…"},
		// Bounded after cleaning: what is removed or trimmed does not count.
		{"trimmed first", "  " + strings.Repeat("x", 10) + "\n\n", 10, strings.Repeat("x", 10)},
		{"controls removed first", "\x07\x07abcdef\x00", 6, "abcdef"},
		{"line breaks count as spaces", "ab\r\ncd", 5, "ab  c…"},
		{"invalid UTF-8 replaced first", "ab\xffcd", 5, "ab\uFFFD…"},
		{"cut inside a replacement character", "ab\xffcd", 4, "ab…"},
		{"a cut after a space drops the space", "abc def", 4, "abc…"},
	}
	for _, c := range cases {
		got := OneLine(c.in, c.n)
		if got != c.want {
			t.Errorf("%s: OneLine(%q, %d) = %q, want %q", c.name, c.in, c.n, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: not valid UTF-8: %q", c.name, got)
		}
		if body := strings.TrimSuffix(got, "…"); len(body) > c.n {
			t.Errorf("%s: %d bytes before the ellipsis, over %d", c.name, len(body), c.n)
		}
	}
	// Whatever the input, the result is one clean line within the bound.
	for _, in := range []string{
		strings.Repeat("x\n", 5000), strings.Repeat("\r\n\u2028", 400) + "end", strings.Repeat("\xff\xfe", 300),
		strings.Repeat("é\x1b", 400), strings.Repeat("ab\tc", 200),
	} {
		got := OneLine(in, 500)
		if len(got) > 500+len("…") || !utf8.ValidString(got) || got != strings.TrimSpace(got) {
			t.Errorf("OneLine of %d bytes gave %d bytes: %q", len(in), len(got), got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
				t.Errorf("OneLine left %U in %q", r, got)
			}
		}
	}
}
