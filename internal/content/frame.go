package content

import (
	"iter"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Framing: what no server string can produce.
//
// Everything the host writes for an agent is framed by a few characters,
// and the rule is that a server can never write them where the host would:
//
//   - A line that starts with "[" is the host's: a message's header
//     ("[#general (g) on chat · from alice · message m1]"), a host line
//     ("[host] …", "[delivered] …", "[channels] …"), a marker, a stub. In
//     a server's text (a message's, an event's, a tool result's), a line
//     whose first visible character is "[" gets a backslash before it
//     ("\[host] …"), by Body.
//   - Inside a line the host writes, the characters "[", "]", "·" and "\"
//     (and the fullwidth brackets "［", "］") that come from a server are
//     written with a backslash before them, "\[", "\]", "\·", "\\"
//     (Field, and Label and Clean, which use it): an unescaped one is the
//     host's. A server's string there is also one line, with no control,
//     bidirectional control, line or paragraph separator, or invisible
//     format character left in it, and is cut to a bound.
//
// docs/texts.md ("Framing") states the rule for readers, with the forged
// cases and what they read as now.

// Escaped are the characters Field escapes with a backslash: the framing
// characters of the host's lines, and the backslash itself, so an escape
// a server writes can't pass for one of the host's.
const Escaped = `\[]·［］`

// Field makes a server's string safe to stand inside a line the host
// writes: Clean's rules (one line, no control, bidirectional or invisible
// format character, white space collapsed), cut to max runes with "…" (no
// cut when max <= 0), then the framing characters (Escaped) written with a
// backslash before them. The cut comes first, so no escape is cut in two.
func Field(s string, max int) string {
	s = clean(s)
	if max > 0 {
		s = bound(s, max)
	}
	return escape(s)
}

// MaxWordsRunes bounds a server's own words (an error's message, a
// refusal's reason) in a host text.
const MaxWordsRunes = 2000

// Words makes a server's own words (an error's message, a reason it gave)
// safe to quote in a host text: Field, bounded by MaxWordsRunes.
func Words(s string) string { return Field(s, MaxWordsRunes) }

// escape writes each of Escaped with a backslash before it.
func escape(s string) string {
	if !strings.ContainsAny(s, Escaped) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if strings.ContainsRune(Escaped, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Body makes a server's text (a text block of a message, an event, a tool
// result, an injection) unable to pass for a line the host writes: a line
// whose first visible character (past white space and invisible format
// characters) is "[", or its fullwidth form "［", gets a backslash before
// that character, as does a line whose first visible characters are
// backslashes followed by one of them, so the escape can be undone. Every
// line break counts (LF, CR, VT, FF, NEL, U+2028, U+2029), and is kept as
// the server wrote it; nothing else changes.
func Body(s string) string {
	var b strings.Builder
	last, changed := 0, false // s[:last] is written
	for start, line := range lines(s) {
		if i, ok := bracketStart(line); ok {
			if !changed {
				b.Grow(len(s) + 8)
				changed = true
			}
			b.WriteString(s[last : start+i])
			b.WriteByte('\\')
			last = start + i
		}
	}
	if !changed {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// lines yields each line of s with its offset, split at every line break
// (isBreak), the breaks left out.
func lines(s string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		for start := 0; ; {
			end := lineEnd(s, start)
			if !yield(start, s[start:end]) || end == len(s) {
				return
			}
			_, n := utf8.DecodeRuneInString(s[end:])
			start = end + n
		}
	}
}

// lineEnd is where the line that starts at start ends: at the next line
// break, or the end of s.
func lineEnd(s string, start int) int {
	for i, r := range s[start:] {
		if isBreak(r) {
			return start + i
		}
	}
	return len(s)
}

// isBreak reports whether r ends a line, to a reader of any kind.
func isBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// bracketStart says where a line's first visible run starts when that run
// is backslashes (or none) followed by a bracket a host line starts with.
func bracketStart(line string) (int, bool) {
	i := 0
	for i < len(line) {
		r, n := utf8.DecodeRuneInString(line[i:])
		if !unicode.IsSpace(r) && !unicode.Is(unicode.Cf, r) {
			break
		}
		i += n
	}
	j := i
	for j < len(line) && line[j] == '\\' {
		j++
	}
	r, _ := utf8.DecodeRuneInString(line[j:])
	return i, r == '[' || r == '［'
}

// Printable reports whether s holds nothing Clean would drop but spaces:
// no control (tab and line breaks included), bidirectional control, line
// or paragraph separator, invisible format character or invalid UTF-8.
// The host refuses ids that aren't (a channel's, a message's, a thread's):
// an agent repeats ids exactly, so they must read as they are.
func Printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != ' ' && (dropped(r) || unicode.IsSpace(r) && r != '\u00a0') {
			return false
		}
	}
	return true
}

// Marks counts what of a text reads as the host's framing, by the rule
// above: the lines whose first visible character is a bracket, and the
// framing characters ("[", "]", "·") with no escaping backslash before
// them. A lane's tests render a text with a server's strings and with
// plain ones in their place, and check the two have the same Marks: then
// every mark is where the host put it.
type Marks struct {
	LineStarts int
	Inline     int
}

// MarksOf counts s's marks.
func MarksOf(s string) Marks {
	var m Marks
	for _, line := range lines(s) {
		if i, ok := bracketStart(line); ok && !strings.HasPrefix(line[i:], `\`) {
			m.LineStarts++
		}
		escaped := false
		for _, r := range line {
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == '[' || r == ']' || r == '·':
				m.Inline++
			}
		}
	}
	return m
}

// JSONText makes JSON text (as encoding/json writes it) safe to show an
// agent: each rune Printable refuses (bidirectional controls, invisible
// format characters, C1 controls, NEL) is written as a JSON escape
// ("\u202e"), which decodes to the same rune. encoding/json escapes the
// others already (the C0 controls, U+2028, U+2029); such runes only occur
// inside its strings, so the document means what it meant.
func JSONText(b []byte) string {
	s := string(b)
	clean := true
	for _, r := range s {
		if r >= utf8.RuneSelf && !Printable(string(r)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var out strings.Builder
	out.Grow(len(s) + 16)
	for _, r := range s {
		if r < utf8.RuneSelf || Printable(string(r)) {
			out.WriteRune(r)
			continue
		}
		writeJSONEscape(&out, r)
	}
	return out.String()
}

// writeJSONEscape writes r as a JSON \u escape (a surrogate pair past
// U+FFFF).
func writeJSONEscape(b *strings.Builder, r rune) {
	const hex = "0123456789abcdef"
	units := []rune{r}
	if r > 0xffff {
		r1, r2 := utf16.EncodeRune(r)
		units = []rune{r1, r2}
	}
	for _, u := range units {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(u>>shift)&0xf])
		}
	}
}
