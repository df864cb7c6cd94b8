// Package lograte keeps a misbehaving peer from flooding the log: a warning
// that can repeat once per message a server sends is logged in full the
// first time, then counted, and the count is logged as one summary line per
// window ("dropped 12,345 notifications from server "x" in the last 10 s:
// the inbound queue was full"), never one line per message.
package lograte

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Window is how long repeats are counted before their summary is logged.
const Window = 10 * time.Second

// Kind is one kind of repeated warning.
type Kind struct {
	// Msg is the first occurrence's log message.
	Msg string
	// Summary words a count: fmt.Sprintf(Summary, count, from, span), where
	// count is written with thousands separators ("12,345"), from is
	// ` from server "x"` (or "" when the limiter names no server) and span
	// "the last 10 s". For example
	// "dropped %s notifications%s in %s: the inbound queue was full".
	Summary string
	// Level is the level of both lines; nil means slog.LevelWarn.
	Level slog.Leveler
	// KeyAttr names the attribute LogFor's key goes in, on the summary
	// ("method"); empty means "key".
	KeyAttr string
}

// Limiter counts repeats of each Kind. Its zero value is not usable: make
// one with New. Close logs what is still counted and stops its timers.
type Limiter struct {
	log    *slog.Logger
	server string
	window time.Duration

	mu     sync.Mutex
	kinds  map[slot]*count
	closed bool
	timers sync.WaitGroup // window-end summaries scheduled or being logged
}

// slot is what is counted apart: a Kind, or a Kind for one key.
type slot struct {
	k   *Kind
	key string
	set bool // LogFor's: key is named on the summary
}

type count struct {
	n     int         // repeats since the last line
	since time.Time   // when counting began
	timer *time.Timer // logs the summary at the window's end
}

// New returns a Limiter logging to log. server, if not empty, is named in
// each summary.
func New(log *slog.Logger, server string) *Limiter {
	return &Limiter{log: log, server: server, window: Window, kinds: map[slot]*count{}}
}

// Log records one occurrence of k: logged in full, with attrs, when k has
// not occurred within the window, otherwise counted for the summary.
func (l *Limiter) Log(k *Kind, attrs ...any) { l.log1(slot{k: k}, attrs) }

// LogFor is Log with k counted apart for each key (a method name): each
// key's first occurrence is logged. Keys must come from a small set, never
// from what a peer chooses freely: each is remembered until Close.
func (l *Limiter) LogFor(k *Kind, key string, attrs ...any) {
	l.log1(slot{k: k, key: key, set: true}, attrs)
}

func (l *Limiter) log1(s slot, attrs []any) {
	l.mu.Lock()
	c := l.kinds[s]
	if c == nil {
		c = &count{}
		l.kinds[s] = c
	}
	if l.closed || c.timer != nil {
		c.n++
		l.mu.Unlock()
		return
	}
	// The first in a window: log it, and count what follows until the
	// window's end.
	c.since = time.Now()
	l.timers.Add(1)
	c.timer = time.AfterFunc(l.window, func() {
		defer l.timers.Done()
		l.flush(s, false)
	})
	l.mu.Unlock()
	l.log.Log(context.Background(), level(s.k), s.k.Msg, attrs...)
}

// flush logs s's summary, if anything was counted. At a window's end (last
// false) counting goes on: the next occurrence starts a new window.
func (l *Limiter) flush(s slot, last bool) {
	l.mu.Lock()
	c := l.kinds[s]
	if c == nil {
		l.mu.Unlock()
		return
	}
	n, since := c.n, c.since
	c.n = 0
	if c.timer != nil {
		if c.timer.Stop() {
			// It will not run: nothing is left to wait for.
			l.timers.Done()
		}
		c.timer = nil
	}
	l.mu.Unlock()
	if n == 0 {
		return
	}
	span := "the last " + Seconds(l.window)
	if last {
		span = "the last " + Seconds(time.Since(since))
	}
	from := ""
	if l.server != "" {
		from = fmt.Sprintf(" from server %q", l.server)
	}
	attrs := []any{slog.Int("count", n)}
	if s.set {
		name := s.k.KeyAttr
		if name == "" {
			name = "key"
		}
		attrs = append(attrs, slog.String(name, s.key))
	}
	l.log.Log(context.Background(), level(s.k), fmt.Sprintf(s.k.Summary, Thousands(n), from, span), attrs...)
}

// Close logs every summary still counted, stops the timers and waits for
// a summary a timer is logging, so nothing is logged after it returns;
// later occurrences are counted and never logged.
func (l *Limiter) Close() {
	l.mu.Lock()
	l.closed = true
	slots := make([]slot, 0, len(l.kinds))
	for s := range l.kinds {
		slots = append(slots, s)
	}
	l.mu.Unlock()
	for _, s := range slots {
		l.flush(s, true)
	}
	l.timers.Wait()
}

func level(k *Kind) slog.Level {
	if k.Level == nil {
		return slog.LevelWarn
	}
	return k.Level.Level()
}

// Thousands writes n with comma separators: 12345 is "12,345".
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return neg + s
}

// Seconds writes a span as whole seconds, at least 1: "10 s".
func Seconds(d time.Duration) string {
	n := int((d + time.Second - 1) / time.Second)
	if n < 1 {
		n = 1
	}
	return strconv.Itoa(n) + " s"
}
