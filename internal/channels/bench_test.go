package channels

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// Each benchmark here has its baseline beside it, measured in the same run
// (docs/performance.md, "Channels"):
//
//   - BenchmarkDecision against BenchmarkBareDecisionInsert: a durable
//     decision through the registry (the same-state rule, the append, the
//     apply) on a SQLite file, against one synced INSERT of the same
//     record by database/sql on the same pragmas.
//   - BenchmarkIncoming and BenchmarkIncomingOverWire against
//     BenchmarkBareAddMessages: one channels/incoming message a call from
//     16 callers, through the registry (parse, validate, the durable
//     inbox), and through a JSON-RPC peer pair on an in-memory pipe, the
//     16 callers on one server's connection as a busy server sends them,
//     against the store's AddMessages of the same messages.
//   - BenchmarkReplay1M against BenchmarkBareScan1M: a registry replaying
//     a log of 1,000,000 decisions into its state at start, against the
//     same SELECT scanned into variables; BenchmarkReplayCompacted1M
//     against BenchmarkBareScanLive: the same once compacted to its
//     10,000 live decisions.
//   - BenchmarkQueue10k against BenchmarkDirectCalls10k: carrying out the
//     decision of each of 10,000 channels through their lifecycle queues,
//     against the same 10,000 requests sent from 10,000 goroutines with no
//     queue, on a connection that answers at once.

// instant is a connection that answers every request at once.
type instant struct{ calls atomic.Int64 }

func (c *instant) Has(string) bool { return true }

func (c *instant) Notify(context.Context, string, any) error { return nil }

func (c *instant) Call(ctx context.Context, method string, params, result any, _ time.Duration) error {
	c.calls.Add(1)
	if r, ok := result.(*json.RawMessage); ok {
		*r = json.RawMessage(`{"closed":true}`)
	}
	return nil
}

func benchStore(b *testing.B) (*sqlite.DB, string) {
	path := filepath.Join(b.TempDir(), "host.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, path
}

func benchRegistry(b *testing.B, st store.Store) *Registry {
	reg, err := New(Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(reg.Close)
	reg.AddServer("s", &instant{}, ServerConfig{})
	return reg
}

func BenchmarkDecision(b *testing.B) {
	st, _ := benchStore(b)
	reg := benchRegistry(b, st)
	k := Key{"s", "room-1"}
	states := [2]store.State{store.Open, store.Closed}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ok, err := ask(context.Background(), reg, func(m *machine, reply func(bool)) {
			c := m.chanOf(k)
			m.whenSettled(c, func() { m.decide(c, states[i%2], SourceAgentTool, reply) })
		})
		if err != nil || !ok {
			b.Fatal("the decision was not recorded", err)
		}
		i++
	}
}

func BenchmarkBareDecisionInsert(b *testing.B) {
	st, path := benchStore(b)
	st.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	stmt, err := db.Prepare(`INSERT INTO log (kind, server, channel, state, source, message_id, acknowledgment, at) VALUES (?, ?, ?, ?, ?, '', '', ?)`)
	if err != nil {
		b.Skipf("the log table's shape changed: %v", err)
	}
	defer stmt.Close()
	states := [2]string{"open", "closed"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := stmt.Exec("decision", "s", "room-1", states[i%2], SourceAgentTool, time.Now().UnixNano()); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

const benchCallers = 16

func parallel(b *testing.B, body func(pb *testing.PB)) {
	b.SetParallelism(max(1, benchCallers/runtime.GOMAXPROCS(0)))
	b.RunParallel(body)
}

func BenchmarkIncoming(b *testing.B) {
	st, _ := benchStore(b)
	reg := benchRegistry(b, st)
	reg.Register("s", []protocol.ChannelDescriptor{{ID: "general"}})
	var n atomic.Int64
	b.ReportAllocs()
	start := time.Now()
	parallel(b, func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			msg := json.RawMessage(fmt.Sprintf(`{"channelId":"general","messageId":"m%d","author":{"id":"u1","name":"Ada"},"content":[{"type":"text","text":"What's the status of the build?"}]}`, i))
			res, err := reg.Incoming(context.Background(), "s", []json.RawMessage{msg})
			if err != nil || !res.Results[0].Accepted {
				b.Fatal(err, res)
			}
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "msgs/s")
}

func BenchmarkIncomingOverWire(b *testing.B) {
	st, _ := benchStore(b)
	reg := benchRegistry(b, st)
	reg.Register("s", []protocol.ChannelDescriptor{{ID: "general"}})
	hostEnd, serverEnd := transport.Pipe(0)
	hostPeer := wire.NewPeer(hostEnd, wire.Options{Name: "s", Handler: wire.HandlerFunc(func(ctx context.Context, req *wire.Request) (any, error) {
		res, err, _ := reg.Serve(ctx, "s", req)
		return res, err
	})})
	serverPeer := wire.NewPeer(serverEnd, wire.Options{Name: "host"})
	b.Cleanup(func() {
		serverPeer.Close()
		hostPeer.Close()
		<-hostPeer.Done()
		<-serverPeer.Done()
	})
	var n atomic.Int64
	b.ReportAllocs()
	start := time.Now()
	parallel(b, func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			msg := json.RawMessage(fmt.Sprintf(`{"channelId":"general","messageId":"m%d","author":{"id":"u1","name":"Ada"},"content":[{"type":"text","text":"What's the status of the build?"}]}`, i))
			var res protocol.ChannelsIncomingResult
			err := serverPeer.Call(context.Background(), protocol.MethodChannelsIncoming, map[string]any{"messages": []json.RawMessage{msg}}, &res)
			if err != nil || !res.Results[0].Accepted {
				b.Fatal(err, res)
			}
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "msgs/s")
}

func BenchmarkBareAddMessages(b *testing.B) {
	st, _ := benchStore(b)
	var n atomic.Int64
	b.ReportAllocs()
	start := time.Now()
	parallel(b, func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			body := json.RawMessage(fmt.Sprintf(`{"channelId":"general","messageId":"m%d","author":{"id":"u1","name":"Ada"},"content":[{"type":"text","text":"What's the status of the build?"}]}`, i))
			msgs := []store.Message{{Server: "s", Channel: "general", MessageID: fmt.Sprintf("m%d", i), Body: body, At: time.Now()}}
			if _, err := st.AddMessages(context.Background(), msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "msgs/s")
}

const queueChannels = 10000

func BenchmarkQueue10k(b *testing.B) {
	reg := benchRegistry(b, store.NewMemory())
	descs := make([]protocol.ChannelDescriptor, queueChannels)
	for i := range descs {
		descs[i] = protocol.ChannelDescriptor{ID: fmt.Sprintf("room-%d", i)}
	}
	// Registered while the host does not direct the lifecycle: nothing is
	// queued yet.
	reg.AddServer("s", &noLifecycle{}, ServerConfig{})
	reg.Register("s", descs)
	reg.AddServer("s", &instant{}, ServerConfig{})
	b.ReportAllocs()
	for b.Loop() {
		// A forced op each: the request goes out even when the channel is
		// confirmed, so every round sends 10,000.
		waits := make(chan opResult, len(descs))
		reg.step(func(m *machine) {
			for _, d := range descs {
				c := m.live["s"][d.ID]
				m.enqueue(c, &op{gen: c.gen, forced: true, waiters: []func(opResult){func(res opResult) { waits <- res }}})
			}
		})
		for range descs {
			if res := <-waits; res.err != nil {
				b.Fatal(res.err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*queueChannels), "ns/channel")
}

func BenchmarkDirectCalls10k(b *testing.B) {
	conn := &instant{}
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for i := range queueChannels {
			wg.Go(func() {
				var answer json.RawMessage
				conn.Call(context.Background(), protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: fmt.Sprint(i)}, &answer, time.Minute)
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*queueChannels), "ns/channel")
}

// noLifecycle is a connection without channels.lifecycle.
type noLifecycle struct{ instant }

func (*noLifecycle) Has(capability string) bool { return capability != "channels.lifecycle" }

// The replay benchmarks share one file of replayRecords decisions across
// 10,000 channels, built once a run.
const replayRecords = 1_000_000

var replayFile = struct {
	once sync.Once
	path string
	err  error
}{}

func replayPath(b *testing.B) string {
	replayFile.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcpl-replay-")
		if err != nil {
			replayFile.err = err
			return
		}
		replayFile.path = filepath.Join(dir, "host.db")
		st, err := sqlite.Open(replayFile.path, nil)
		if err != nil {
			replayFile.err = err
			return
		}
		defer st.Close()
		states := [2]store.State{store.Open, store.Closed}
		at := time.Unix(1_780_000_000, 0)
		for i := 0; i < replayRecords; i += 10000 {
			recs := make([]store.Record, 10000)
			for j := range recs {
				k := i + j
				recs[j] = store.Record{Kind: store.KindDecision, Server: "s", Channel: fmt.Sprintf("room-%d", k%10000), State: states[k%2], Source: SourceAgentTool, At: at}
			}
			if _, err := st.Append(context.Background(), recs...); err != nil {
				replayFile.err = err
				return
			}
		}
	})
	if replayFile.err != nil {
		b.Fatal(replayFile.err)
	}
	return replayFile.path
}

// BenchmarkReplay1M is a registry's start on the whole log of 1,000,000
// decisions, as a host that last ran before compaction existed starts: a
// fresh copy of the file each round (the registry compacts what it
// replays, once it has started; that is not timed).
func BenchmarkReplay1M(b *testing.B) {
	b.StopTimer()
	src := replayPath(b)
	b.ReportAllocs()
	for range b.N {
		path := copyFile(b, src, true)
		st, err := sqlite.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		reg, err := New(Options{Store: st})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(reg.Decisions()); n != 10000 {
			b.Fatalf("%d decisions, want 10000", n)
		}
		b.StopTimer()
		reg.Close()
		st.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*replayRecords), "ns/record")
}

// BenchmarkReplayCompacted1M is a registry's start on the same log once
// compacted: its 10,000 live decisions.
func BenchmarkReplayCompacted1M(b *testing.B) {
	st, err := sqlite.Open(compactedPath(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.ReportAllocs()
	for b.Loop() {
		reg, err := New(Options{Store: st})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(reg.Decisions()); n != 10000 {
			b.Fatalf("%d decisions, want 10000", n)
		}
		reg.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10000), "ns/record")
}

// BenchmarkBareScanLive is the same SELECT as BenchmarkBareScan1M over
// the compacted log: the floor for BenchmarkReplayCompacted1M.
func BenchmarkBareScanLive(b *testing.B) { bareScan(b, compactedPath(b), 10000) }

// compactedPath is a copy of the replay file, compacted by a registry
// that replays it.
var compactedFile = struct {
	once sync.Once
	path string
}{}

func compactedPath(b *testing.B) string {
	compactedFile.once.Do(func() {
		// Kept for the run: TestMain's cleanup removes the folder.
		compactedFile.path = copyFile(b, replayPath(b), false)
		st, err := sqlite.Open(compactedFile.path, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		reg, err := New(Options{Store: st})
		if err != nil {
			b.Fatal(err)
		}
		reg.Close() // after the compaction its start began
		n := 0
		st.Replay(context.Background(), func(store.Record) error { n++; return nil })
		if n != 10000 {
			b.Fatalf("the compacted log has %d records, want 10000", n)
		}
	})
	return compactedFile.path
}

// copyFile copies the closed SQLite file at src into the replay file's
// folder, and returns the copy's path; a temporary one goes when b ends.
func copyFile(b *testing.B, src string, temporary bool) string {
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(src), "copy-*.db")
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if temporary {
		b.Cleanup(func() { os.Remove(out.Name()) })
	}
	return out.Name()
}

func BenchmarkBareScan1M(b *testing.B) { bareScan(b, replayPath(b), replayRecords) }

// bareScan scans the log of the file at path, want records, with
// database/sql alone.
func bareScan(b *testing.B, path string, want int) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q, err := db.Prepare(`SELECT seq, kind, server, channel, state, source, message_id, acknowledgment, at FROM log ORDER BY seq`)
	if err != nil {
		b.Skipf("the log table's shape changed: %v", err)
	}
	defer q.Close()
	b.ReportAllocs()
	for b.Loop() {
		rows, err := q.Query()
		if err != nil {
			b.Fatal(err)
		}
		var (
			seq                                              int64
			kind, server, channel, state, source, msgID, ack string
			at                                               sql.NullInt64
			n                                                int
		)
		for rows.Next() {
			if err := rows.Scan(&seq, &kind, &server, &channel, &state, &source, &msgID, &ack, &at); err != nil {
				b.Fatal(err)
			}
			n++
		}
		rows.Close()
		if n != want {
			b.Fatalf("scanned %d records, want %d", n, want)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*want), "ns/record")
}

// TestMain's cleanup removes the replay file (bench_test.go builds it).
func removeReplayFile() {
	if replayFile.path != "" {
		os.RemoveAll(filepath.Dir(replayFile.path))
	}
}
