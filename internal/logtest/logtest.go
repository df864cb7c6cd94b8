// Package logtest records what code logs through log/slog, so tests can
// check operator log lines: their message, level and attributes.
package logtest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Record is one logged record. Attrs holds its attributes by key, the
// logger's With attributes included; a group's keys are prefixed with the
// group's name and a dot.
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]slog.Value
}

// Attr returns an attribute's printed form, or "" when it is absent.
func (r Record) Attr(key string) string {
	v, ok := r.Attrs[key]
	if !ok {
		return ""
	}
	return v.String()
}

// Recorder keeps every record logged through its loggers.
type Recorder struct {
	mu      sync.Mutex
	recs    []Record
	changed chan struct{} // closed and replaced on each record
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{changed: make(chan struct{})} }

// Logger returns a logger that records into r, at every level.
func (r *Recorder) Logger() *slog.Logger { return slog.New(&handler{r: r}) }

func (r *Recorder) add(rec Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// All returns the records so far, in order.
func (r *Recorder) All() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// Find returns the records whose message is msg.
func (r *Recorder) Find(msg string) []Record {
	var out []Record
	for _, rec := range r.All() {
		if rec.Message == msg {
			out = append(out, rec)
		}
	}
	return out
}

// One returns the only record with message msg, failing the test when
// there is not exactly one.
func (r *Recorder) One(t testing.TB, msg string) Record {
	t.Helper()
	got := r.Find(msg)
	if len(got) != 1 {
		t.Fatalf("want exactly one log record %q, got %d; all records:\n%s", msg, len(got), r.Dump())
	}
	return got[0]
}

// AtLeast returns the records at level or above.
func (r *Recorder) AtLeast(level slog.Level) []Record {
	var out []Record
	for _, rec := range r.All() {
		if rec.Level >= level {
			out = append(out, rec)
		}
	}
	return out
}

// WaitTimeout bounds Wait and WaitFunc.
const WaitTimeout = 20 * time.Second

// Wait returns once n records with message msg have been logged, failing
// the test after WaitTimeout.
func (r *Recorder) Wait(t testing.TB, msg string, n int) {
	t.Helper()
	r.WaitFunc(t, fmt.Sprintf("%d log records %q", n, msg), func(recs []Record) bool {
		count := 0
		for _, rec := range recs {
			if rec.Message == msg {
				count++
			}
		}
		return count >= n
	})
}

// WaitFunc returns once done holds for the records so far, failing the
// test after WaitTimeout with what (what was waited for).
func (r *Recorder) WaitFunc(t testing.TB, what string, done func([]Record) bool) {
	t.Helper()
	deadline := time.After(WaitTimeout)
	for {
		r.mu.Lock()
		ch := r.changed
		recs := slices.Clone(r.recs)
		r.mu.Unlock()
		if done(recs) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s within %s; all records:\n%s", what, WaitTimeout, r.Dump())
		}
	}
}

// Dump renders every record, one a line, for a failure message.
func (r *Recorder) Dump() string {
	var b strings.Builder
	for _, rec := range r.All() {
		fmt.Fprintf(&b, "  %s %q", rec.Level, rec.Message)
		keys := make([]string, 0, len(rec.Attrs))
		for k := range rec.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%v", k, rec.Attrs[k])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

type handler struct {
	r      *Recorder
	attrs  []slog.Attr
	prefix string
}

func (h *handler) Enabled(context.Context, slog.Level) bool { return true }

func (h *handler) Handle(_ context.Context, rec slog.Record) error {
	m := make(map[string]slog.Value, len(h.attrs)+rec.NumAttrs())
	for _, a := range h.attrs {
		m[a.Key] = a.Value.Resolve()
	}
	rec.Attrs(func(a slog.Attr) bool {
		m[h.prefix+a.Key] = a.Value.Resolve()
		return true
	})
	h.r.add(Record{Level: rec.Level, Message: rec.Message, Attrs: m})
	return nil
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(slices.Clone(h.attrs), as...)
	return &n
}

func (h *handler) WithGroup(name string) slog.Handler {
	n := *h
	n.prefix = h.prefix + name + "."
	return &n
}
