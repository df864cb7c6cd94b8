package transport

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var discardLogger = slog.New(slog.DiscardHandler)

// readResult is one Read's outcome.
type readResult struct {
	msg []byte
	err error
}

// readWithin calls s.Read and fails the test if it has not returned within
// d. On a timeout the Read goroutine stays blocked until the test's cleanup
// closes the stream.
func readWithin(t *testing.T, s Stream, d time.Duration) ([]byte, error) {
	t.Helper()
	ch := make(chan readResult, 1)
	go func() {
		msg, err := s.Read()
		ch <- readResult{msg, err}
	}()
	select {
	case r := <-ch:
		return r.msg, r.err
	case <-time.After(d):
		t.Fatalf("Read did not return within %s", d)
		return nil, nil
	}
}

// readUntilErr reads messages until Read fails, each within d.
func readUntilErr(t *testing.T, s Stream, d time.Duration) ([]string, error) {
	t.Helper()
	var got []string
	for {
		msg, err := readWithin(t, s, d)
		if err != nil {
			return got, err
		}
		got = append(got, string(msg))
	}
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// logRecorder is a slog.Handler that keeps what it is given.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// Find returns the attributes of the first record with that message, and
// whether there was one.
func (h *logRecorder) Find(msg string) (slog.Level, map[string]slog.Value, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.IndexFunc(h.records, func(r slog.Record) bool { return r.Message == msg })
	if i < 0 {
		return 0, nil, false
	}
	attrs := map[string]slog.Value{}
	h.records[i].Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value
		return true
	})
	return h.records[i].Level, attrs, true
}

func (h *logRecorder) All(msg string) []map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range h.records {
		if r.Message != msg {
			continue
		}
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// testTimeout bounds a wait that should end at once.
const testTimeout = 10 * time.Second

// tooLarge reports whether err is a *TooLargeError for limit, with a size
// over it.
func tooLarge(err error, limit int) bool {
	var tl *TooLargeError
	return errors.As(err, &tl) && tl.Limit == limit && tl.Size > limit
}

// Signals returns, in order, the signal of each record that reports a
// signal sent ("...; signalled").
func (h *logRecorder) Signals() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if !strings.HasSuffix(r.Message, "; signalled") {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "signal" {
				out = append(out, a.Value.String())
			}
			return true
		})
	}
	return out
}
