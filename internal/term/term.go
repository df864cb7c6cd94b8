// Package term makes text from untrusted sources safe to print on a
// terminal: no control sequence, line break or bidirectional override in
// it can reach the terminal raw.
//
// The runes escaped ("dangerous" below) are C0 controls (U+0000–U+001F,
// including \n, \r and \t), DEL (U+007F), C1 controls (U+0080–U+009F),
// the bidirectional controls U+061C, U+200E, U+200F, U+202A–U+202E and
// U+2066–U+2069, and the separators U+2028 and U+2029. Line and Lines also
// escape each byte that is not part of valid UTF-8. Everything else,
// including emoji sequences joined by U+200D and every script, passes
// through byte for byte.
package term

import (
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// dangerous reports whether r is one of the runes this package escapes.
func dangerous(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r < 0x61c:
		return false
	}
	switch r {
	case 0x61c, 0x200e, 0x200f, 0x2028, 0x2029:
		return true
	}
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// Line returns s with each dangerous rune and each invalid UTF-8 byte
// replaced by a visible escape, so that s prints as one line:
//
//	\n \r \t          for U+000A, U+000D, U+0009
//	\xHH              for any other C0 control and DEL (\x1b, \x00, \x7f)
//	\uHHHH            for C1, bidirectional controls and U+2028/U+2029
//	                  (\u009b, \u202e, \u2028)
//	\xHH              for a byte that is not valid UTF-8 (\xff, \xc3);
//	                  HH is then 80 or more, which no control has
//
// Hex digits are lower case. A backslash is not escaped, so the result is
// for reading, not for decoding back. When nothing needs escaping, Line
// returns s itself.
func Line(s string) string {
	i := firstEscape(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != 0x7f {
				b.WriteByte(c)
			} else {
				writeASCII(&b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		case dangerous(r):
			writeU(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstEscape returns the index of the first byte of s that Line escapes,
// or -1.
func firstEscape(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || dangerous(r) {
			return i
		}
		i += size
	}
	return -1
}

func writeASCII(b *strings.Builder, c byte) {
	switch c {
	case '\n':
		b.WriteString(`\n`)
	case '\r':
		b.WriteString(`\r`)
	case '\t':
		b.WriteString(`\t`)
	default:
		b.WriteString(`\x`)
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
}

// writeU writes r, at most U+FFFF, as \uHHHH.
func writeU(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[r>>shift&0xf])
	}
}

// Lines splits s into lines at each "\n", dropping a "\r" right before it,
// and returns each line escaped by Line, for a caller to print one by one.
// It splits as strings.Split does: Lines("") is [""], and a text ending in
// "\n" ends in an empty line.
func Lines(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Line(strings.TrimSuffix(l, "\r"))
	}
	return lines
}

// JSON returns b, valid JSON such as encoding/json writes, with each raw
// DEL, C1 control, bidirectional control and U+2028/U+2029 written as a
// \uHHHH escape (lower-case hex), and each byte that is not valid UTF-8
// as \ufffd, the rune encoding/json decodes it to. In valid JSON these can
// only occur inside strings, where the escapes stand for the same runes,
// so the result is the same JSON value. encoding/json escapes C0 controls
// in the strings it writes and the JSON grammar allows none raw, so C0
// bytes (the whitespace between tokens) are left alone. When nothing needs
// escaping, JSON returns b itself.
func JSON(b []byte) []byte {
	i := firstJSONEscape(b)
	if i < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		c := b[i]
		if c < utf8.RuneSelf {
			if c == 0x7f {
				out = append(out, `\u007f`...)
			} else {
				out = append(out, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case dangerous(r):
			out = append(out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// firstJSONEscape returns the index of the first byte of b that JSON
// escapes, or -1.
func firstJSONEscape(b []byte) int {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 || dangerous(r) {
			return i
		}
		i += size
	}
	return -1
}
