package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io"
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
//   - BenchmarkReplay/compacted against BenchmarkReplay/live-scan:
//     replaying that log compacted to the newest decision of each of its
//     10,000 channels; the baseline (the floor) is the same SELECT of the
//     live rows of the same file, scanned into variables.
//     BenchmarkReplay/whole is the uncompacted log's Replay, for
//     reference: records/op and ns/record read the ratios.
//   - BenchmarkCompact: compacting the 1,000,000-record log to the newest
//     decision of each channel (a fresh copy of the file each time).
//   - BenchmarkAddMessages: messages a second into the inbox from 16
//     callers, 1 and 10 messages a call.

// benchRecord is a decision record of a typical size.
func benchRecord(i int) store.Record {
	return store.Record{
		Kind:    store.KindDecision,
		Server:  "github.com/example/chat-server",
		Channel: fmt.Sprintf("room-%d", i%replayChannels),
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
// TestMain removes: decisions of 10,000 channels in turn, appended 1,000
// records a call, and a copy of it compacted to the newest decision of
// each channel (the last 10,000 records).
const (
	replayRecords  = 1_000_000
	replayChannels = 10_000
	replayCall     = 1_000
)

var (
	replayOnce sync.Once
	replayDir  string
	replayErr  error
	// replayPath is the whole log, compactedPath the compacted copy;
	// replayKeep is the newest decision of each channel, the Seqs the
	// compaction kept.
	replayPath, compactedPath string
	replayKeep                []int64
)

// replayFiles returns the whole log's file and the compacted one's,
// building them the first time.
func replayFiles(b *testing.B) (whole, compacted string) {
	replayOnce.Do(func() { replayErr = buildReplayFiles(b) })
	if replayErr != nil {
		b.Fatal(replayErr)
	}
	return replayPath, compactedPath
}

func buildReplayFiles(b *testing.B) error {
	start := time.Now()
	var err error
	if replayDir, err = os.MkdirTemp("", "mcpl-store-bench-"); err != nil {
		return err
	}
	replayPath = filepath.Join(replayDir, "replay.db")
	compactedPath = filepath.Join(replayDir, "compacted.db")
	d, err := Open(replayPath, nil)
	if err != nil {
		return err
	}
	ctx := context.Background()
	recs := make([]store.Record, replayCall)
	newest := map[string]int64{}
	for i := 0; i < replayRecords; i += replayCall {
		for j := range recs {
			recs[j] = benchRecord(i + j)
			if (i+j)%2 == 1 {
				recs[j].State = store.Closed
			}
		}
		out, err := d.Append(ctx, recs...)
		if err != nil {
			d.Close()
			return err
		}
		for _, r := range out {
			newest[r.Channel] = r.Seq
		}
	}
	if err := d.Close(); err != nil {
		return err
	}
	built := time.Since(start)
	for _, seq := range newest {
		replayKeep = append(replayKeep, seq)
	}
	if err := copyClosed(replayPath, compactedPath); err != nil {
		return err
	}
	if d, err = Open(compactedPath, nil); err != nil {
		return err
	}
	start = time.Now()
	n, err := d.Compact(ctx, replayRecords, replayKeep)
	if err == nil && n != replayRecords-replayChannels {
		err = fmt.Errorf("the compaction dropped %d records, want %d", n, replayRecords-replayChannels)
	}
	if err != nil {
		d.Close()
		return err
	}
	compacted := time.Since(start)
	if err := d.Close(); err != nil {
		return err
	}
	b.Logf("built %d records in %v; compacted a copy to %d in %v", replayRecords, built.Round(time.Millisecond), replayChannels, compacted.Round(time.Millisecond))
	return nil
}

// copyClosed copies the closed store at from to to: one file, as a
// closed store's -wal is checkpointed and gone.
func copyClosed(from, to string) error {
	if _, err := os.Stat(from + "-wal"); err == nil {
		return fmt.Errorf("%s has a -wal: it is not closed", from)
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func removeBenchFiles() {
	if replayDir != "" {
		os.RemoveAll(replayDir)
	}
}

// benchReplay replays the log at path, of records records, b.N times.
func benchReplay(b *testing.B, path string, records int) {
	d := openAt(b, path, nil)
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
		if n != records || sum == 0 {
			b.Fatalf("replayed %d records, want %d", n, records)
		}
	}
	reportRecords(b, records)
}

// benchScan is benchReplay's baseline: the same SELECT as Replay's on a
// connection of database/sql with the same DSN, scanned into variables.
func benchScan(b *testing.B, path string, records int) {
	d := openAt(b, path, nil) // for its DSN
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
		if n != records || sum == 0 {
			b.Fatalf("scanned %d records, want %d", n, records)
		}
	}
	reportRecords(b, records)
}

// reportRecords reports records read an op, and the time a record.
func reportRecords(b *testing.B, records int) {
	b.ReportMetric(float64(records), "records/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
}

func BenchmarkReplay1M(b *testing.B) {
	whole, _ := replayFiles(b)
	benchReplay(b, whole, replayRecords)
}

func BenchmarkBareScan1M(b *testing.B) {
	whole, _ := replayFiles(b)
	benchScan(b, whole, replayRecords)
}

// BenchmarkReplay measures what compaction is for: the compacted log's
// Replay (of the newest decision of each channel) against the floor of a
// bare scan of the same rows, and the whole log's Replay, all on the same
// fixture.
func BenchmarkReplay(b *testing.B) {
	whole, compacted := replayFiles(b)
	b.Run("compacted", func(b *testing.B) { benchReplay(b, compacted, replayChannels) })
	b.Run("live-scan", func(b *testing.B) { benchScan(b, compacted, replayChannels) })
	b.Run("whole", func(b *testing.B) { benchReplay(b, whole, replayRecords) })
}

// BenchmarkCompact compacts the 1,000,000-record log to the newest
// decision of each channel; each op compacts a fresh copy of the file,
// made, opened and closed outside the timer.
func BenchmarkCompact(b *testing.B) {
	whole, _ := replayFiles(b)
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "compact.db")
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		if err := copyClosed(whole, path); err != nil {
			b.Fatal(err)
		}
		d, err := Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		n, err := d.Compact(ctx, replayRecords, replayKeep)
		b.StopTimer()
		if err != nil || n != replayRecords-replayChannels {
			b.Fatalf("Compact = %d, %v; want %d dropped", n, err, replayRecords-replayChannels)
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(replayRecords-replayChannels, "dropped/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(replayRecords-replayChannels)), "ns/dropped")
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
