package protocol

import (
	"encoding/json"
	"unicode/utf8"
)

// blockText returns the text of a content block if it is a text block,
// exactly as json.Unmarshal into a TextContent reads it. A block of the
// usual shape (an object of "type" and "text" and nothing else, each a
// string with no escape, no control character and valid UTF-8) is read
// here without encoding/json; any other goes to json.Unmarshal.
// FuzzJoinText holds the two to the same answers.
func blockText(raw []byte) ([]byte, bool) {
	if typ, text, ok := plainTextBlock(raw); ok {
		return text, string(typ) == "text"
	}
	var b TextContent
	if json.Unmarshal(raw, &b) != nil || b.Type != "text" {
		return nil, false
	}
	return []byte(b.Text), true
}

// plainTextBlock reads b when it is a block of the usual shape; ok is
// false for anything else. Keys match as encoding/json matches field
// names: case-insensitively (for these two ASCII names, no non-ASCII key
// can match), the last of a repeated one standing.
func plainTextBlock(b []byte) (typ, text []byte, ok bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil, nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			key, j, ok := plainString(b, i)
			if !ok {
				return nil, nil, false
			}
			i = skipSpace(b, j)
			if i == len(b) || b[i] != ':' {
				return nil, nil, false
			}
			val, j, ok := plainString(b, skipSpace(b, i+1))
			if !ok {
				return nil, nil, false
			}
			switch {
			case foldASCII(key, "type"):
				typ = val
			case foldASCII(key, "text"):
				text = val
			default:
				return nil, nil, false
			}
			i = skipSpace(b, j)
			if i == len(b) {
				return nil, nil, false
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return nil, nil, false
			}
			i = skipSpace(b, i+1)
		}
	}
	if skipSpace(b, i) != len(b) {
		return nil, nil, false
	}
	return typ, text, true
}

// plainString reads the JSON string at b[i:] when it has no escape, no
// control character and is valid UTF-8: its contents and the index after
// its closing quote.
func plainString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s = b[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, 0, false
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// foldASCII says an ASCII key equals name, a lower-case ASCII word, ignoring
// case.
func foldASCII(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range len(key) {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}
