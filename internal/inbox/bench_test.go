package inbox

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// BenchmarkInbound measures inbound messages a second into a real SQLite
// file, with its baselines in the same run. One op is one message; msgs/s
// is messages made durable a second, all sub-benchmarks alike.
//
//   - owner: 16 producers (connections), each Accept-ing one message a
//     call and keeping up to 16 Accepts in flight (pipelined requests),
//     through an Inbox with its default bounds. msgs/commit is the mean
//     number of messages in each of its AddMessages calls.
//   - bare-1: what the host does without the Inbox: the same 16 producers,
//     the same 16 in flight each, every message its own AddMessages call on
//     a goroutine of its own (internal/channels' per-request goroutine),
//     so the store's own group commit (up to 256 calls a transaction)
//     gathers them.
//   - bare-batched: the floor: the same 16 producers each calling
//     AddMessages with 256 messages at a time, one call in flight each.
//   - owner-deep: owner with 256 Accepts in flight a producer, the depth
//     bare-batched has, to tell the Inbox's cost from the depth's (its
//     commits still hold at most MaxBatch, 1024 messages).
//
// The ratios to read are owner/bare-1 (what the Inbox gains or costs
// against today, at the same depth) and owner-deep/bare-batched (how near
// the store's best the Inbox gets, at the same depth). owner/bare-batched
// mixes the two: the owner makes one AddMessages call at a time, so while
// one commit is in flight the next gathers what the producers can add, at
// most the 256 messages they keep in flight less those of the commit in
// flight (msgs/commit shows it, about half of 256), where bare-batched
// has 16 calls of 256 in flight, which the store's group commit joins into
// transactions of thousands, a sync each.
func BenchmarkInbound(b *testing.B) {
	b.Run("owner", func(b *testing.B) { benchOwner(b, benchInFlight) })
	b.Run("bare-1", func(b *testing.B) {
		s := benchStore(b)
		ctx := context.Background()
		runInbound(b, func(p *producer) {
			sem := make(chan struct{}, benchInFlight)
			var wg sync.WaitGroup
			for p.next() {
				sem <- struct{}{}
				m := []store.Message{p.msg()}
				wg.Go(func() {
					defer func() { <-sem }()
					if added, err := s.AddMessages(ctx, m); err != nil || !added[0] {
						b.Errorf("AddMessages: %v, %v", added, err)
					}
				})
			}
			wg.Wait()
		})
	})
	b.Run("bare-batched", func(b *testing.B) {
		s := benchStore(b)
		ctx := context.Background()
		runInbound(b, func(p *producer) {
			batch := make([]store.Message, 0, benchBatch)
			flush := func() {
				if added, err := s.AddMessages(ctx, batch); err != nil || !added[0] {
					b.Errorf("AddMessages: %v", err)
				}
				batch = batch[:0]
			}
			for p.next() {
				if batch = append(batch, p.msg()); len(batch) == benchBatch {
					flush()
				}
			}
			if len(batch) > 0 {
				flush()
			}
		})
	})
	b.Run("owner-deep", func(b *testing.B) { benchOwner(b, benchBatch) })
}

// benchOwner runs the producers through an Inbox, each keeping up to
// inFlight Accepts of one message in flight.
func benchOwner(b *testing.B, inFlight int) {
	s := benchStore(b)
	c := &counting{Store: s}
	in, err := New(Options{Store: c})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	runInbound(b, func(p *producer) {
		ring := make([]<-chan Result, inFlight)
		head, n := 0, 0
		wait := func() {
			r := <-ring[head]
			ring[head], head, n = nil, (head+1)%inFlight, n-1
			if r.Err != nil || !r.Added[0] {
				b.Errorf("Accept: %+v", r)
			}
		}
		for p.next() {
			if n == inFlight {
				wait()
			}
			ring[(head+n)%inFlight] = in.Accept([]store.Message{p.msg()})
			n++
		}
		for n > 0 {
			wait()
		}
	})
	if calls := c.calls.Load(); calls > 0 {
		b.ReportMetric(float64(c.msgs.Load())/float64(calls), "msgs/commit")
	}
}

const (
	benchProducers = 16
	benchInFlight  = 16
	benchBatch     = 256
)

var benchBody = json.RawMessage(`{"channelId":"room-7","messageId":"x","content":[{"type":"text","text":"a chat line of about a hundred bytes"}]}`)

func benchStore(b *testing.B) *sqlite.DB {
	d, err := sqlite.Open(filepath.Join(b.TempDir(), "host.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// producer is one connection's goroutine in a benchmark: it takes message
// numbers from a count shared by all, until b.N are taken.
type producer struct {
	id    int
	taken *atomic.Int64
	limit int64
	i     int64
}

func (p *producer) next() bool {
	p.i = p.taken.Add(1)
	return p.i <= p.limit
}

func (p *producer) msg() store.Message {
	return store.Message{Server: fmt.Sprintf("github.com/example/chat-server-%02d", p.id), Channel: "room-7",
		MessageID: fmt.Sprintf("msg-%d", p.i), Body: benchBody, At: time.Now().UTC()}
}

// runInbound times benchProducers goroutines running body until b.N
// messages are taken and done, and reports msgs/s.
func runInbound(b *testing.B, body func(p *producer)) {
	b.ReportAllocs()
	var taken atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for id := range benchProducers {
		wg.Go(func() { body(&producer{id: id, taken: &taken, limit: int64(b.N)}) })
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// counting counts a store's AddMessages calls and their messages.
type counting struct {
	store.Store
	calls, msgs atomic.Int64
}

func (c *counting) AddMessages(ctx context.Context, msgs []store.Message) ([]bool, error) {
	c.calls.Add(1)
	c.msgs.Add(int64(len(msgs)))
	return c.Store.AddMessages(ctx, msgs)
}
