package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/mcpl-go/mcpl/store"
)

// A call is one Append, AddMessages, Record, Compact or DropCursors
// waiting for the writer.
type call struct {
	ctx     context.Context
	kind    callKind
	recs    []store.Record  // Append's
	msgs    []store.Message // AddMessages'
	entries []store.Entry   // Record's, and
	cursors []cursor        // its cursors, by name
	through int64           // Compact's, and
	keep    []int64         // its keep: increasing, each in 1..through
	names   []string        // DropCursors': increasing, none ""
	prune   *pruneQuery     // PruneInbox's
	pages   int64           // SetMaxPages': the bound asked, then the bound set
	saved   *namedState     // SaveState's
	size    int             // bytes of strings and bodies, for Options.MaxBatchBytes

	// state is queued until the writer takes the call (taken) or its
	// caller gives up on it first (abandoned); whichever swaps it first
	// decides.
	state atomic.Int32
	done  chan struct{} // closed by finish

	// Set by the writer before finish: the Seq of each record, message (0
	// for a message not added) or entry; a Compact's records dropped and
	// whether it made the log anew (see compact); and the call's outcome.
	seqs    []int64
	dropped int
	rebuilt bool
	err     error
}

const (
	queued int32 = iota
	taken
	abandoned
)

// callKind says which method made a call.
type callKind int8

const (
	appendCall  callKind = iota // Append: recs
	inboxCall                   // AddMessages: msgs
	recordCall                  // Record: entries and cursors
	compactCall                 // Compact: through and keep, a batch of its own
	dropCall                    // DropCursors: names
	pruneCall                   // PruneInbox: prune, a batch of its own
	pagesCall                   // SetMaxPages: pages, outside any transaction
	stateCall                   // SaveState: saved
)

// namedState is what one SaveState call keeps.
type namedState struct {
	name string
	body []byte
}

// cursor is one cursor a Record call sets.
type cursor struct {
	name string
	pos  int64
}

func (c *call) what() string {
	switch c.kind {
	case inboxCall:
		return "add " + plural(len(c.msgs), "message")
	case recordCall:
		return "record " + plural(len(c.entries), "entry") + " and " + plural(len(c.cursors), "cursor")
	case compactCall:
		return fmt.Sprintf("compact the log through seq %d keeping %s", c.through, plural(len(c.keep), "record"))
	case dropCall:
		return "drop " + plural(len(c.names), "cursor")
	case pruneCall:
		return "prune the inbox"
	case pagesCall:
		return fmt.Sprintf("set the file's bound to %d pages", c.pages)
	case stateCall:
		return fmt.Sprintf("save the state %q", c.saved.name)
	}
	return "append " + plural(len(c.recs), "record")
}

// empty reports whether c has nothing to write: no records, messages,
// entries, cursors or names, or a Compact through no Seq.
func (c *call) empty() bool {
	switch c.kind {
	case compactCall:
		return c.through < 1
	case dropCall:
		return len(c.names) == 0
	case pruneCall:
		return c.prune.empty()
	case pagesCall, stateCall:
		return false
	}
	return len(c.recs) == 0 && len(c.msgs) == 0 && len(c.entries) == 0 && len(c.cursors) == 0
}

func (c *call) finish(err error) {
	c.err = err
	close(c.done)
}

// Append implements store.Store. A record that fails store.Record.Validate,
// or whose At this store cannot keep (see the package doc), fails the call
// before it is queued, with an error wrapping store.ErrInvalid.
func (d *DB) Append(ctx context.Context, recs ...store.Record) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &call{ctx: ctx, recs: recs}
	for i := range recs {
		r := &recs[i]
		err := r.Validate()
		if err == nil && !keepable(r.At) {
			err = fmt.Errorf("%w: At %v is outside the years 1678 to 2262 that this store keeps", store.ErrInvalid, r.At)
		}
		if err != nil {
			return nil, d.errf(err, "%s: record %d", c.what(), i+1)
		}
		c.size += 64 + len(r.Kind) + len(r.Server) + len(r.Channel) + len(r.State) + len(r.Source) + len(r.MessageID) + len(r.Acknowledgment)
	}
	if err := d.do(c); err != nil {
		return nil, err
	}
	out := make([]store.Record, len(recs))
	for i := range recs {
		out[i] = recs[i]
		out[i].Seq = c.seqs[i]
	}
	return out, nil
}

// AddMessages implements store.Store. A message whose At this store cannot
// keep (see the package doc) fails the call before it is queued.
func (d *DB) AddMessages(ctx context.Context, msgs []store.Message) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &call{ctx: ctx, kind: inboxCall, msgs: msgs}
	for i := range msgs {
		m := &msgs[i]
		if !keepable(m.At) {
			return nil, fmt.Errorf("store %s: %s: message %d: %w: At %v is outside the years 1678 to 2262 that this store keeps", d.path, c.what(), i+1, store.ErrInvalid, m.At)
		}
		c.size += 64 + len(m.Server) + len(m.Channel) + len(m.MessageID) + len(m.ThreadID) + len(m.Kind) + len(m.FeatureSet) + len(m.EventID) + len(m.Body)
		for _, t := range m.Tags {
			c.size += 3 + len(t)
		}
	}
	if err := d.do(c); err != nil {
		return nil, err
	}
	added := make([]bool, len(msgs))
	for i, seq := range c.seqs {
		if seq != 0 {
			added[i] = true
			msgs[i].Seq = seq
		}
	}
	return added, nil
}

// do queues c for the writer and waits for its outcome, or for c.ctx to
// end before the writer takes it. A call with nothing to write is not
// queued.
func (d *DB) do(c *call) error {
	d.mu.Lock()
	switch {
	case d.closed:
		d.mu.Unlock()
		return fmt.Errorf("store %s: %s: %w", d.path, c.what(), store.ErrClosed)
	case d.broken != nil:
		d.mu.Unlock()
		return d.brokenErr(c, d.broken)
	case c.empty():
		d.mu.Unlock()
		return nil
	}
	c.done = make(chan struct{})
	d.queue = append(d.queue, c)
	d.mu.Unlock()
	d.signal()

	select {
	case <-c.done:
		return c.err
	case <-c.ctx.Done():
		if c.state.CompareAndSwap(queued, abandoned) {
			return c.ctx.Err()
		}
		<-c.done // taken: it runs to its commit
		return c.err
	}
}

func (d *DB) brokenErr(c *call, cause error) error {
	return fmt.Errorf("store %s: %s: refused: an earlier commit failed and left the file in doubt (reopen the store): %w", d.path, c.what(), cause)
}

// alone reports whether c is a batch of its own: a Compact, a
// PruneInbox or a SetMaxPages.
func (c *call) alone() bool {
	return c.kind == compactCall || c.kind == pruneCall || c.kind == pagesCall
}

// signal wakes the writer.
func (d *DB) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// next waits for queued calls and takes the next batch of them; false once
// the DB is closed and nothing is left.
func (d *DB) next() ([]*call, bool) {
	for {
		d.mu.Lock()
		if len(d.queue) > 0 {
			n, size := 0, 0
			for n < len(d.queue) && n < d.opts.MaxBatchCalls {
				if d.queue[n].alone() {
					if n == 0 {
						n = 1 // alone: see compact
					}
					break
				}
				if n > 0 && size+d.queue[n].size > d.opts.MaxBatchBytes {
					break
				}
				size += d.queue[n].size
				n++
			}
			batch := d.queue[:n:n]
			if n == len(d.queue) {
				d.queue = nil
			} else {
				// A fresh array, so the taken calls are not kept alive by
				// the queue's.
				d.queue = append([]*call(nil), d.queue[n:]...)
			}
			d.mu.Unlock()
			return batch, true
		}
		if d.closed {
			d.mu.Unlock()
			return nil, false
		}
		d.mu.Unlock()
		<-d.wake
	}
}

// writer is the write connection and its statements, used by the writer
// goroutine (run) alone.
type writer struct {
	conn                                                    *sql.Conn
	begin, commit, rollback, savepoint, release, rollbackTo *sql.Stmt
	insLog, insMsg, insEntry, setCursor, dropCursor         *sql.Stmt
	putState                                                *sql.Stmt
	// Compact's (see compact).
	countLog, countTail, countKept, deleteRange      *sql.Stmt
	stayKept, stayTail, clearLog, restore, clearStay *sql.Stmt
	// PruneInbox's (see prune).
	pruneSelect, pruneKeep, pruneDelete, pruneForget *sql.Stmt
}

// stmts lists w's statements, for openWriter to prepare and close to
// close.
func (w *writer) stmts() []struct {
	stmt **sql.Stmt
	sql  string
} {
	return []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&w.begin, "BEGIN IMMEDIATE"},
		{&w.commit, "COMMIT"},
		{&w.rollback, "ROLLBACK"},
		{&w.savepoint, "SAVEPOINT call"},
		{&w.release, "RELEASE call"},
		{&w.rollbackTo, "ROLLBACK TO call"},
		{&w.insLog, `INSERT INTO log (kind, server, channel, state, source, message_id, acknowledgment, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`},
		// A message whose key a prune kept (inbox_pruned) is not added
		// again, as one still in the inbox is not.
		{&w.insMsg, `INSERT INTO inbox (server, channel, message_id, thread_id, body, at, tags, kind, feature_set, directed, event_id) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11 WHERE NOT EXISTS (SELECT 1 FROM inbox_pruned WHERE server = ?1 AND channel = ?2 AND message_id = ?3 AND event_id = ?11) ON CONFLICT (server, channel, message_id, event_id) DO NOTHING`},
		{&w.insEntry, `INSERT INTO history (conversation, body, at) VALUES (?, ?, ?)`},
		{&w.setCursor, `INSERT INTO cursors (name, position) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position`},
		{&w.dropCursor, `DELETE FROM cursors WHERE name = ?`},
		{&w.putState, `INSERT INTO states (name, body) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET body = excluded.body`},
		{&w.countLog, `SELECT count(*) FROM log`},
		{&w.countTail, `SELECT count(*) FROM log WHERE seq > ?`},
		{&w.countKept, `SELECT count(*) FROM log WHERE seq IN (SELECT value FROM json_each(?))`},
		{&w.deleteRange, `DELETE FROM log WHERE seq > ? AND seq <= ?`},
		{&w.stayKept, `INSERT INTO temp.compact_stay SELECT ` + logColumns + ` FROM log WHERE seq IN (SELECT value FROM json_each(?))`},
		{&w.stayTail, `INSERT INTO temp.compact_stay SELECT ` + logColumns + ` FROM log WHERE seq > ?`},
		{&w.clearLog, `DELETE FROM log`},
		{&w.restore, `INSERT INTO log (` + logColumns + `) SELECT ` + logColumns + ` FROM temp.compact_stay ORDER BY seq`},
		{&w.clearStay, `DELETE FROM temp.compact_stay`},
		{&w.pruneSelect, pruneSelectSQL},
		{&w.pruneKeep, pruneKeepSQL},
		{&w.pruneDelete, pruneDeleteSQL},
		{&w.pruneForget, pruneForgetSQL},
	}
}

// openWriter pins the write connection, migrates the schema and prepares
// the writer's statements.
func (d *DB) openWriter(ctx context.Context) (*writer, error) {
	conn, err := d.write.Conn(ctx)
	if err != nil {
		return nil, d.openErr(err, "open")
	}
	w := &writer{conn: conn}
	if err := d.migrate(ctx, conn); err != nil {
		w.close()
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB {
			return nil, fmt.Errorf("store %s: the file is not a SQLite database: %w", d.path, se)
		}
		return nil, err
	}
	// Compact's staging table: the connection's own, in its temp
	// database, so making it changes nothing in the file.
	if _, err := conn.ExecContext(ctx, `CREATE TEMP TABLE compact_stay AS SELECT `+logColumns+` FROM main.log WHERE 0`); err != nil {
		w.close()
		return nil, d.errf(err, "create the compaction's table")
	}
	for _, s := range w.stmts() {
		if *s.stmt, err = conn.PrepareContext(ctx, s.sql); err != nil {
			w.close()
			return nil, d.errf(err, "prepare %q", s.sql)
		}
	}
	return w, nil
}

func (w *writer) close() {
	for _, s := range w.stmts() {
		if *s.stmt != nil {
			(*s.stmt).Close()
		}
	}
	w.conn.Close()
}

// run is the writer goroutine: it commits batch after batch until the DB
// is closed and the queue empty, then releases the write connection.
// After a batch that failed for want of space (see spaceFailure) it
// waits before taking the next, backing off (see the package doc,
// "A full disk").
func (d *DB) run(w *writer) {
	defer close(d.writerDone)
	defer w.close()
	var backoff time.Duration
	for {
		if backoff > 0 {
			d.pause(backoff)
		}
		batch, ok := d.next()
		if !ok {
			return
		}
		if d.commitBatch(w, batch) {
			backoff = min(max(2*backoff, FullBackoffMin), FullBackoffMax)
		} else {
			backoff = 0
		}
	}
}

// Bounds of the writer's wait after a batch that failed for want of space:
// the first wait is FullBackoffMin, each failure after doubles it, up to
// FullBackoffMax; a batch that commits ends it.
const (
	FullBackoffMin = 50 * time.Millisecond
	FullBackoffMax = 2 * time.Second
)

// pause waits for d, or until the DB is closed (Close then has the queue
// written at once, each call failing or not on its own).
func (d *DB) pause(wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case <-d.wake:
			d.mu.Lock()
			closed := d.closed
			d.mu.Unlock()
			if closed {
				d.signal() // next looks again
				return
			}
		}
	}
}

// commitBatch writes batch in one transaction and finishes every call of
// it. With more than one call, each is inside a savepoint, so that a call
// that fails is rolled back alone. It reports whether a call failed for
// want of space (spaceFailure), for run's backoff.
func (d *DB) commitBatch(w *writer, batch []*call) (full bool) {
	live := batch[:0]
	for _, c := range batch {
		if !c.state.CompareAndSwap(queued, taken) {
			continue // its caller gave up on it
		}
		if err := c.ctx.Err(); err != nil {
			c.finish(err)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return false
	}
	d.mu.Lock()
	broken := d.broken
	d.mu.Unlock()
	if broken != nil {
		for _, c := range live {
			c.finish(d.brokenErr(c, broken))
		}
		return false
	}
	if live[0].kind == pagesCall {
		c := live[0]
		err := w.setMaxPages(c)
		if err != nil {
			err = d.errf(err, "%s", c.what())
		}
		c.finish(err)
		return false
	}

	d.batches.Add(1)
	ctx := context.Background() // taken calls run to their commit
	group := ""
	if len(live) > 1 {
		group = fmt.Sprintf(" (a group commit of %d calls)", len(live))
	}
	failAll := func(calls []*call, err error, format string) {
		full = full || spaceFailure(err)
		_, _ = w.rollback.ExecContext(ctx) // may have ended already; err says why
		for _, c := range calls {
			c.finish(d.errf(err, format, c.what(), group))
		}
	}
	if _, err := w.begin.ExecContext(ctx); err != nil {
		failAll(live, err, "%s: begin the transaction%s")
		return full
	}
	if len(live) == 1 {
		c := live[0]
		if err := w.write(ctx, c); err != nil {
			failAll(live, err, "%s%s")
			return full
		}
	} else {
		pending := make([]*call, 0, len(live))
		for i, c := range live {
			if _, err := w.savepoint.ExecContext(ctx); err != nil {
				failAll(append(pending, live[i:]...), err, "%s: open its savepoint%s")
				return full
			}
			if err := w.write(ctx, c); err != nil {
				// Undo this call alone. If SQLite has already rolled the
				// whole transaction back (it does on some errors), the
				// savepoint is gone and so is everyone's work.
				full = full || spaceFailure(err)
				_, e1 := w.rollbackTo.ExecContext(ctx)
				_, e2 := w.release.ExecContext(ctx)
				if e := errors.Join(e1, e2); e != nil {
					c.finish(d.errf(err, "%s", c.what()))
					failAll(append(pending, live[i+1:]...), fmt.Errorf("another call of the group failed (%v), and undoing it alone failed: %w", err, e), "%s%s")
					return full
				}
				c.finish(d.errf(err, "%s", c.what()))
				continue
			}
			if _, err := w.release.ExecContext(ctx); err != nil {
				failAll(append(pending, live[i:]...), err, "%s: release its savepoint%s")
				return full
			}
			pending = append(pending, c)
		}
		if len(pending) == 0 {
			_, _ = w.rollback.ExecContext(ctx)
			return full
		}
		live = pending
	}
	if _, err := w.commit.ExecContext(ctx); err != nil {
		if !cleanFailure(err) && !spaceFailure(err) {
			d.mu.Lock()
			d.broken = err
			d.mu.Unlock()
		}
		failAll(live, err, "%s: commit%s")
		return full
	}
	for _, c := range live {
		c.finish(nil)
	}
	return full
}

// spaceFailure reports whether err is a failure to write for want of
// space or of the file system's say-so: SQLite's SQLITE_FULL (a write
// that met ENOSPC, or PRAGMA max_page_count), any SQLITE_IOERR (a write,
// a sync, the -shm file's growth), or ENOSPC itself. Such a failure fails
// its batch, and the writer backs off, but it does not break the DB: the
// next batch is tried, and commits once space is back.
//
// A COMMIT that failed so has not committed: SQLite appends the batch's
// pages to the -wal file and marks them committed only in the -wal
// index, after its last write and its sync succeed, and it does not
// update that index when one fails, so no reader ever sees the batch and
// the next commit writes over its pages. One doubt is left: after a sync
// or an index failure, the batch's pages may be whole in the -wal file,
// and a process that dies before its next commit may find the batch there
// on its restart (SQLite's recovery reads the -wal file, not the index).
// Its callers were told it failed; a message of it is then in the inbox,
// and the server's next send of it is kept once (dedupe).
func spaceFailure(err error) bool {
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
		return true
	}
	return false
}

// cleanFailure reports whether a failed COMMIT surely wrote nothing: a
// deferred constraint, or a lock, which leave the transaction open for the
// ROLLBACK that follows. Any other failure (I/O, a full disk, a closed
// connection) may have written the batch.
func cleanFailure(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// write inserts c's records, messages or entries and cursors, setting
// c.seqs.
func (w *writer) write(ctx context.Context, c *call) error {
	switch c.kind {
	case recordCall:
		return w.writeRecord(ctx, c)
	case compactCall:
		return w.compact(ctx, c)
	case pruneCall:
		return w.pruneInbox(ctx, c)
	case stateCall:
		if _, err := w.putState.ExecContext(ctx, c.saved.name, c.saved.body); err != nil {
			return fmt.Errorf("state %q: %w", c.saved.name, err)
		}
		return nil
	case dropCall:
		for _, name := range c.names {
			if _, err := w.dropCursor.ExecContext(ctx, name); err != nil {
				return fmt.Errorf("cursor %q: %w", name, err)
			}
		}
		return nil
	case appendCall:
		c.seqs = make([]int64, len(c.recs))
		for i := range c.recs {
			r := &c.recs[i]
			res, err := w.insLog.ExecContext(ctx, string(r.Kind), r.Server, r.Channel, string(r.State), r.Source, r.MessageID, r.Acknowledgment, nanos(r.At))
			if err == nil {
				c.seqs[i], err = res.LastInsertId()
			}
			if err != nil {
				return fmt.Errorf("record %d: %w", i+1, err)
			}
		}
		return nil
	}
	c.seqs = make([]int64, len(c.msgs))
	for i := range c.msgs {
		m := &c.msgs[i]
		res, err := w.insMsg.ExecContext(ctx, m.Server, m.Channel, m.MessageID, m.ThreadID, []byte(m.Body), nanos(m.At), tagsJSON(m.Tags), m.Kind, m.FeatureSet, m.Directed, m.EventID)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err == nil && n == 1 {
			c.seqs[i], err = res.LastInsertId()
		}
		if err != nil {
			return fmt.Errorf("message %d: %w", i+1, err)
		}
	}
	return nil
}

// tagsJSON is a message's tags as the inbox keeps them: a JSON array.
func tagsJSON(tags []string) string {
	if len(tags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tags)
	return string(b)
}
