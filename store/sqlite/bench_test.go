package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/store"
)

// Each benchmark of the store has its baseline here, measured in the same
// run (docs/performance.md, "Store"):
//
//   - BenchmarkAppendDecision against BenchmarkBareInsertSynced: one
//     decision record a call, from 1 caller and from 16; the baseline is
//     the same INSERT by database/sql on a connection with the same pragmas
//     (WAL, synchronous=FULL), one autocommit transaction (one sync) each.
//   - BenchmarkReplay1M against BenchmarkBareScan1M: replaying a log of
//     1,000,000 records; the baseline is the same SELECT scanned into
//     variables.
//   - BenchmarkAddMessages: messages a second into the inbox from 16
//     callers, 1 and 10 messages a call.

// benchRecord is a decision record of a typical size.
func benchRecord(i int) store.Record {
	return store.Record{
		Kind:    store.KindDecision,
		Server:  "github.com/example/chat-server",
		Channel: fmt.Sprintf("room-%d", i%1000),
		State:   store.Open,
		Source:  "agent",
		At:      time.Unix(1_780_000_000, int64(i)*1000),
	}
}

const benchCallers = 16

// parallel runs b.RunParallel with callers goroutines (GOMAXPROCS rounds
// it up to a multiple of itself).
func parallel(b *testing.B, callers int, body func(pb *testing.PB)) {
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(body)
}

func BenchmarkAppendDecision(b *testing.B) {
	for _, callers := range []int{1, benchCallers} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			d := openTemp(b)
			ctx := context.Background()
			rec := benchRecord(1)
			b.ReportAllocs()
			if callers == 1 {
				for b.Loop() {
					if _, err := d.Append(ctx, rec); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			parallel(b, callers, func(pb *testing.PB) {
				for pb.Next() {
					if _, err := d.Append(ctx, rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkBareInsertSynced(b *testing.B) {
	for _, callers := range []int{1, benchCallers} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			d := openTemp(b) // the schema, and the DSN with its pragmas
			raw, err := sql.Open("sqlite", d.dsn(false))
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			raw.SetMaxOpenConns(1) // SQLite has one writer at a time anyway
			ins, err := raw.Prepare(`INSERT INTO log (kind, server, channel, state, source, message_id, acknowledgment, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
			if err != nil {
				b.Fatal(err)
			}
			defer ins.Close()
			r := benchRecord(1)
			insert := func() error {
				_, err := ins.Exec(string(r.Kind), r.Server, r.Channel, string(r.State), r.Source, r.MessageID, r.Acknowledgment, r.At.UnixNano())
				return err
			}
			b.ReportAllocs()
			if callers == 1 {
				for b.Loop() {
					if err := insert(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			parallel(b, callers, func(pb *testing.PB) {
				for pb.Next() {
					if err := insert(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// The 1,000,000-record log, built once for the run, in a directory that
// TestMain removes.
const replayRecords = 1_000_000

var (
	replayOnce sync.Once
	replayDir  string
	replayPath string
	replayErr  error
)

func replayFile(b *testing.B) string {
	replayOnce.Do(func() {
		start := time.Now()
		replayDir, replayErr = os.MkdirTemp("", "mcpl-store-bench-")
		if replayErr != nil {
			return
		}
		replayPath = filepath.Join(replayDir, "replay.db")
		d, err := Open(replayPath, nil)
		if err != nil {
			replayErr = err
			return
		}
		defer d.Close()
		const call = 10_000
		recs := make([]store.Record, call)
		for i := 0; i < replayRecords && replayErr == nil; i += call {
			for j := range recs {
				recs[j] = benchRecord(i + j)
				if (i+j)%2 == 1 {
					recs[j].State = store.Closed
				}
			}
			_, replayErr = d.Append(context.Background(), recs...)
		}
		b.Logf("built %d records in %v", replayRecords, time.Since(start).Round(time.Millisecond))
	})
	if replayErr != nil {
		b.Fatal(replayErr)
	}
	return replayPath
}

func removeBenchFiles() {
	if replayDir != "" {
		os.RemoveAll(replayDir)
	}
}

func BenchmarkReplay1M(b *testing.B) {
	d := openAt(b, replayFile(b), nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		n, sum := 0, int64(0)
		if err := d.Replay(ctx, func(r store.Record) error {
			n++
			sum += r.Seq + int64(len(r.Channel))
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if n != replayRecords || sum == 0 {
			b.Fatalf("replayed %d records, want %d", n, replayRecords)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*replayRecords), "ns/record")
}

func BenchmarkBareScan1M(b *testing.B) {
	d := openAt(b, replayFile(b), nil) // for its DSN
	raw, err := sql.Open("sqlite", d.dsn(true))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	q, err := raw.Prepare(`SELECT seq, kind, server, channel, state, source, message_id, acknowledgment, at FROM log ORDER BY seq`)
	if err != nil {
		b.Fatal(err)
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
			sum                                              int64
		)
		for rows.Next() {
			if err := rows.Scan(&seq, &kind, &server, &channel, &state, &source, &msgID, &ack, &at); err != nil {
				b.Fatal(err)
			}
			n++
			sum += seq + int64(len(channel))
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		rows.Close()
		if n != replayRecords || sum == 0 {
			b.Fatalf("scanned %d records, want %d", n, replayRecords)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*replayRecords), "ns/record")
}

func BenchmarkAddMessages(b *testing.B) {
	for _, batch := range []int{1, 10} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			d := openTemp(b)
			ctx := context.Background()
			var next atomic.Int64
			body := []byte(`{"role":"user","content":[{"type":"text","text":"a message of about a hundred bytes, as a chat line is"}]}`)
			b.ReportAllocs()
			parallel(b, benchCallers, func(pb *testing.PB) {
				msgs := make([]store.Message, batch)
				for pb.Next() {
					for i := range msgs {
						msgs[i] = store.Message{Server: "github.com/example/chat-server", Channel: "room-7",
							MessageID: fmt.Sprintf("msg-%d", next.Add(1)), Body: body, At: time.Now()}
					}
					added, err := d.AddMessages(ctx, msgs)
					if err != nil {
						b.Error(err)
						return
					}
					if !added[0] {
						b.Error("a new message was not added")
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
