// Package sqlite is the host's embedded durable store: a store.Store kept in
// one SQLite file, through modernc.org/sqlite (pure Go, no cgo).
//
// # The file
//
// Open creates the file's directory if it is missing, with mode 0o700, and
// the file itself with mode 0o600: the inbox holds what servers sent the
// agent, which is nobody else's to read. SQLite gives its -wal and -shm
// files the database file's mode. The file is in WAL mode with
// synchronous=FULL, so a commit is on disk (fsync) before Append,
// AddMessages, Record, Compact or DropCursors returns, and readers never
// wait for the writer. foreign_keys is on (the schema has none yet; a
// later one may).
//
// The schema is versioned in PRAGMA user_version (see SchemaVersion); Open
// applies the missing migrations in one transaction, and refuses a file
// whose version is newer than this package knows, or that is not a SQLite
// database, naming the file.
//
// # One writer
//
// One process at a time writes a store: two hosts on one file would each
// run their own copy of every server, answer each message twice and
// write the same cursors. Open (for writing) takes the store's lock file,
// LockPath: the file's name with ".lock" appended, beside it, mode 0o600,
// made if missing. It takes flock(2) LOCK_EX on it without waiting, and
// writes its pid in it; a lock another process holds, or another open DB
// of this process, is refused with an *InUseError naming the file and the
// holder's pid, before anything else touches the file. Close empties the
// lock file and closes it, which releases the lock. A lock file, not
// SQLite's locking_mode=EXCLUSIVE, because:
//
//   - readers go on reading: EXCLUSIVE locking mode keeps every other
//     connection out of the file, a read-only opener's included, where
//     the lock file is held apart from SQLite's own locks, and a
//     read-only DB (see "Read-only") does not take it;
//   - a crashed holder leaves no stale lock: the kernel releases a flock
//     when the last descriptor of it closes, at the process's death
//     whatever the death, and the descriptor is close-on-exec, so a
//     server the host started does not keep it;
//   - the refusal can say who holds it: the holder's pid is in the file.
//
// The lock file is left in place when the store closes: removing it would
// let one writer lock the removed file while another locks its successor.
// flock is advisory, and local: it holds between processes of one
// machine, and not on every network file system; where flock is refused
// (ENOLCK, say), Open fails rather than run unlocked. Where the platform
// has no flock (not unix), no lock is taken.
//
// # Damage
//
// Before it migrates, Open runs PRAGMA quick_check on the file, and
// refuses a file it finds damaged (pages that are not what their b-tree
// says, an index that does not match its table) with a *CorruptError
// naming the file and the first problems SQLite found; nothing is written
// to the file. quick_check reads every page of the file (it skips
// integrity_check's cross-checks of indexes against their rows' values),
// so it costs the file's size: about 0.2 to 0.4 s for a store of 100,000
// inbox messages (33 MB, BenchmarkOpenQuickCheck, on a 2-core machine
// quiet and loaded), linear beyond. The inbox and the histories are never
// compacted, so that grows with the store; it is paid once, at Open, and
// a damaged file found then is cheaper than one found by a write hours
// later. A read-only Open does not check.
//
// # Read-only
//
// Open with Options.ReadOnly opens the file in SQLite's read-only mode
// (mode=ro), for a reader beside a writer (mcplhost channels while a host
// runs): it takes no lock, makes no file (a missing one is an error
// wrapping fs.ErrNotExist, an empty one is refused), does not check or
// migrate, and refuses a file whose schema version is not SchemaVersion.
// Its reads are as a writer's; every write fails, naming the store and the
// call, with an error wrapping ErrReadOnly. It reads the WAL a live writer
// keeps, through the -shm file, which it makes if missing (as the writer
// would) where the directory lets it.
//
// # Writes: group commit
//
// One goroutine owns the write connection. Append, AddMessages, Record,
// Compact and DropCursors queue their call and wait; the writer takes what
// is queued (at most Options.MaxBatchCalls calls and Options.MaxBatchBytes
// bytes) and writes it in one transaction, each call inside a SAVEPOINT of
// its own: a call that fails (a record the schema refuses) is rolled back
// alone and fails alone, the others in the batch commit. A Compact is
// never in a batch with other calls: it is a transaction of its own, and
// the calls queued behind it wait for its COMMIT (see DB.Compact). Every call of a batch returns only after
// the batch's COMMIT is synced; a COMMIT that fails fails every call of the
// batch and leaves none of them. A COMMIT that fails with anything other
// than a constraint, a lock, or a want of space (below) leaves the file in
// doubt (SQLite may have written the batch, and a restart may recover it),
// so the DB refuses every later write with that error: reopen it, which
// replays what the file really holds.
//
// # A full disk
//
// A write that fails for want of space (SQLITE_FULL, any SQLITE_IOERR,
// ENOSPC: see spaceFailure) fails its batch's calls at once, each with
// the error, and nothing of them is written; it does not break the DB.
// The writer then waits before its next batch, FullBackoffMin at first,
// doubling up to FullBackoffMax while batches keep failing so; calls
// queued meanwhile wait for it (a call's ctx still counts while it is
// queued) and go in one batch. So a full disk costs one attempt per wait,
// not one per call, and once space is back the next batch commits, with
// no reopen. A caller is never made to wait past one backoff and one
// attempt: the store does not try a failed call again by itself, since
// its caller was told it failed and may send it again (an MCPL server
// does), and trying it behind the caller's back would make "not written"
// untrue. SetMaxPages bounds the file, which is how tests fill it.
//
// A call's ctx counts until the writer takes the call into a batch: ended
// before, the call is not written and returns ctx.Err(); once taken, the
// call runs to its commit whatever its ctx does, because abandoning it
// then would leave the caller not knowing whether it was written.
//
// # Reads
//
// Replay, Messages, Page, InboxEnd, History and Cursors read through a pool
// of read-only connections (Options.ReadConns), concurrently with the
// writer and with each other; each sees the file as of its start (a
// snapshot), so a Replay that started before a Compact's COMMIT reads the
// whole log as it was. Times are kept as Unix
// nanoseconds, so At reads back exactly as appended, in UTC; the zero time
// is kept as NULL and reads back as the zero time. An At outside the years
// 1678 to 2262 (what int64 nanoseconds hold) is refused, with an error
// wrapping store.ErrInvalid.
//
// # File size
//
// SQLite does not give a file's pages back to the file system on its own:
// the pages a Compact frees go to the file's freelist, and later writes
// (Appends, messages, history) take them from there before the file
// grows. So the file is as large as the most it ever held at once: for
// the log, its largest size between two Compacts (the snapshot of current
// decisions plus the tail appended since the one before); the inbox holds
// what PruneInbox has not dropped (the host prunes what every agent has
// consumed past a retention, keeping each dropped message's dedupe key);
// the histories and the cursors are never compacted, and grow with what
// they keep. Nothing here shrinks the file: auto_vacuum is off (SQLite's
// default, and an existing file's mode cannot change without a VACUUM,
// which rewrites the whole file and is not done implicitly); an operator
// who wants the space back runs VACUUM on the file while no host has it
// open.
//
// The -wal file holds the transactions not yet copied into the file
// (SQLite checkpoints when it passes 1,000 pages, about 4 MiB), so it
// grows with the largest transaction: a Compact that deletes most of a
// large log writes every page it changes. When it starts over after a
// checkpoint, SQLite cuts it back to 16 MiB (PRAGMA journal_size_limit), so
// one large Compact does not leave a large -wal file behind for good.
//
// # Close
//
// Close stops taking calls (later ones fail with store.ErrClosed), lets the
// writer finish every call already queued, commits them, then closes the
// file, and last releases the lock (see "One writer"). A Replay, Messages, Page or History already reading goes on to its
// end on its own connection, which closes when it returns.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/mcpl-go/mcpl/store"
)

// Options tunes a DB. The zero value (or a nil *Options) takes the
// defaults.
type Options struct {
	// BusyTimeout is how long a statement waits for a lock that another
	// process holds on the file before it fails. 0 means 5 s.
	BusyTimeout time.Duration
	// MaxBatchCalls bounds the calls one group commit holds. 0 means 256.
	MaxBatchCalls int
	// MaxBatchBytes bounds the bytes (strings and bodies) of the calls one
	// group commit holds; a call larger than that is a batch of its own.
	// 0 means 4 MiB.
	MaxBatchBytes int
	// ReadConns is the number of read connections Replay, Messages,
	// Page, InboxEnd, History and Cursors share. 0 means 4.
	ReadConns int
	// ReadOnly opens the store for reading alone (see the package doc,
	// "Read-only"): the file must exist and be at SchemaVersion; the lock
	// is not taken, the file is not checked or migrated, and every write
	// fails with ErrReadOnly.
	ReadOnly bool

	// walLimit is the size the -wal file is cut back to when it starts
	// over (PRAGMA journal_size_limit). 0 means defaultWALLimit; tests
	// set it lower.
	walLimit int64
}

// defaultWALLimit is what the -wal file is cut back to (see the package
// doc, "File size").
const defaultWALLimit = 16 << 20

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.BusyTimeout <= 0 {
		r.BusyTimeout = 5 * time.Second
	}
	if r.MaxBatchCalls <= 0 {
		r.MaxBatchCalls = 256
	}
	if r.MaxBatchBytes <= 0 {
		r.MaxBatchBytes = 4 << 20
	}
	if r.ReadConns <= 0 {
		r.ReadConns = 4
	}
	if r.walLimit <= 0 {
		r.walLimit = defaultWALLimit
	}
	return r
}

// DB is a store.Store in a SQLite file. Its methods are safe for concurrent
// use.
type DB struct {
	path string
	opts Options
	hold *lockFile // the lock file, held until Close; nil when read-only

	write *sql.DB // one connection, pinned by the writer goroutine
	read  *sql.DB // the read pool
	// The reads' statements, prepared on read.
	replay, messages, history, cursors    *sql.Stmt
	loadState                             *sql.Stmt
	pageAll, pageServer, pageChannel, end *sql.Stmt

	mu     sync.Mutex
	queue  []*call // calls waiting for the writer
	closed bool
	// broken, once set, fails every later write: a COMMIT failed in a way
	// that leaves the file in doubt.
	broken error

	wake       chan struct{} // tells the writer there is work; buffered 1
	writerDone chan struct{} // closed when the writer has stopped

	closeOnce sync.Once
	closeErr  error

	batches  atomic.Int64 // transactions the writer began, for tests
	rebuilds atomic.Int64 // Compacts that made the log anew, for tests
}

var _ store.Store = (*DB)(nil)

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// LockPath is the lock file of the store at path (see the package doc,
// "One writer"): the file's name with ".lock" appended.
func LockPath(path string) string { return path + ".lock" }

// Open opens the store in the file at path, creating it (and its
// directory) if missing and bringing its schema up to date. opts may be
// nil. A store another writer holds is refused with an *InUseError, a
// damaged one with a *CorruptError (see the package doc).
func Open(path string, opts *Options) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	d := &DB{
		path:       abs,
		opts:       opts.withDefaults(),
		wake:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
	}
	if d.opts.ReadOnly {
		return d.openReadOnly()
	}
	if err := os.MkdirAll(filepath.Dir(d.path), 0o700); err != nil {
		return nil, fmt.Errorf("store %s: create its directory: %w", d.path, err)
	}
	// The lock first: nothing below may touch a file another writer has.
	if d.hold, err = lock(d.path, LockPath(d.path)); err != nil {
		return nil, err
	}
	if err := d.openWrite(); err != nil {
		d.hold.release()
		return nil, err
	}
	return d, nil
}

// openWrite is Open's work once the lock is held.
func (d *DB) openWrite() error {
	if err := d.prepareFile(); err != nil {
		return err
	}

	ctx := context.Background()
	var err error
	d.write, err = sql.Open("sqlite", d.dsn(false))
	if err != nil {
		return d.errf(err, "open")
	}
	d.write.SetMaxOpenConns(1)
	d.write.SetMaxIdleConns(1)
	// Before the migration, which would write to a damaged file.
	if err := d.quickCheck(ctx, d.write); err != nil {
		d.write.Close()
		return err
	}
	w, err := d.openWriter(ctx)
	if err != nil {
		d.write.Close()
		return err
	}

	if err := d.openReads(ctx); err != nil {
		w.close()
		d.write.Close()
		return err
	}
	go d.run(w)
	return nil
}

// openReads opens the read pool and prepares the reads' statements on
// it; on failure it leaves nothing open.
func (d *DB) openReads(ctx context.Context) error {
	var err error
	d.read, err = sql.Open("sqlite", d.dsn(true))
	if err == nil {
		d.read.SetMaxOpenConns(d.opts.ReadConns)
		d.read.SetMaxIdleConns(d.opts.ReadConns)
		d.replay, err = d.read.PrepareContext(ctx, `SELECT `+logColumns+` FROM log ORDER BY seq`)
	}
	for _, s := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&d.messages, `SELECT ` + inboxColumns + ` FROM inbox WHERE seq > ? ORDER BY seq`},
		{&d.pageAll, pageAllSQL},
		{&d.pageServer, pageServerSQL},
		{&d.pageChannel, pageChannelSQL},
		{&d.end, inboxEndSQL},
	} {
		if err == nil {
			*s.stmt, err = d.read.PrepareContext(ctx, s.sql)
		}
	}
	if err == nil {
		d.history, err = d.read.PrepareContext(ctx, `SELECT seq, body, at FROM history WHERE conversation = ? ORDER BY seq`)
	}
	if err == nil {
		d.cursors, err = d.read.PrepareContext(ctx, `SELECT name, position FROM cursors`)
	}
	if err == nil {
		d.loadState, err = d.read.PrepareContext(ctx, `SELECT body FROM states WHERE name = ?`)
	}
	if err != nil {
		err = d.openErr(err, "open the read connections")
		if d.read != nil {
			d.closeReads()
		}
		return err
	}
	return nil
}

// Path returns the absolute path of the store's file.
func (d *DB) Path() string { return d.path }

// prepareFile creates the file if missing, with the mode the package doc
// gives, and refuses a file that is not empty and does not start with
// SQLite's header: SQLite would say only "file is not a database" on the
// first query.
func (d *DB) prepareFile() error {
	f, err := os.OpenFile(d.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store %s: %w", d.path, err)
	}
	defer f.Close()
	return d.checkHeader(f)
}

func (d *DB) checkHeader(f *os.File) error {
	var hdr [len(sqliteHeader)]byte
	n, err := io.ReadFull(f, hdr[:])
	switch {
	case n == 0 && (err == io.EOF || err == nil):
		return nil // new or empty: SQLite makes it a database
	case err != nil && err != io.ErrUnexpectedEOF:
		return fmt.Errorf("store %s: read its header: %w", d.path, err)
	case string(hdr[:n]) != sqliteHeader:
		return fmt.Errorf("store %s: the file is not a SQLite database", d.path)
	}
	return nil
}

// dsn is the driver's name for the file: a file: URI (so that no
// character of the path is taken for a parameter) with the pragmas every
// connection gets. Read connections are query_only as well.
func (d *DB) dsn(readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", d.opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", d.opts.walLimit))
	if readOnly {
		q.Set("_query_only", "1")
	}
	if d.opts.ReadOnly {
		// SQLite's own read-only mode: no write, no file made, and none of
		// the pragmas above that would write (journal_mode is the file's
		// already, WAL, as the writer left it).
		q = url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", d.opts.BusyTimeout.Milliseconds()))
		q.Set("_query_only", "1")
		q.Set("mode", "ro")
	}
	p := filepath.ToSlash(d.path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows volume: file:///C:/...
	}
	u := url.URL{Scheme: "file", Path: p, RawQuery: q.Encode()}
	return u.String()
}

// Replay implements store.Store. It reads a snapshot: records appended
// while it runs are not in it.
func (d *DB) Replay(ctx context.Context, fn func(store.Record) error) error {
	if err := d.readable(ctx, "replay the log"); err != nil {
		return err
	}
	rows, err := d.replay.QueryContext(ctx)
	if err != nil {
		return d.readErr(ctx, err, "replay the log")
	}
	defer rows.Close()
	var (
		rec         store.Record
		kind, state string
		at          sql.NullInt64
	)
	for rows.Next() {
		if err := rows.Scan(&rec.Seq, &kind, &rec.Server, &rec.Channel, &state, &rec.Source, &rec.MessageID, &rec.Acknowledgment, &at); err != nil {
			return d.readErr(ctx, err, "replay the log: record after seq %d", rec.Seq)
		}
		rec.Kind, rec.State, rec.At = store.Kind(kind), store.State(state), fromNanos(at)
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return d.readErr(ctx, err, "replay the log after seq %d", rec.Seq)
	}
	return nil
}

// Messages implements store.Store. It reads a snapshot: messages added
// while it runs are not in it.
func (d *DB) Messages(ctx context.Context, after int64, fn func(store.Message) error) error {
	if err := d.readable(ctx, "read the inbox"); err != nil {
		return err
	}
	rows, err := d.messages.QueryContext(ctx, after)
	if err != nil {
		return d.readErr(ctx, err, "read the inbox after seq %d", after)
	}
	defer rows.Close()
	var msg store.Message
	for rows.Next() {
		prev := msg.Seq
		if msg, err = scanMessage(rows); err != nil {
			return d.readErr(ctx, err, "read the inbox: message after seq %d", prev)
		}
		if err := fn(msg); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return d.readErr(ctx, err, "read the inbox after seq %d", msg.Seq)
	}
	return nil
}

// inboxColumns are the inbox's columns as scanMessage reads them.
const inboxColumns = "seq, server, channel, message_id, thread_id, body, at, tags, kind, feature_set, directed, event_id"

// Page's statements, one for each kind of query: the whole inbox, a
// server's messages (by the index inbox_server), a channel's (by
// inbox_server_channel). Each is a range scan of its index from After,
// stopping at Through or the limit, whichever comes first. INDEXED BY
// names the index because SQLite's planner, with no statistics (the
// store never runs ANALYZE), rates both indexes alike for a channel's
// query and may take inbox_server, reading every message of the server.
const (
	pageAllSQL     = `SELECT ` + inboxColumns + ` FROM inbox WHERE seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3`
	pageServerSQL  = `SELECT ` + inboxColumns + ` FROM inbox INDEXED BY inbox_server WHERE server = ?4 AND seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3`
	pageChannelSQL = `SELECT ` + inboxColumns + ` FROM inbox INDEXED BY inbox_server_channel WHERE server = ?4 AND channel = ?5 AND seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3`
	// inboxEndSQL reads the last row of the inbox's table, a walk down
	// its b-tree (SQLite's min/max optimization).
	inboxEndSQL = `SELECT max(seq) FROM inbox`
)

// scanMessage reads a row of inboxColumns. The message's Body is its own.
func scanMessage(rows *sql.Rows) (store.Message, error) {
	var (
		msg  store.Message
		at   sql.NullInt64
		body []byte
		tags string
	)
	if err := rows.Scan(&msg.Seq, &msg.Server, &msg.Channel, &msg.MessageID, &msg.ThreadID, &body, &at, &tags, &msg.Kind, &msg.FeatureSet, &msg.Directed, &msg.EventID); err != nil {
		return msg, err
	}
	msg.Body, msg.At = body, fromNanos(at)
	if tags != "[]" {
		if err := json.Unmarshal([]byte(tags), &msg.Tags); err != nil {
			return msg, fmt.Errorf("the tags of message %d: %w", msg.Seq, err)
		}
	}
	return msg, nil
}

// Page implements store.Store. It reads a snapshot, through the indexes
// of schema version 4 (see migrations): its cost is in the messages it
// returns, not in the inbox's size. A query that fails
// store.InboxQuery.Validate is refused before it reads, with an error
// wrapping store.ErrInvalid.
func (d *DB) Page(ctx context.Context, q store.InboxQuery) ([]store.Message, error) {
	const what = "read a page of the inbox"
	if err := q.Validate(); err != nil {
		return nil, d.errf(err, "%s", what)
	}
	if err := d.readable(ctx, what); err != nil {
		return nil, err
	}
	through := q.Through
	if through <= 0 {
		through = math.MaxInt64
	}
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultPageLimit
	}
	var (
		rows *sql.Rows
		err  error
	)
	switch {
	case q.Channel != nil:
		rows, err = d.pageChannel.QueryContext(ctx, q.After, through, limit, q.Server, *q.Channel)
	case q.Server != "":
		rows, err = d.pageServer.QueryContext(ctx, q.After, through, limit, q.Server)
	default:
		rows, err = d.pageAll.QueryContext(ctx, q.After, through, limit)
	}
	if err != nil {
		return nil, d.readErr(ctx, err, "%s after seq %d", what, q.After)
	}
	defer rows.Close()
	var out []store.Message
	for rows.Next() {
		msg, err := scanMessage(rows)
		if err != nil {
			return nil, d.readErr(ctx, err, "%s: message %d after seq %d", what, len(out)+1, q.After)
		}
		out = append(out, msg)
	}
	if err := rows.Err(); err != nil {
		return nil, d.readErr(ctx, err, "%s after seq %d", what, q.After)
	}
	return out, nil
}

// InboxEnd implements store.Store.
func (d *DB) InboxEnd(ctx context.Context) (int64, error) {
	const what = "read the end of the inbox"
	if err := d.readable(ctx, what); err != nil {
		return 0, err
	}
	var end sql.NullInt64
	if err := d.end.QueryRowContext(ctx).Scan(&end); err != nil {
		return 0, d.readErr(ctx, err, "%s", what)
	}
	return end.Int64, nil // NULL, 0, for an empty inbox
}

func (d *DB) readable(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return fmt.Errorf("store %s: %s: %w", d.path, what, store.ErrClosed)
	}
	return nil
}

// readErr words a read's failure: the caller's ctx ending is returned as
// is, a close that raced with the read as store.ErrClosed.
func (d *DB) readErr(ctx context.Context, err error, format string, args ...any) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		// The read pool closing under the read is the likeliest cause.
		err = store.ErrClosed
	}
	return d.errf(err, format, args...)
}

// Close implements store.Store: it stops taking calls, lets the writer
// commit every call already queued, then closes the file. It is
// idempotent; a later call returns nil.
func (d *DB) Close() error {
	first := false
	d.closeOnce.Do(func() {
		first = true
		d.mu.Lock()
		d.closed = true
		d.mu.Unlock()
		d.signal()
		<-d.writerDone
		var errW error
		if d.write != nil {
			errW = d.write.Close()
		}
		errR := d.closeReads()
		// The lock last: another writer may open the file once it is free.
		errL := d.hold.release()
		if err := errors.Join(errW, errR, errL); err != nil {
			d.closeErr = d.errf(err, "close")
		}
	})
	if !first {
		return nil
	}
	return d.closeErr
}

func (d *DB) closeReads() error {
	var errs []error
	for _, s := range []*sql.Stmt{d.replay, d.messages, d.history, d.cursors, d.loadState, d.pageAll, d.pageServer, d.pageChannel, d.end} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	errs = append(errs, d.read.Close())
	return errors.Join(errs...)
}

// errf wraps err with the file and what failed: "store PATH: WHAT: ERR".
func (d *DB) errf(err error, format string, args ...any) error {
	return fmt.Errorf("store %s: %s: %w", d.path, fmt.Sprintf(format, args...), err)
}

// openErr is errf, saying so when SQLite found the file is not a database
// (the header check in prepareFile catches most, not a corrupt header).
func (d *DB) openErr(err error, format string, args ...any) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB {
		return fmt.Errorf("store %s: the file is not a SQLite database: %w", d.path, err)
	}
	return d.errf(err, format, args...)
}

// nanos is how At is kept: Unix nanoseconds, NULL for the zero time.
func nanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// keepable reports whether t survives nanos: the zero time, or a time
// whose Unix nanoseconds fit an int64 (the years 1678 to 2262).
func keepable(t time.Time) bool {
	return t.IsZero() || time.Unix(0, t.UnixNano()).Equal(t)
}

// plural is "1 record", "3 records", "2 entries".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if stem, ok := strings.CutSuffix(word, "y"); ok {
		return fmt.Sprintf("%d %sies", n, stem)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
