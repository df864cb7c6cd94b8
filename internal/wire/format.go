package wire

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ShortDuration renders a deadline for an operator: whole seconds as "60s"
// (where time.Duration's String says "1m0s"), anything else as
// time.Duration does ("1.5s", "200ms").
func ShortDuration(d time.Duration) string {
	if d > 0 && d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// Flatten returns a peer's words as one clean line: control characters
// removed (line breaks, line and paragraph separators and tabs become
// spaces), invalid UTF-8 replaced, and trimmed.
func Flatten(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t' || r == '\v' || r == '\f' ||
			r == '\u0085' || r == '\u2028' || r == '\u2029':
			b.WriteByte(' ')
		case unicode.IsControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return strings.TrimSpace(b.String())
}

// OneLine returns a peer's words as one line for a log or an operator's
// text: Flatten, and, when longer than n bytes, cut at a rune boundary
// within n bytes, trailing spaces dropped, and "…" added.
func OneLine(s string, n int) string {
	out := Flatten(s)
	if len(out) <= n {
		return out
	}
	return strings.TrimRight(strings.TrimSuffix(Cut(out, n), "…"), " ") + "…"
}

// Cut cuts s to at most n bytes, on a rune boundary, ending it with "…"
// when it was longer: for a log line, or a peer's string kept in a bounded
// report.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
