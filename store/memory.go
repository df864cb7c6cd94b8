package store

import (
	"context"
	"fmt"
	"sync"
)

// Memory is a Store that keeps everything in memory: durable only as long
// as the process. It is for a host run with no store file, and for tests.
type Memory struct {
	mu      sync.Mutex
	closed  bool
	log     []Record
	inbox   []Message
	seen    map[[3]string]bool
	lastMsg int64
}

// NewMemory returns an empty memory store.
func NewMemory() *Memory { return &Memory{seen: map[[3]string]bool{}} }

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
		r.Seq = int64(len(m.log)) + 1
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
		k := [3]string{msgs[i].Server, msgs[i].Channel, msgs[i].MessageID}
		if m.seen[k] {
			continue
		}
		m.seen[k] = true
		m.lastMsg++
		msgs[i].Seq = m.lastMsg
		m.inbox = append(m.inbox, msgs[i])
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

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
