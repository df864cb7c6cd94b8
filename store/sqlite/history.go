package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpl-go/mcpl/store"
)

// Record implements store.Store. It goes through the writer like Append:
// its entries and cursors are written in one SAVEPOINT of a group commit,
// all or none, and it returns after the COMMIT. Cursors are set in the
// order of their names. An entry with no Conversation, or whose At this
// store cannot keep (see the package doc), or a cursor with an empty name
// or a negative position, fails the call before it is queued, with an
// error wrapping store.ErrInvalid.
func (d *DB) Record(ctx context.Context, entries []store.Entry, cursors map[string]int64) ([]store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &call{ctx: ctx, kind: recordCall, entries: entries, cursors: make([]cursor, 0, len(cursors))}
	for name, pos := range cursors {
		c.cursors = append(c.cursors, cursor{name, pos})
		c.size += 32 + len(name)
	}
	slices.SortFunc(c.cursors, func(a, b cursor) int { return strings.Compare(a.name, b.name) })
	for i := range entries {
		e := &entries[i]
		var err error
		switch {
		case e.Conversation == "":
			err = fmt.Errorf("%w: no conversation", store.ErrInvalid)
		case !keepable(e.At):
			err = fmt.Errorf("%w: At %v is outside the years 1678 to 2262 that this store keeps", store.ErrInvalid, e.At)
		}
		if err != nil {
			return nil, d.errf(err, "%s: entry %d", c.what(), i+1)
		}
		c.size += 64 + len(e.Conversation) + len(e.Body)
	}
	for _, cur := range c.cursors {
		switch {
		case cur.name == "":
			return nil, d.errf(fmt.Errorf("%w: a cursor with no name", store.ErrInvalid), "%s", c.what())
		case cur.pos < 0:
			return nil, d.errf(fmt.Errorf("%w: negative position %d", store.ErrInvalid, cur.pos), "%s: cursor %q", c.what(), cur.name)
		}
	}
	if err := d.do(c); err != nil {
		return nil, err
	}
	out := make([]store.Entry, len(entries))
	for i := range entries {
		out[i] = entries[i]
		out[i].Seq = c.seqs[i]
	}
	return out, nil
}

// writeRecord inserts c's entries, setting c.seqs, and sets its cursors.
func (w *writer) writeRecord(ctx context.Context, c *call) error {
	c.seqs = make([]int64, len(c.entries))
	for i := range c.entries {
		e := &c.entries[i]
		res, err := w.insEntry.ExecContext(ctx, e.Conversation, []byte(e.Body), nanos(e.At))
		if err == nil {
			c.seqs[i], err = res.LastInsertId()
		}
		if err != nil {
			return fmt.Errorf("entry %d: %w", i+1, err)
		}
	}
	for _, cur := range c.cursors {
		if _, err := w.setCursor.ExecContext(ctx, cur.name, cur.pos); err != nil {
			return fmt.Errorf("cursor %q: %w", cur.name, err)
		}
	}
	return nil
}

// History implements store.Store. It reads a snapshot: entries recorded
// while it runs are not in it. fn gets a Body of its own, which it may
// keep.
func (d *DB) History(ctx context.Context, conversation string, fn func(store.Entry) error) error {
	what := fmt.Sprintf("read the history of %q", conversation)
	if err := d.readable(ctx, what); err != nil {
		return err
	}
	rows, err := d.history.QueryContext(ctx, conversation)
	if err != nil {
		return d.readErr(ctx, err, "%s", what)
	}
	defer rows.Close()
	e := store.Entry{Conversation: conversation}
	var at sql.NullInt64
	for rows.Next() {
		var body []byte // fresh per entry: fn may keep it
		if err := rows.Scan(&e.Seq, &body, &at); err != nil {
			return d.readErr(ctx, err, "%s: entry after seq %d", what, e.Seq)
		}
		e.Body, e.At = body, fromNanos(at)
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return d.readErr(ctx, err, "%s after seq %d", what, e.Seq)
	}
	return nil
}

// Cursors implements store.Store.
func (d *DB) Cursors(ctx context.Context) (map[string]int64, error) {
	if err := d.readable(ctx, "read the cursors"); err != nil {
		return nil, err
	}
	rows, err := d.cursors.QueryContext(ctx)
	if err != nil {
		return nil, d.readErr(ctx, err, "read the cursors")
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			name string
			pos  int64
		)
		if err := rows.Scan(&name, &pos); err != nil {
			return nil, d.readErr(ctx, err, "read the cursors")
		}
		out[name] = pos
	}
	if err := rows.Err(); err != nil {
		return nil, d.readErr(ctx, err, "read the cursors")
	}
	return out, nil
}
