package wire

import (
	"encoding/json"
	"unicode/utf8"
)

// scanEnvelope reads a JSON-RPC message in one pass: it checks that b is one
// well-formed JSON object (what it accepts, json.Valid accepts) and returns
// the top-level members the router needs as slices of b, without decoding
// the nested values. Member names match exactly, as JSON-RPC's are
// case-sensitive; a repeated member's last value wins. It replaces
// json.Unmarshal on the hot path, which validates the whole message and then
// walks it again.
func scanEnvelope(b []byte) (env envelope, ok bool) {
	s := scanner{b: b}
	s.space()
	if s.i >= len(b) || b[s.i] != '{' {
		return env, false
	}
	s.i++
	s.space()
	if s.peek() == '}' {
		s.i++
		return env, s.end()
	}
	for {
		s.space()
		kstart := s.i
		if !s.string() {
			return env, false
		}
		key := b[kstart+1 : s.i-1]
		s.space()
		if s.peek() != ':' {
			return env, false
		}
		s.i++
		s.space()
		vstart := s.i
		if !s.value(0) {
			return env, false
		}
		val := b[vstart:s.i]
		switch string(key) {
		case "id":
			env.ID = val
		case "method":
			m, ok := jsonString(val)
			env.Method, env.badMethod = m, !ok || m == ""
		case "params":
			env.Params = val
		case "result":
			env.Result = val
		case "error":
			env.Error = val
		default:
			if hasByte(key, '\\') {
				// An escaped member name: let encoding/json say what it
				// spells, so "\u0069d" is still "id".
				var k string
				if json.Unmarshal(b[kstart:kstart+len(key)+2], &k) == nil && isEnvelopeKey(k) {
					return fallbackParse(b)
				}
			}
		}
		s.space()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return env, s.end()
		default:
			return env, false
		}
	}
}

func isEnvelopeKey(k string) bool {
	switch k {
	case "id", "method", "params", "result", "error":
		return true
	}
	return false
}

// fallbackParse decodes the rare message whose member names are escaped.
func fallbackParse(b []byte) (envelope, bool) {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return envelope{}, false
	}
	env := envelope{ID: raw["id"], Params: raw["params"], Result: raw["result"], Error: raw["error"]}
	if m, ok := raw["method"]; ok {
		s, ok := jsonString(m)
		env.Method, env.badMethod = s, !ok || s == ""
	}
	return env, true
}

// jsonString decodes a JSON string value; ok is false for anything else.
func jsonString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if inner := v[1 : len(v)-1]; !hasByte(inner, '\\') && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// maxDepth bounds nesting, as encoding/json does, so a hostile message of
// brackets cannot exhaust the stack.
const maxDepth = 10000

type scanner struct {
	b []byte
	i int
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether only whitespace follows.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *scanner) value(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch c := s.peek(); {
	case c == '{':
		s.i++
		s.space()
		if s.peek() == '}' {
			s.i++
			return true
		}
		for {
			s.space()
			if !s.string() {
				return false
			}
			s.space()
			if s.peek() != ':' {
				return false
			}
			s.i++
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			switch s.peek() {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		s.i++
		s.space()
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return s.string()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// string scans a JSON string, checking escapes and refusing raw control
// characters. Invalid UTF-8 is accepted, as encoding/json accepts it.
func (s *scanner) string() bool {
	if s.peek() != '"' {
		return false
	}
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return false
					}
				}
				s.i += 5
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number scans a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
