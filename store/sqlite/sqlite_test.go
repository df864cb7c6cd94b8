package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeBenchFiles()
		os.Exit(code)
	}))
}

// openAt opens the store at path, closing it when the test ends.
func openAt(t testing.TB, path string, opts *Options) *DB {
	t.Helper()
	d, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func openTemp(t testing.TB) *DB {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "host.db"), nil)
}

func TestContract(t *testing.T) {
	storetest.Run(t,
		func(t *testing.T) store.Store { return openTemp(t) },
		storetest.Reopen(func(t *testing.T, s store.Store) store.Store {
			return openAt(t, s.(*DB).Path(), nil)
		}))
}

// rawDB opens path with database/sql alone, for what a test does behind
// the store's back.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t testing.TB, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func decision(source string) store.Record {
	return store.Record{Kind: store.KindDecision, Server: "s", Channel: "c", State: store.Open, Source: source, At: time.Now()}
}

func TestOpenCreatesDirectoryAndFilePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "mcpl")
	d := openAt(t, filepath.Join(dir, "host.db"), nil)
	if _, err := d.Append(t.Context(), decision("x")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		filepath.Dir(dir): 0o700 | os.ModeDir, // created too
		dir:               0o700 | os.ModeDir,
		d.Path():          0o600,
		d.Path() + "-wal": 0o600,
		d.Path() + "-shm": 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), want)
		}
	}
	if !filepath.IsAbs(d.Path()) {
		t.Errorf("Path() = %q, not absolute", d.Path())
	}
}

func TestOpenEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d := openAt(t, path, nil)
	if _, err := d.Append(t.Context(), decision("x")); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.db")
	d := openAt(t, path, nil)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	mustExec(t, raw, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1))

	_, err := Open(path, nil)
	if err == nil {
		t.Fatal("Open of a newer schema succeeded")
	}
	for _, want := range []string{path, fmt.Sprintf("version %d", SchemaVersion+1), fmt.Sprintf("(version %d)", SchemaVersion)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	var v int
	if err := raw.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion+1 {
		t.Fatalf("the refused file's version is now %d (%v), want it untouched at %d", v, err, SchemaVersion+1)
	}
}

func TestOpenRefusesNonDatabase(t *testing.T) {
	for name, content := range map[string]string{
		"text":      "this is a configuration file, not a database\n",
		"short":     "SQL",
		"corrupted": sqliteHeader + strings.Repeat("\xff", 4096),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "host.db")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, nil)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), "store "+path+": ") {
				t.Errorf("error %q does not name the file", err)
			}
			if !strings.Contains(err.Error(), "not a SQLite database") {
				t.Errorf("error %q does not say the file is not a SQLite database", err)
			}
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Errorf("Open changed the file it refused")
			}
		})
	}
}

func TestOpenRefusesDirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, nil); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open(a directory) = %v, want an error naming it", err)
	}
}

// At is kept to the nanosecond and read back in UTC; what int64
// nanoseconds cannot hold is refused.
func TestTimes(t *testing.T) {
	d := openTemp(t)
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", -7*3600))
	rec := decision("t")
	rec.At = at
	msg := store.Message{Server: "s", Channel: "c", MessageID: "1", At: at}
	if _, err := d.Append(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddMessages(t.Context(), []store.Message{msg}); err != nil {
		t.Fatal(err)
	}
	if err := d.Replay(t.Context(), func(r store.Record) error {
		if !r.At.Equal(at) || r.At.Location() != time.UTC {
			t.Errorf("replayed At %v, want %v in UTC", r.At, at)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.Messages(t.Context(), 0, func(m store.Message) error {
		if !m.At.Equal(at) || m.At.Location() != time.UTC {
			t.Errorf("message At %v, want %v in UTC", m.At, at)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	rec.At = time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := d.Append(t.Context(), decision("ok"), rec)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "store "+d.Path()+": append 2 records: record 2: ") {
		t.Errorf("Append(year 1500) = %v, want store.ErrInvalid, naming the file and the record", err)
	}
	msg.At = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := d.AddMessages(t.Context(), []store.Message{msg}); err == nil || !strings.Contains(err.Error(), "add 1 message: message 1: ") {
		t.Errorf("AddMessages(year 2300) = %v, want an error naming the message", err)
	}
}

// failTrigger makes the schema refuse a record whose source is "fail".
func failTrigger(t *testing.T, d *DB) {
	mustExec(t, rawDB(t, d.Path()), `CREATE TRIGGER test_fail BEFORE INSERT ON log WHEN NEW.source = 'fail'
		BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`)
}

func TestAppendErrorSaysWhat(t *testing.T) {
	d := openTemp(t)
	failTrigger(t, d)
	_, err := d.Append(t.Context(), decision("ok"), decision("fail"))
	want := "store " + d.Path() + ": append 2 records: record 2: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "refused by the test trigger") {
		t.Fatalf("Append = %v, want an error starting %q and giving SQLite's", err, want)
	}
	if n := count(t, d); n != 0 {
		t.Fatalf("the log holds %d records after a failed call", n)
	}
}

func count(t *testing.T, d *DB) int {
	t.Helper()
	n := 0
	if err := d.Replay(t.Context(), func(store.Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func sources(t *testing.T, d *DB) []string {
	t.Helper()
	var got []string
	if err := d.Replay(t.Context(), func(r store.Record) error { got = append(got, r.Source); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// stall holds the file's write lock from another connection and starts an
// Append of "first", which the writer takes and then waits on the lock
// with. Calls made before release all queue behind it, to be taken as one
// batch once the lock goes. done receives first's outcome.
func stall(t *testing.T, d *DB) (release func(), done <-chan error) {
	t.Helper()
	conn, err := rawDB(t, d.Path()).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, "BEGIN IMMEDIATE")
	before := d.batches.Load()
	ch := make(chan error, 1)
	go func() {
		_, err := d.Append(context.Background(), decision("first"))
		ch <- err
	}()
	waitFor(t, "the writer to take the first call", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.batches.Load() == before+1 && len(d.queue) == 0
	})
	var once sync.Once
	release = func() {
		once.Do(func() {
			mustExec(t, conn, "COMMIT")
			conn.Close()
		})
	}
	t.Cleanup(release)
	return release, ch
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func queueLen(d *DB) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.queue)
}

// appendAsync appends recs from another goroutine, waiting until the call
// is queued.
func appendAsync(t *testing.T, d *DB, ctx context.Context, recs ...store.Record) <-chan error {
	t.Helper()
	n := queueLen(d)
	ch := make(chan error, 1)
	go func() {
		_, err := d.Append(ctx, recs...)
		ch <- err
	}()
	waitFor(t, "the call to be queued", func() bool { return queueLen(d) == n+1 })
	return ch
}

// A failing call in a group commit is rolled back alone; the others commit.
func TestGroupCommitIsolatesAFailingCall(t *testing.T) {
	d := openTemp(t)
	failTrigger(t, d)
	release, first := stall(t, d)
	ctx := t.Context()
	a := appendAsync(t, d, ctx, decision("a1"), decision("a2"))
	bad := appendAsync(t, d, ctx, decision("b1"), decision("fail"), decision("b3"))
	c := appendAsync(t, d, ctx, decision("c1"))
	before := d.batches.Load()
	release()
	for name, ch := range map[string]<-chan error{"first": first, "a": a, "c": c} {
		if err := <-ch; err != nil {
			t.Errorf("call %s: %v", name, err)
		}
	}
	if err := <-bad; err == nil || !strings.Contains(err.Error(), "append 3 records: record 2: ") {
		t.Errorf("the failing call: %v, want its record 2 refused", err)
	}
	if got := d.batches.Load() - before; got != 1 {
		t.Errorf("the three queued calls took %d transactions, want 1", got)
	}
	if got, want := sources(t, d), []string{"first", "a1", "a2", "c1"}; !equal(got, want) {
		t.Fatalf("log holds %v, want %v", got, want)
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// A COMMIT that fails fails every call of its batch and leaves none, and
// the store goes on.
func TestFailedCommitFailsTheBatch(t *testing.T) {
	d := openTemp(t)
	// A deferred foreign key is checked at COMMIT: the trigger makes a
	// record with source "commit-fail" break one.
	raw := rawDB(t, d.Path())
	mustExec(t, raw, `CREATE TABLE test_parent (id INTEGER PRIMARY KEY)`)
	mustExec(t, raw, `CREATE TABLE test_child (pid INTEGER REFERENCES test_parent (id) DEFERRABLE INITIALLY DEFERRED)`)
	mustExec(t, raw, `CREATE TRIGGER test_commit_fail AFTER INSERT ON log WHEN NEW.source = 'commit-fail'
		BEGIN INSERT INTO test_child VALUES (42); END`)

	// Alone in its batch.
	_, err := d.Append(t.Context(), decision("commit-fail"))
	if err == nil || !strings.Contains(err.Error(), "append 1 record: commit: ") {
		t.Fatalf("Append = %v, want its commit failed", err)
	}

	// In a group.
	release, first := stall(t, d)
	ctx := t.Context()
	a := appendAsync(t, d, ctx, decision("a"))
	b := appendAsync(t, d, ctx, decision("commit-fail"))
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan error{a, b} {
		if err := <-ch; err == nil || !strings.Contains(err.Error(), "commit (a group commit of 2 calls): ") {
			t.Errorf("call in the failed batch: %v, want its commit failed", err)
		}
	}
	if _, err := d.Append(t.Context(), decision("after")); err != nil {
		t.Fatalf("Append after a failed commit: %v", err)
	}
	if got, want := sources(t, d), []string{"first", "after"}; !equal(got, want) {
		t.Fatalf("log holds %v, want %v", got, want)
	}
}

// A call whose ctx ends while it waits in the queue is not written.
func TestContextEndsWhileQueued(t *testing.T) {
	d := openTemp(t)
	release, first := stall(t, d)
	ctx, cancel := context.WithCancel(t.Context())
	gone := appendAsync(t, d, ctx, decision("gone"))
	kept := appendAsync(t, d, t.Context(), decision("kept"))
	cancel()
	select {
	case err := <-gone:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled queued call: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a queued call did not return when its context ended")
	}
	release()
	if err := errors.Join(<-first, <-kept); err != nil {
		t.Fatal(err)
	}
	if got, want := sources(t, d), []string{"first", "kept"}; !equal(got, want) {
		t.Fatalf("log holds %v, want %v", got, want)
	}
}

// Close lets the queued calls commit; calls after it fail.
func TestCloseCommitsQueuedCalls(t *testing.T) {
	d := openTemp(t)
	release, first := stall(t, d)
	a := appendAsync(t, d, t.Context(), decision("a"))
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	waitFor(t, "Close to start", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.closed
	})
	if _, err := d.Append(t.Context(), decision("late")); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append during Close: %v, want store.ErrClosed", err)
	}
	release()
	if err := errors.Join(<-first, <-a, <-closed); err != nil {
		t.Fatal(err)
	}
	r := openAt(t, d.Path(), nil)
	if got, want := sources(t, r), []string{"first", "a"}; !equal(got, want) {
		t.Fatalf("log holds %v, want %v", got, want)
	}
}

// A batch holds at most MaxBatchCalls calls and about MaxBatchBytes.
func TestBatchBounds(t *testing.T) {
	d := openAt(t, filepath.Join(t.TempDir(), "host.db"), &Options{MaxBatchCalls: 2, MaxBatchBytes: 1000})
	release, first := stall(t, d)
	var chans []<-chan error
	for i := range 5 {
		chans = append(chans, appendAsync(t, d, t.Context(), decision(fmt.Sprint(i))))
	}
	big := decision(strings.Repeat("x", 2000)) // alone: above MaxBatchBytes
	chans = append(chans, appendAsync(t, d, t.Context(), big), appendAsync(t, d, t.Context(), decision("6")))
	before := d.batches.Load()
	release()
	chans = append(chans, first)
	for _, ch := range chans {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	// [0 1] [2 3] [4] [big] [6]: 4 is alone because big does not fit
	// with it, 6 because big is too big to share.
	if got := d.batches.Load() - before; got != 5 {
		t.Fatalf("7 queued calls took %d transactions, want 5", got)
	}
	if n := count(t, d); n != 8 {
		t.Fatalf("log holds %d records, want 8", n)
	}
}

// Replay reads a snapshot while the writer goes on.
func TestReadsDuringWrites(t *testing.T) {
	d := openTemp(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 2 {
		wg.Go(func() {
			for i := range 50 {
				if _, err := d.Append(ctx, decision(fmt.Sprint(g, i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			last := int64(0)
			if err := d.Replay(ctx, func(r store.Record) error {
				if r.Seq <= last {
					return fmt.Errorf("Seq %d after %d", r.Seq, last)
				}
				last = r.Seq
				return nil
			}); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := count(t, d); n != 100 {
		t.Fatalf("log holds %d records, want 100", n)
	}
}

// After a COMMIT fails in a way that leaves the file in doubt, the store
// refuses every write, the queued ones too, saying why; reads go on.
func TestBrokenStoreRefusesWrites(t *testing.T) {
	d := openTemp(t)
	release, first := stall(t, d)
	queuedCall := appendAsync(t, d, t.Context(), decision("queued"))
	cause := errors.New("disk I/O error (the test's)")
	d.mu.Lock()
	d.broken = cause // what commitBatch sets when cleanFailure says no
	d.mu.Unlock()
	release()
	if err := <-first; err != nil {
		t.Fatal(err) // taken before: it commits
	}
	for name, err := range map[string]error{
		"queued": <-queuedCall,
		"later":  func() error { _, err := d.Append(t.Context(), decision("later")); return err }(),
		"inbox":  func() error { _, err := d.AddMessages(t.Context(), []store.Message{{MessageID: "1"}}); return err }(),
	} {
		if !errors.Is(err, cause) || !strings.Contains(err.Error(), "reopen the store") {
			t.Errorf("%s call on a broken store: %v, want it refused for %v", name, err, cause)
		}
	}
	if got, want := sources(t, d), []string{"first"}; !equal(got, want) {
		t.Fatalf("log holds %v, want %v", got, want)
	}
}

// A Record that the schema refuses in the writer leaves none of its
// entries and none of its cursors, alone in its transaction or in a group
// commit, where the other calls commit.
func TestRecordFailsWhole(t *testing.T) {
	d := openTemp(t)
	mustExec(t, rawDB(t, d.Path()), `CREATE TRIGGER test_fail BEFORE INSERT ON history WHEN CAST(NEW.body AS TEXT) = 'fail'
		BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`)
	ctx := t.Context()
	bad := []store.Entry{{Conversation: "a", Body: []byte("ok")}, {Conversation: "b", Body: []byte("fail")}}
	_, err := d.Record(ctx, bad, map[string]int64{"a": 1})
	want := "store " + d.Path() + ": record 2 entries and 1 cursor: entry 2: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "refused by the test trigger") {
		t.Fatalf("Record = %v, want an error starting %q and giving SQLite's", err, want)
	}

	release, first := stall(t, d)
	record := func(entries []store.Entry, cursors map[string]int64) <-chan error {
		n := queueLen(d)
		ch := make(chan error, 1)
		go func() {
			_, err := d.Record(ctx, entries, cursors)
			ch <- err
		}()
		waitFor(t, "the call to be queued", func() bool { return queueLen(d) == n+1 })
		return ch
	}
	a := record([]store.Entry{{Conversation: "a", Body: []byte("a1")}}, map[string]int64{"a": 2})
	b := record(bad, map[string]int64{"a": 3, "b": 3})
	c := appendAsync(t, d, ctx, decision("c"))
	before := d.batches.Load()
	release()
	if err := errors.Join(<-first, <-a, <-c); err != nil {
		t.Fatal(err)
	}
	if err := <-b; err == nil || !strings.Contains(err.Error(), "record 2 entries and 2 cursors: entry 2: ") {
		t.Errorf("the failing Record: %v, want its entry 2 refused", err)
	}
	if got := d.batches.Load() - before; got != 1 {
		t.Errorf("the three queued calls took %d transactions, want 1", got)
	}
	var bodies []string
	for _, conv := range []string{"a", "b"} {
		if err := d.History(ctx, conv, func(e store.Entry) error { bodies = append(bodies, string(e.Body)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"a1"}; !equal(bodies, want) {
		t.Errorf("histories hold %v, want %v", bodies, want)
	}
	if cur, err := d.Cursors(ctx); err != nil || len(cur) != 1 || cur["a"] != 2 {
		t.Errorf("cursors = %v, %v; want a at 2 alone", cur, err)
	}
	if got, want := sources(t, d), []string{"first", "c"}; !equal(got, want) {
		t.Errorf("log holds %v, want %v", got, want)
	}
}

// Record refuses, before it is queued, what the store cannot keep.
func TestRecordRefusesAt(t *testing.T) {
	d := openTemp(t)
	_, err := d.Record(t.Context(), []store.Entry{{Conversation: "a", At: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}}, nil)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "record 1 entry and 0 cursors: entry 1: ") {
		t.Errorf("Record(year 1500) = %v, want store.ErrInvalid naming the entry", err)
	}
}
