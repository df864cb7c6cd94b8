package inbox

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// The owner is a goroutine: none may outlive its Close, nor a test's
// stores' writers theirs.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backends are the stores every behaviour is checked on: the memory store
// and a real SQLite file.
var backends = []struct {
	name string
	open func(t testing.TB) store.Store
}{
	{"memory", func(t testing.TB) store.Store {
		m := store.NewMemory()
		t.Cleanup(func() { m.Close() })
		return m
	}},
	{"sqlite", func(t testing.TB) store.Store {
		d, err := sqlite.Open(filepath.Join(t.TempDir(), "host.db"), nil)
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}},
}

// eachBackend runs fn on every backend, as subtests.
func eachBackend(t *testing.T, fn func(t *testing.T, s store.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.open(t)) })
	}
}

// gate is a store whose AddMessages hands each call to the test and waits
// for its answer: it is how a test slows the store, counts its calls and
// fails one. Once the test has ended (its Context is done, before its
// Cleanups run) every call fails at once, so that a test that stopped
// early does not leave its Inbox's Close waiting.
type gate struct {
	store.Store
	ended context.Context
	calls chan []store.Message // each call's messages, as it begins
	next  chan error           // nil: go on to the store; else fail with it
}

func newGate(t *testing.T, s store.Store) *gate {
	return &gate{Store: s, ended: t.Context(), calls: make(chan []store.Message), next: make(chan error)}
}

func (g *gate) AddMessages(ctx context.Context, msgs []store.Message) ([]bool, error) {
	select {
	case g.calls <- msgs:
	case <-g.ended.Done():
		return nil, g.ended.Err()
	}
	select {
	case err := <-g.next:
		if err != nil {
			return nil, err
		}
	case <-g.ended.Done():
		return nil, g.ended.Err()
	}
	return g.Store.AddMessages(ctx, msgs)
}

// take waits for the next call and returns its message ids, leaving it
// waiting for pass or fail.
func (g *gate) take(t *testing.T) []string {
	t.Helper()
	return ids(<-g.calls)
}

func (g *gate) pass()          { g.next <- nil }
func (g *gate) fail(err error) { g.next <- err }

// serve passes every call until stop is called, recording each call's
// message ids.
func (g *gate) serve() (stop func() [][]string) {
	quit, done := make(chan struct{}), make(chan struct{})
	var calls [][]string
	go func() {
		defer close(done)
		for {
			select {
			case msgs := <-g.calls:
				calls = append(calls, ids(msgs))
				g.next <- nil
			case <-quit:
				return
			case <-g.ended.Done():
				return
			}
		}
	}()
	return func() [][]string {
		close(quit)
		<-done
		return calls
	}
}

func ids(msgs []store.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.MessageID
	}
	return out
}

// msg is a channel message with id id, on server "srv" and channel
// "room".
func msg(id string) store.Message {
	return store.Message{Server: "srv", Channel: "room", MessageID: id,
		Body: json.RawMessage(`{"channelId":"room","messageId":"` + id + `"}`), At: time.Unix(1_780_000_000, 0).UTC()}
}

func msgs(ids ...string) []store.Message {
	out := make([]store.Message, len(ids))
	for i, id := range ids {
		out[i] = msg(id)
	}
	return out
}

// open starts an Inbox on s, closing it when the test ends (before s,
// whose Cleanup was registered first).
func open(t testing.TB, opts Options) *Inbox {
	t.Helper()
	in, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(in.Close)
	return in
}

// commits records OnCommit's calls.
type commits struct {
	mu      sync.Mutex
	through []int64
}

func (c *commits) on(through int64) {
	c.mu.Lock()
	c.through = append(c.through, through)
	c.mu.Unlock()
}

func (c *commits) all() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.through...)
}

// result waits for an Accept's outcome.
func result(t *testing.T, ch <-chan Result) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no Result in 10 s")
		return Result{}
	}
}

// inboxIDs reads the store's whole inbox: its message ids and Seqs, in
// Seq order.
func inboxIDs(t *testing.T, s store.Store) (ids []string, seqs []int64) {
	t.Helper()
	err := s.Messages(context.Background(), 0, func(m store.Message) error {
		ids = append(ids, m.MessageID)
		seqs = append(seqs, m.Seq)
		return nil
	})
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	return ids, seqs
}

func seqIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}
