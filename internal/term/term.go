// Package term makes text from untrusted sources safe to print on a
// terminal: no control sequence, line break, bidirectional override or
// invisible character in it can reach the terminal raw, so what a server
// wrote can't disguise itself as something else.
//
// The runes escaped ("dangerous" below) are C0 controls (U+0000–U+001F,
// including \n, \r and \t), DEL (U+007F), C1 controls (U+0080–U+009F),
// the separators U+2028 and U+2029, and every format character (Unicode
// category Cf): the bidirectional controls U+061C, U+200E, U+200F,
// U+202A–U+202E and U+2066–U+2069, the zero-width and invisible ones
// (U+200B–U+200D, U+2060–U+2064, U+FEFF, U+180E, the soft hyphen U+00AD),
// the tag characters U+E0001 and U+E0020–U+E007F, and the rest of Cf.
// Line and Lines also escape each byte that is not part of valid UTF-8.
//
// One exception keeps emoji whole: a ZERO WIDTH JOINER (U+200D) between
// two symbols (category So, the emoji among them), where the one before
// may be followed by a variation selector U+FE0F or a skin-tone modifier
// (U+1F3FB–U+1F3FF), passes raw, so 👩‍👩‍👧 prints as one family. A
// ZWJ anywhere else, and every ZERO WIDTH NON-JOINER, is escaped: in
// Indic and Persian text, where they shape letters, that shows the
// joiner as \u200d or \u200c, a cosmetic cost taken so that two ids
// that look alike are shown apart. The tag characters are escaped even
// in the three subdivision flags (🏴 followed by tags), since the same
// characters carry invisible text.
//
// Everything else, including variation selectors, every script and
// right-to-left letters, passes through byte for byte. The status page
// (internal/status/page.html) escapes the same set the same way.
package term

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// dangerous reports whether r is one of the runes this package escapes,
// the ZWJ aside (see joins).
func dangerous(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r < 0xad:
		return false
	case r == 0x2028, r == 0x2029:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

const zwj = 0x200d

// joins reports whether the ZWJ that is before[len] .. after[0] (before
// ends just before it, after starts just past it) joins an emoji
// sequence: a symbol (So) before it, past any U+FE0F or skin-tone
// modifier, and a symbol right after it.
func joins(before, after string) bool {
	for range 4 {
		r, n := utf8.DecodeLastRuneInString(before)
		if r != 0xfe0f && (r < 0x1f3fb || r > 0x1f3ff) {
			break
		}
		before = before[:len(before)-n]
	}
	prev, _ := utf8.DecodeLastRuneInString(before)
	next, _ := utf8.DecodeRuneInString(after)
	// U+FFFD is a symbol too, and what a missing or broken rune decodes to.
	return prev != utf8.RuneError && next != utf8.RuneError && unicode.Is(unicode.So, prev) && unicode.Is(unicode.So, next)
}

// escapes reports whether the rune r, s[i:i+size], is escaped.
func escapes(s string, i, size int, r rune) bool {
	if r == zwj {
		return !joins(s[:i], s[i+size:])
	}
	return dangerous(r)
}

// Line returns s with each dangerous rune and each invalid UTF-8 byte
// replaced by a visible escape, so that s prints as one line:
//
//	\n \r \t          for U+000A, U+000D, U+0009
//	\xHH              for any other C0 control and DEL (\x1b, \x00, \x7f)
//	\uHHHH            for C1, format characters up to U+FFFF and
//	                  U+2028/U+2029 (\u009b, \u202e, \u200b, \u2028)
//	\UHHHHHHHH        for format characters past U+FFFF (the tag
//	                  character U+E0041 is \U000e0041)
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
		case escapes(s, i, size, r):
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
		if r == utf8.RuneError && size == 1 || escapes(s, i, size, r) {
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

// writeU writes r as \uHHHH, or past U+FFFF as \UHHHHHHHH.
func writeU(b *strings.Builder, r rune) {
	shift := 12
	if r > 0xffff {
		b.WriteString(`\U`)
		shift = 28
	} else {
		b.WriteString(`\u`)
	}
	for ; shift >= 0; shift -= 4 {
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
// DEL, C1 control, format character (the ZWJ of an emoji sequence aside)
// and U+2028/U+2029 written as a \uHHHH escape (lower-case hex; a rune
// past U+FFFF as its UTF-16 surrogate pair, \udb40\udc41), and each byte that is not valid UTF-8
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
		case escapesJSON(b, i, size, r):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				out = appendU4(out, r1)
				r = r2
			}
			out = appendU4(out, r)
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
		if r == utf8.RuneError && size == 1 || escapesJSON(b, i, size, r) {
			return i
		}
		i += size
	}
	return -1
}

// escapesJSON is escapes for the rune r, b[i:i+size].
func escapesJSON(b []byte, i, size int, r rune) bool {
	if r == zwj {
		// Only the runes on either side matter: a few bytes each.
		return !joins(string(b[max(0, i-24):i]), string(b[i+size:min(len(b), i+size+4)]))
	}
	return dangerous(r)
}

func appendU4(out []byte, r rune) []byte {
	return append(out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
