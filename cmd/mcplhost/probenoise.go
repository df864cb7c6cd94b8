package main

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// maxNoiseFirst bounds, in bytes, the first skipped line kept to show.
const maxNoiseFirst = 80

// noiseStream is a stdio server's stream, counting the lines the server
// writes to its stdout that are not JSON-RPC messages. The JSON-RPC layer
// skips them (with a debug log line each, the first few); on stdio each is
// a server writing something other than the protocol to stdout, such as a
// log line or a message pretty-printed over several lines, and probe warns
// of them once, with their count and the first of them.
type noiseStream struct {
	transport.Stream

	mu    sync.Mutex
	lines int
	first string // the first, cut to maxNoiseFirst bytes
}

func (s *noiseStream) Read() ([]byte, error) {
	msg, err := s.Stream.Read()
	if err == nil && !isMessage(msg) {
		s.mu.Lock()
		s.lines++
		if s.lines == 1 {
			s.first = wire.Cut(string(msg), maxNoiseFirst)
		}
		s.mu.Unlock()
	}
	return msg, err
}

// ReportsNoise tells package wire that probe reports these lines itself
// (wire.NoiseReporter), so the log does not warn of them too.
func (s *noiseStream) ReportsNoise() bool { return true }

// noise returns what was counted, or nil when no line was skipped.
func (s *noiseStream) noise() *probeNoise {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines == 0 {
		return nil
	}
	return &probeNoise{Lines: s.lines, First: s.first}
}

// envelopeMember is what isMessage needs of a member's value: its first
// byte and its length. The value is not copied: params may be megabytes.
type envelopeMember struct {
	first byte
	n     int
}

func (m *envelopeMember) UnmarshalJSON(b []byte) error {
	m.first, m.n = b[0], len(b)
	return nil
}

// isMessage reports whether package wire takes line as a JSON-RPC message
// rather than skipping it (wire's parse; TestIsMessageAgreesWithWire
// holds the two together): a JSON object with a "method" that is a
// non-empty string; or with an "id" and a "result" or an "error" (null
// included); or with an "id" that is not null, a "method" that is not a
// non-empty string and neither "result" nor "error" (wire answers that
// -32600).
func isMessage(line []byte) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	var m map[string]envelopeMember
	if json.Unmarshal(line, &m) != nil {
		return false
	}
	id, hasID := m["id"]
	method, hasMethod := m["method"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	switch {
	case hasMethod && method.first == '"' && method.n > 2: // a non-empty string
		return true
	case hasMethod:
		return hasID && id.first != 'n' && !hasResult && !hasError
	}
	return hasID && (hasResult || hasError)
}
