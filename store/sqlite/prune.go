package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/mcpl-go/mcpl/store"
)

// pruneQuery is a PruneInbox call's query, as the writer's statements take
// it.
type pruneQuery struct {
	before     int64  // Unix nanoseconds; 0 when no message is to go
	max        int64  // the highest Seq any server's bound allows
	floor      int64  // PruneQuery.Floor
	through    string // PruneQuery.Through as a JSON object
	limit      int
	keysBefore int64 // Unix nanoseconds; 0 when no key is to be forgotten
}

func (q *pruneQuery) empty() bool { return q.before == 0 && q.keysBefore == 0 }

// The prune's statements. pruneSelectSQL walks the inbox's rowid from the
// start up to the highest bound, so a pass reads the messages left before
// the first it may drop (those not yet consumed, or not yet old enough)
// again each time: a few milliseconds for 100,000 of them.
const (
	pruneSelectSQL = `SELECT seq FROM inbox
		WHERE seq <= ?1 AND (at IS NULL OR at < ?2)
		AND seq <= coalesce((SELECT value FROM json_each(?3) WHERE key = inbox.server), ?4)
		ORDER BY seq LIMIT ?5`
	pruneKeepSQL = `INSERT INTO inbox_pruned (server, channel, message_id, event_id, at)
		SELECT server, channel, message_id, event_id, coalesce(at, 0) FROM inbox WHERE seq IN (SELECT value FROM json_each(?1))
		ON CONFLICT DO NOTHING`
	pruneDeleteSQL = `DELETE FROM inbox WHERE seq IN (SELECT value FROM json_each(?1))`
	pruneForgetSQL = `DELETE FROM inbox_pruned WHERE at < ?1`
)

// PruneInbox implements store.Store. It goes through the writer alone,
// like Compact: one transaction that keeps the dropped messages' keys in
// inbox_pruned (see migrations, version 6), deletes the messages, and
// forgets the keys older than q.KeysBefore. The file does not shrink (see
// the package doc, "File size"): later messages reuse the pages.
func (d *DB) PruneInbox(ctx context.Context, q store.PruneQuery) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	pq := &pruneQuery{floor: q.Floor, limit: q.Limit, max: q.Floor}
	if pq.limit <= 0 {
		pq.limit = store.DefaultPruneLimit
	}
	if !q.Before.IsZero() {
		if !keepable(q.Before) {
			return 0, d.errf(fmt.Errorf("%w: Before %v is outside the years 1678 to 2262", store.ErrInvalid, q.Before), "prune the inbox")
		}
		pq.before = q.Before.UnixNano()
	}
	if !q.KeysBefore.IsZero() {
		if !keepable(q.KeysBefore) {
			return 0, d.errf(fmt.Errorf("%w: KeysBefore %v is outside the years 1678 to 2262", store.ErrInvalid, q.KeysBefore), "prune the inbox")
		}
		pq.keysBefore = q.KeysBefore.UnixNano()
	}
	through := q.Through
	if through == nil {
		through = map[string]int64{}
	}
	for _, t := range through {
		pq.max = max(pq.max, t)
	}
	b, err := json.Marshal(through)
	if err != nil {
		return 0, d.errf(err, "prune the inbox")
	}
	pq.through = string(b)
	c := &call{ctx: ctx, kind: pruneCall, prune: pq, size: 64 + len(b)}
	if err := d.do(c); err != nil {
		return 0, err
	}
	return c.dropped, nil
}

// pruneInbox is the writer's part of PruneInbox.
func (w *writer) pruneInbox(ctx context.Context, c *call) error {
	q := c.prune
	if q.before != 0 && q.max > 0 {
		rows, err := w.pruneSelect.QueryContext(ctx, q.max, q.before, q.through, q.floor, q.limit)
		if err != nil {
			return fmt.Errorf("find the messages to drop: %w", err)
		}
		var seqs []int64
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return fmt.Errorf("find the messages to drop: %w", err)
			}
			seqs = append(seqs, seq)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("find the messages to drop: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find the messages to drop: %w", err)
		}
		if len(seqs) > 0 {
			js := seqsJSON(seqs)
			if _, err := w.pruneKeep.ExecContext(ctx, js); err != nil {
				return fmt.Errorf("keep the dropped messages' dedupe keys: %w", err)
			}
			if _, err := w.pruneDelete.ExecContext(ctx, js); err != nil {
				return fmt.Errorf("drop %s: %w", plural(len(seqs), "message"), err)
			}
		}
		c.dropped = len(seqs)
	}
	if q.keysBefore != 0 {
		if _, err := w.pruneForget.ExecContext(ctx, q.keysBefore); err != nil {
			return fmt.Errorf("forget old dedupe keys: %w", err)
		}
	}
	return nil
}

// SetMaxPages bounds the file to n pages of its page size (4 KiB by
// default), through PRAGMA max_page_count on the write connection, and
// returns the bound set: SQLite keeps it at least the file's current size.
// A write that would grow the file past it fails as a full disk does
// (SQLITE_FULL), and the writer backs off and recovers as it does from
// one (see the package doc, "A full disk"). n of 0 or less lifts the bound
// (to SQLite's largest). It is how tests fill the disk without a small
// file system; an operator may use it as a quota. The bound lasts until
// Close: it is not kept in the file.
func (d *DB) SetMaxPages(n int64) (int64, error) {
	if n <= 0 {
		n = math.MaxUint32 - 1
	}
	c := &call{ctx: context.Background(), kind: pagesCall, pages: n}
	if err := d.do(c); err != nil {
		return 0, err
	}
	return c.pages, nil
}

// setMaxPages is the writer's part of SetMaxPages, outside any
// transaction.
func (w *writer) setMaxPages(c *call) error {
	// PRAGMA takes no parameters; the bound is a number here.
	return w.conn.QueryRowContext(context.Background(), fmt.Sprintf("PRAGMA max_page_count = %d", c.pages)).Scan(&c.pages)
}
