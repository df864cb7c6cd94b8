package host

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/store"
)

// StoreState is the store's health as the host's writes found it
// (Host.StoreHealth): the status server's /healthz, /api/store and page
// read it.
//
// The store is failing from the first write that fails for the store's
// own reasons (a full disk, an I/O error, a file in doubt: not a record
// the store refuses for its content, not a closed store, not a call its
// caller gave up on) until the next write that succeeds. A store nobody
// writes to while it fails stays failing: the servers whose messages were
// refused send them again, and the host's hourly prune writes too, so
// the next write after space is back ends it.
type StoreState struct {
	// Failing says the last write failed.
	Failing bool
	// Since is when the first of the failing writes failed; zero when not
	// failing.
	Since time.Time
	// FailedWrites counts the writes failed since then.
	FailedWrites int
	// LastError is the last failure's error text.
	LastError string
	// Recovered is when the store last began writing again after
	// failing; zero if it never failed.
	Recovered time.Time
}

// StoreHealth reports the store's health (see StoreState).
func (h *Host) StoreHealth() StoreState {
	return h.health.state()
}

// The log lines of a failing store: one when it begins, a count for each
// window (lograte.Window) while it lasts, one when it ends.
var logStoreFailing = lograte.Kind{
	Msg:     "the store refused a write: what it carried was not accepted, and its caller was told so; the host tries again with the next write, and says when the store writes again (free disk space if the disk is full)",
	Summary: "%s more writes failed%s in %s: the store is still failing",
	Level:   slog.LevelError,
}

// healthStore is the host's store, watched: every write's outcome goes to
// its health, which logs a failing store's lines and answers StoreHealth.
type healthStore struct {
	store.Store
	health *storeHealth
}

func (s healthStore) Append(ctx context.Context, recs ...store.Record) ([]store.Record, error) {
	out, err := s.Store.Append(ctx, recs...)
	s.health.observe(ctx, err)
	return out, err
}

func (s healthStore) AddMessages(ctx context.Context, msgs []store.Message) ([]bool, error) {
	added, err := s.Store.AddMessages(ctx, msgs)
	s.health.observe(ctx, err)
	return added, err
}

func (s healthStore) Record(ctx context.Context, entries []store.Entry, cursors map[string]int64) ([]store.Entry, error) {
	out, err := s.Store.Record(ctx, entries, cursors)
	s.health.observe(ctx, err)
	return out, err
}

func (s healthStore) Compact(ctx context.Context, through int64, keep []int64) (int, error) {
	n, err := s.Store.Compact(ctx, through, keep)
	s.health.observe(ctx, err)
	return n, err
}

func (s healthStore) DropCursors(ctx context.Context, names ...string) error {
	err := s.Store.DropCursors(ctx, names...)
	s.health.observe(ctx, err)
	return err
}

func (s healthStore) PruneInbox(ctx context.Context, q store.PruneQuery) (int, error) {
	n, err := s.Store.PruneInbox(ctx, q)
	s.health.observe(ctx, err)
	return n, err
}

// storeHealth is what the writes found. Its methods are safe for
// concurrent use.
type storeHealth struct {
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	st     StoreState
	limits *lograte.Limiter // while failing: the episode's lines
	closed bool
}

// observe takes one write's outcome.
func (s *storeHealth) observe(ctx context.Context, err error) {
	if err != nil && !storeFault(ctx, err) {
		return // the caller's, not the store's
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if err == nil {
		if !s.st.Failing {
			return
		}
		failed, since := s.st.FailedWrites, s.st.Since
		s.st = StoreState{Recovered: now}
		if s.limits != nil {
			s.limits.Close() // its last count first
			s.limits = nil
		}
		// At Warn, not Info: it ends what was logged at Error, and is
		// shown wherever that was (mcplhost run logs Warn and above).
		s.log.Warn("the store is writing again after "+lograte.Thousands(failed)+" failed "+plural(failed, "write", "writes")+" over "+lograte.Seconds(now.Sub(since)),
			"failed_writes", failed, "since", since.UTC())
		return
	}
	if !s.st.Failing {
		s.st = StoreState{Failing: true, Since: now, Recovered: s.st.Recovered}
		if !s.closed {
			s.limits = lograte.New(s.log, "")
		}
	}
	s.st.FailedWrites++
	s.st.LastError = err.Error()
	if s.limits != nil {
		s.limits.Log(&logStoreFailing, "error", err.Error())
	}
}

// storeFault reports whether a write's error is the store's own failure
// rather than its caller's: not a content the store refuses
// (store.ErrInvalid), not a store closed at shutdown, not a call whose
// ctx ended before it was written.
func storeFault(ctx context.Context, err error) bool {
	switch {
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrClosed):
		return false
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return false
	}
	return true
}

func (s *storeHealth) state() StoreState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// close logs a failing store's last count and stops its timers; later
// failures are counted, not logged.
func (s *storeHealth) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.limits != nil {
		s.limits.Close()
		s.limits = nil
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
