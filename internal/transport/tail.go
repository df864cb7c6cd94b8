package transport

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"
)

// StderrLineMessage is the message each line a server writes to its
// stderr is logged with, at debug level, with the line as "line": a
// command that shows those lines at another level (mcplhost run -v)
// knows them by it.
const StderrLineMessage = "server stderr"

// stderrTail keeps the last lines a process wrote to stderr: at most
// maxLines lines and maxBytes bytes, whichever is smaller. It also logs each
// line at debug level as it arrives.
type stderrTail struct {
	mu       sync.Mutex
	lines    []string
	size     int
	partial  []byte
	skipping bool // the current line was cut; drop the rest of it
	maxLines int
	maxBytes int
	log      *slog.Logger
}

const (
	tailLines = 64
	tailBytes = 16 << 10
	// a single stderr line is cut at this length, so one long line cannot
	// take the whole tail.
	tailLineMax = 4 << 10
)

func newStderrTail(log *slog.Logger) *stderrTail {
	return &stderrTail{maxLines: tailLines, maxBytes: tailBytes, log: log}
}

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !t.skipping {
				t.partial = append(t.partial, p...)
				if len(t.partial) > tailLineMax {
					// Keep the cut line, and drop the rest of it as it
					// comes, however many writes it takes.
					t.addLocked(string(t.partial))
					t.partial = t.partial[:0]
					t.skipping = true
				}
			}
			break
		}
		if !t.skipping {
			t.partial = append(t.partial, p[:i]...)
			t.addLocked(string(t.partial))
		}
		t.partial = t.partial[:0]
		t.skipping = false
		p = p[i+1:]
	}
	return n, nil
}

func (t *stderrTail) addLocked(line string) {
	line = strings.TrimRight(line, "\r")
	if len(line) > tailLineMax {
		cut := tailLineMax
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "…"
	}
	t.log.Debug(StderrLineMessage, "line", line)
	t.lines = append(t.lines, line)
	t.size += len(line) + 1
	for len(t.lines) > t.maxLines || (t.size > t.maxBytes && len(t.lines) > 1) {
		t.size -= len(t.lines[0]) + 1
		t.lines = t.lines[1:]
	}
}

// String returns the kept lines, and any unterminated last line, within
// the same bounds of lines and bytes.
func (t *stderrTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines, size := t.lines, t.size
	if len(t.partial) > 0 {
		last := strings.TrimRight(string(t.partial), "\r")
		lines = append(lines[:len(lines):len(lines)], last)
		size += len(last) + 1
	}
	for len(lines) > t.maxLines || (size > t.maxBytes && len(lines) > 1) {
		size -= len(lines[0]) + 1
		lines = lines[1:]
	}
	return strings.Join(lines, "\n")
}
