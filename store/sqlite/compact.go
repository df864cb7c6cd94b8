package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strconv"
)

// logColumns are the log's columns, in the order Replay reads them and
// compaction copies them. A migration that adds a column to log adds it
// here.
const logColumns = "seq, kind, server, channel, state, source, message_id, acknowledgment, at"

// Compact implements store.Store. It goes through the writer like Append,
// but alone: its own transaction, never a savepoint of a group commit, so
// that its cost and its failure are its own. Appends, AddMessages and
// Records queued behind it wait for its COMMIT. A Seq in keep outside 1
// to through is left out before the call is queued; a through below 1
// drops nothing and is not queued.
func (d *DB) Compact(ctx context.Context, through int64, keep []int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c := &call{ctx: ctx, kind: compactCall, through: through}
	if through >= 1 {
		c.keep = keptSeqs(keep, through)
	}
	c.size = 64 + 8*len(c.keep)
	if err := d.do(c); err != nil {
		return 0, err
	}
	if c.rebuilt {
		d.rebuilds.Add(1)
	}
	return c.dropped, nil
}

// keptSeqs is keep's Seqs in 1 to through, increasing, each once.
func keptSeqs(keep []int64, through int64) []int64 {
	out := make([]int64, 0, len(keep))
	for _, seq := range keep {
		if seq >= 1 && seq <= through {
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// seqsJSON is seqs as a JSON array, for json_each.
func seqsJSON(seqs []int64) string {
	b := make([]byte, 0, 2+8*len(seqs))
	b = append(b, '[')
	for i, seq := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, seq, 10)
	}
	return string(append(b, ']'))
}

// compact drops the log's records through c.through that are not in
// c.keep, setting c.dropped. It counts first what stays (the tail after
// through, and the kept records there are) and what goes (the rest: the
// count of the whole table reads its pages, not its rows), then takes
// the cheaper of two ways:
//
//   - When no more records stay than go (a log compacted through its end,
//     the usual case), it copies those that stay to the temp table
//     compact_stay, empties log (SQLite frees a table's pages wholesale
//     when a DELETE has no WHERE, writing only the freelist), and puts
//     them back with their Seqs: the work is in what stays, and little
//     goes to the WAL. c.rebuilt says it did.
//   - Otherwise it deletes the ranges of Seqs between the kept ones, a
//     statement a range: the work is in what goes.
//
// Either way the transaction is the writer's, so a crash leaves the log
// as it was or compacted, and log's AUTOINCREMENT counter (in
// sqlite_sequence, which neither way touches) keeps Append numbering on
// after the highest Seq ever given.
func (w *writer) compact(ctx context.Context, c *call) error {
	keep := seqsJSON(c.keep)
	var total, tail, kept int64
	if err := w.countLog.QueryRowContext(ctx).Scan(&total); err != nil {
		return fmt.Errorf("count the log: %w", err)
	}
	if err := w.countTail.QueryRowContext(ctx, c.through).Scan(&tail); err != nil {
		return fmt.Errorf("count the records after seq %d: %w", c.through, err)
	}
	if err := w.countKept.QueryRowContext(ctx, keep).Scan(&kept); err != nil {
		return fmt.Errorf("count the records kept: %w", err)
	}
	stay := tail + kept
	drop := total - stay
	if drop == 0 {
		return nil
	}
	if stay <= drop {
		if _, err := w.stayKept.ExecContext(ctx, keep); err != nil {
			return fmt.Errorf("copy the records kept: %w", err)
		}
		if _, err := w.stayTail.ExecContext(ctx, c.through); err != nil {
			return fmt.Errorf("copy the records after seq %d: %w", c.through, err)
		}
		if _, err := w.clearLog.ExecContext(ctx); err != nil {
			return fmt.Errorf("empty the log: %w", err)
		}
		res, err := w.restore.ExecContext(ctx)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err == nil && n != stay {
			err = fmt.Errorf("put back %d records, counted %d", n, stay)
		}
		if err != nil {
			return fmt.Errorf("put back the records that stay: %w", err)
		}
		if _, err := w.clearStay.ExecContext(ctx); err != nil {
			return fmt.Errorf("empty compact_stay: %w", err)
		}
		c.dropped, c.rebuilt = int(drop), true
		return nil
	}
	var dropped int64
	deleteRange := func(after, through int64) error {
		res, err := w.deleteRange.ExecContext(ctx, after, through)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			return fmt.Errorf("delete the records after seq %d through %d: %w", after, through, err)
		}
		dropped += n
		return nil
	}
	prev := int64(0)
	for _, seq := range c.keep {
		if seq-1 > prev {
			if err := deleteRange(prev, seq-1); err != nil {
				return err
			}
		}
		prev = seq
	}
	if c.through > prev {
		if err := deleteRange(prev, c.through); err != nil {
			return err
		}
	}
	if dropped != drop {
		return fmt.Errorf("deleted %d records, counted %d", dropped, drop)
	}
	c.dropped = int(dropped)
	return nil
}

// DropCursors implements store.Store. It goes through the writer like
// Record: in a SAVEPOINT of a group commit, returning after the COMMIT.
// An empty name, which no cursor has, is ignored with the others.
func (d *DB) DropCursors(ctx context.Context, names ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &call{ctx: ctx, kind: dropCall}
	for _, name := range names {
		if name != "" {
			c.names = append(c.names, name)
			c.size += 32 + len(name)
		}
	}
	slices.Sort(c.names)
	c.names = slices.Compact(c.names)
	return d.do(c)
}
