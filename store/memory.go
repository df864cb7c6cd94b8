package store

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
)

// Memory is a Store that keeps everything in memory: durable only as long
// as the process. It is for a host run with no store file, and for tests.
type Memory struct {
	mu     sync.Mutex
	closed bool
	// log is the log in Seq order; lastRec the Seq Append gave last,
	// which compaction may have dropped.
	log     []Record
	lastRec int64
	// inbox is every message in Seq order; byServer and byChannel index
	// it (positions in inbox, increasing) for Page.
	inbox     []Message
	byServer  map[string][]int
	byChannel map[[2]string][]int
	seen      map[[4]string]bool
	// pruned is the At of each pruned message whose key seen still
	// holds, for PruneInbox's KeysBefore.
	pruned  map[[4]string]time.Time
	lastMsg int64
	// history is every conversation's entries, in Seq order; lastEntry
	// the Seq Record gave last.
	history   map[string][]Entry
	lastEntry int64
	// states are SaveState's bodies, by name.
	states  map[string][]byte
	cursors map[string]int64
}

// NewMemory returns an empty memory store.
func NewMemory() *Memory {
	return &Memory{
		byServer:  map[string][]int{},
		byChannel: map[[2]string][]int{},
		seen:      map[[4]string]bool{},
		pruned:    map[[4]string]time.Time{},
		history:   map[string][]Entry{},
		cursors:   map[string]int64{},
	}
}

// Append implements Store. It refuses, all or none, a call with a record
// that fails Record.Validate.
func (m *Memory) Append(ctx context.Context, recs ...Record) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range recs {
		if err := recs[i].Validate(); err != nil {
			return nil, fmt.Errorf("store: append %d records: record %d: %w", len(recs), i+1, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Record, len(recs))
	for i, r := range recs {
		m.lastRec++
		r.Seq = m.lastRec
		m.log = append(m.log, r)
		out[i] = r
	}
	return out, nil
}

// Replay implements Store.
func (m *Memory) Replay(ctx context.Context, fn func(Record) error) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	log := m.log[:len(m.log):len(m.log)]
	m.mu.Unlock()
	for _, r := range log {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// AddMessages implements Store.
func (m *Memory) AddMessages(ctx context.Context, msgs []Message) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	added := make([]bool, len(msgs))
	for i := range msgs {
		k := [4]string{msgs[i].Server, msgs[i].Channel, msgs[i].MessageID, msgs[i].EventID}
		if m.seen[k] {
			continue
		}
		m.seen[k] = true
		m.lastMsg++
		msgs[i].Seq = m.lastMsg
		at := len(m.inbox)
		m.inbox = append(m.inbox, msgs[i])
		m.byServer[msgs[i].Server] = append(m.byServer[msgs[i].Server], at)
		ck := [2]string{msgs[i].Server, msgs[i].Channel}
		m.byChannel[ck] = append(m.byChannel[ck], at)
		added[i] = true
	}
	return added, nil
}

// Messages implements Store.
func (m *Memory) Messages(ctx context.Context, after int64, fn func(Message) error) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	inbox := m.inbox[:len(m.inbox):len(m.inbox)]
	m.mu.Unlock()
	for _, msg := range inbox {
		if msg.Seq <= after {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(msg); err != nil {
			return err
		}
	}
	return nil
}

// Record implements Store. It refuses, all or none, a call with an entry
// whose Conversation is empty, or a cursor with an empty name or a
// negative position, with an error wrapping ErrInvalid. It keeps a copy
// of each entry's Body, so the caller may reuse its buffer.
func (m *Memory) Record(ctx context.Context, entries []Entry, cursors map[string]int64) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validateRecord(entries, cursors); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Entry, len(entries))
	for i, e := range entries {
		m.lastEntry++
		e.Seq = m.lastEntry
		e.Body = bytes.Clone(e.Body)
		m.history[e.Conversation] = append(m.history[e.Conversation], e)
		out[i] = e
		out[i].Body = entries[i].Body
	}
	maps.Copy(m.cursors, cursors)
	return out, nil
}

// validateRecord checks a Record call's entries and cursors, as Memory
// does (a backend's own checks may add to these): every entry names its
// conversation, every cursor has a name and a position of 0 or more.
func validateRecord(entries []Entry, cursors map[string]int64) error {
	what := "record " + counted(len(entries), "entry", "entries") + " and " + counted(len(cursors), "cursor", "cursors")
	for i := range entries {
		if entries[i].Conversation == "" {
			return fmt.Errorf("%s: entry %d: %w: no conversation", what, i+1, ErrInvalid)
		}
	}
	for name, pos := range cursors {
		switch {
		case name == "":
			return fmt.Errorf("%s: %w: a cursor with no name", what, ErrInvalid)
		case pos < 0:
			return fmt.Errorf("%s: cursor %q: %w: negative position %d", what, name, ErrInvalid, pos)
		}
	}
	return nil
}

// History implements Store. fn gets a copy of each entry's Body, which it
// may keep or change.
func (m *Memory) History(ctx context.Context, conversation string, fn func(Entry) error) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	h := m.history[conversation]
	h = h[:len(h):len(h)]
	m.mu.Unlock()
	for _, e := range h {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.Body = bytes.Clone(e.Body)
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Cursors implements Store. The map is the caller's.
func (m *Memory) Cursors(ctx context.Context) (map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	return maps.Clone(m.cursors), nil
}

// Compact implements Store. It makes the log anew, so that a Replay
// already running goes on over the log it started with.
func (m *Memory) Compact(ctx context.Context, through int64, keep []int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	kept := make(map[int64]bool, len(keep))
	for _, seq := range keep {
		kept[seq] = true
	}
	log := make([]Record, 0, len(m.log))
	for _, r := range m.log {
		if r.Seq > through || kept[r.Seq] {
			log = append(log, r)
		}
	}
	dropped := len(m.log) - len(log)
	if dropped > 0 {
		m.log = slices.Clip(log)
	}
	return dropped, nil
}

// Page implements Store. It finds the messages of a server or a channel
// without going through the others'.
func (m *Memory) Page(ctx context.Context, q InboxQuery) ([]Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("store: read a page of the inbox: %w", err)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	// at is the inbox position of the i-th message selected, before
	// After and Through; n how many there are.
	var (
		at func(i int) int
		n  int
	)
	switch {
	case q.Channel != nil:
		idx := m.byChannel[[2]string{q.Server, *q.Channel}]
		at, n = func(i int) int { return idx[i] }, len(idx)
	case q.Server != "":
		idx := m.byServer[q.Server]
		at, n = func(i int) int { return idx[i] }, len(idx)
	default:
		at, n = func(i int) int { return i }, len(m.inbox)
	}
	i := sort.Search(n, func(i int) bool { return m.inbox[at(i)].Seq > q.After })
	var out []Message
	for ; i < n && len(out) < limit; i++ {
		msg := m.inbox[at(i)]
		if q.Through > 0 && msg.Seq > q.Through {
			break
		}
		out = append(out, msg)
	}
	return out, nil
}

// InboxEnd implements Store.
func (m *Memory) InboxEnd(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	if len(m.inbox) == 0 {
		return 0, nil
	}
	return m.inbox[len(m.inbox)-1].Seq, nil // after pruning, what is left
}

// PruneInbox implements Store. It makes the inbox and its indexes anew,
// so a Messages already running goes on over the inbox it started with.
func (m *Memory) PruneInbox(ctx context.Context, q PruneQuery) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultPruneLimit
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	n := 0
	if !q.Before.IsZero() {
		kept := make([]Message, 0, len(m.inbox))
		for _, msg := range m.inbox {
			through, ok := q.Through[msg.Server]
			if !ok {
				through = q.Floor
			}
			if n < limit && msg.Seq <= through && (msg.At.IsZero() || msg.At.Before(q.Before)) {
				m.pruned[[4]string{msg.Server, msg.Channel, msg.MessageID, msg.EventID}] = msg.At
				n++
				continue
			}
			kept = append(kept, msg)
		}
		if n > 0 {
			m.inbox = slices.Clip(kept)
			m.byServer, m.byChannel = map[string][]int{}, map[[2]string][]int{}
			for i, msg := range m.inbox {
				m.byServer[msg.Server] = append(m.byServer[msg.Server], i)
				ck := [2]string{msg.Server, msg.Channel}
				m.byChannel[ck] = append(m.byChannel[ck], i)
			}
		}
	}
	if !q.KeysBefore.IsZero() {
		for k, at := range m.pruned {
			if at.Before(q.KeysBefore) {
				delete(m.pruned, k)
				delete(m.seen, k)
			}
		}
	}
	return n, nil
}

// DropCursors implements Store.
func (m *Memory) DropCursors(ctx context.Context, names ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, name := range names {
		delete(m.cursors, name)
	}
	return nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// counted is "1 entry", "3 entries".
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// SaveState implements Store.
func (m *Memory) SaveState(ctx context.Context, name string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%w: a state with no name", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.states == nil {
		m.states = map[string][]byte{}
	}
	m.states[name] = bytes.Clone(body)
	return nil
}

// LoadState implements Store.
func (m *Memory) LoadState(ctx context.Context, name string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false, ErrClosed
	}
	b, ok := m.states[name]
	return bytes.Clone(b), ok, nil
}
