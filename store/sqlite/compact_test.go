package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/store"
)

// explain is the query plan SQLite makes for query on db, its lines'
// details joined by "; ".
func explain(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", query, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "; ")
}

// Page is a range scan of the index for its kind of query, in seq order
// with no sort, and InboxEnd a walk down the table's b-tree: neither reads
// the messages it does not return.
func TestPageQueryPlans(t *testing.T) {
	d := openTemp(t)
	raw := rawDB(t, d.Path())
	for _, tc := range []struct {
		name, query, want string
		args              []any
	}{
		{"all", pageAllSQL, "SEARCH inbox USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)", []any{0, 10, 5}},
		{"server", pageServerSQL, "SEARCH inbox USING INDEX inbox_server (server=? AND seq>? AND seq<?)", []any{0, 10, 5, "s"}},
		{"channel", pageChannelSQL, "SEARCH inbox USING INDEX inbox_server_channel (server=? AND channel=? AND seq>? AND seq<?)", []any{0, 10, 5, "s", "c"}},
		{"end", inboxEndSQL, "SEARCH inbox", nil},
	} {
		if got := explain(t, raw, tc.query, tc.args...); got != tc.want {
			t.Errorf("%s: the plan of %s is %q, want %q", tc.name, tc.query, got, tc.want)
		}
	}
}

// TestMigrateFromVersion3: a file of schema version 3 opens at the current
// version with its inbox indexed for Page, and its log compacts.
func TestMigrateFromVersion3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:3] {
		mustExec(t, raw, m)
	}
	for i := range 3 {
		mustExec(t, raw, fmt.Sprintf(`INSERT INTO log (kind, server, channel, state, source, message_id, acknowledgment, at) VALUES ('decision', 's', 'c', 'open', 'v3-%d', '', '', 1)`, i))
	}
	mustExec(t, raw, `INSERT INTO inbox (server, channel, message_id, thread_id, body, at, tags, kind, feature_set) VALUES
		('s', 'c', 'm1', '', X'7b7d', 2, '[]', '', ''),
		('s', '', 'ev-1', '', X'7b7d', 3, '[]', 'push', 'mcpl.calendar'),
		('t', 'c', 'm1', '', X'7b7d', 4, '[]', '', '')`)
	mustExec(t, raw, "PRAGMA user_version = 3")
	raw.Close()

	d := openAt(t, path, nil)
	ctx := t.Context()
	push := ""
	got, err := d.Page(ctx, store.InboxQuery{Server: "s", Channel: &push})
	if err != nil || len(got) != 1 || got[0].MessageID != "ev-1" || got[0].Kind != store.KindPushEvent {
		t.Errorf("Page(s's push events) after the migration = %+v, %v", got, err)
	}
	if end, err := d.InboxEnd(ctx); err != nil || end != 3 {
		t.Errorf("InboxEnd after the migration = %d, %v; want 3", end, err)
	}
	if n, err := d.Compact(ctx, 3, []int64{3}); err != nil || n != 2 {
		t.Errorf("Compact after the migration = %d, %v; want 2 dropped", n, err)
	}
	if got := sources(t, d); !equal(got, []string{"v3-2"}) {
		t.Errorf("log after Compact = %v, want [v3-2]", got)
	}
	check := rawDB(t, path)
	var v, idx int
	if err := check.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Errorf("schema version after the migration = %d (%v), want %d", v, err, SchemaVersion)
	}
	if err := check.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN ('inbox_server', 'inbox_server_channel') AND tbl_name = 'inbox'`).Scan(&idx); err != nil || idx != 2 {
		t.Errorf("indexes inbox_server and inbox_server_channel: %d of them (%v), want both", idx, err)
	}
}

// compactionCase is a log and a Compact of it, and which way compact
// takes (see writer.compact).
type compactionCase struct {
	name          string
	records       int
	through       int64
	keep          []int64
	rebuilt       bool
	deleteTrigger bool
}

// Compact makes the log anew when no more records stay than go, and
// deletes ranges otherwise; either way the log it leaves is the one the
// memory store leaves, with the same count dropped, and Append numbers on
// after the highest Seq ever given. A DELETE trigger on log (which turns
// off SQLite's wholesale emptying of a table) changes nothing but the
// speed.
func TestCompactBothWays(t *testing.T) {
	for _, tc := range []compactionCase{
		{name: "rebuild: through the end", records: 100, through: 100, keep: []int64{7, 50, 99, 99, 1000, -1}, rebuilt: true},
		{name: "rebuild: keeping none", records: 100, through: 100, rebuilt: true},
		{name: "rebuild: with a tail", records: 100, through: 80, keep: []int64{1, 2, 3}, rebuilt: true},
		{name: "rebuild: just more go than stay", records: 100, through: 51, keep: []int64{51}, rebuilt: true},
		{name: "rebuild: with a DELETE trigger", records: 100, through: 90, keep: []int64{5, 6}, rebuilt: true, deleteTrigger: true},
		{name: "delete: a long tail", records: 100, through: 20, keep: []int64{3, 4, 10, 20}},
		{name: "delete: most kept", records: 100, through: 100, keep: func() []int64 {
			var k []int64
			for i := int64(1); i <= 100; i++ {
				if i%10 != 3 {
					k = append(k, i)
				}
			}
			return k
		}()},
		{name: "delete: just more stay than go", records: 100, through: 50, keep: []int64{1}},
		{name: "delete: keeping the first and the last", records: 100, through: 10, keep: []int64{1, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkCompaction(t, tc) })
	}
}

func checkCompaction(t *testing.T, tc compactionCase) {
	d := openTemp(t)
	if tc.deleteTrigger {
		mustExec(t, rawDB(t, d.Path()), `CREATE TRIGGER test_on_delete AFTER DELETE ON log BEGIN SELECT 1; END`)
	}
	m := store.NewMemory()
	ctx := t.Context()
	for i := range tc.records {
		r := decision(fmt.Sprint(i + 1))
		for _, s := range []store.Store{d, m} {
			if out, err := s.Append(ctx, r); err != nil || out[0].Seq != int64(i+1) {
				t.Fatalf("Append %d = %v, %v", i+1, out, err)
			}
		}
	}
	before := d.rebuilds.Load()
	got, err := d.Compact(ctx, tc.through, tc.keep)
	if err != nil {
		t.Fatal(err)
	}
	if rebuilt := d.rebuilds.Load() > before; rebuilt != tc.rebuilt {
		t.Errorf("Compact made the log anew: %v, want %v", rebuilt, tc.rebuilt)
	}
	want, _ := m.Compact(ctx, tc.through, tc.keep)
	if got != want {
		t.Errorf("Compact dropped %d records, the memory store %d", got, want)
	}
	after := decision("after")
	for _, s := range []store.Store{d, m} {
		if _, err := s.Append(ctx, after); err != nil {
			t.Fatal(err)
		}
	}
	var logs [2][]store.Record
	for i, s := range []store.Store{d, m} {
		if err := s.Replay(ctx, func(r store.Record) error { logs[i] = append(logs[i], r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(logs[1], logs[0], cmp.Comparer(func(a, b store.Record) bool {
		return a.Seq == b.Seq && a.Source == b.Source && a.At.Equal(b.At)
	})); diff != "" {
		t.Errorf("the log after Compact and Append (-memory +sqlite):\n%s", diff)
	}
	if last := logs[0][len(logs[0])-1]; last.Seq != int64(tc.records+1) {
		t.Errorf("Append after Compact gave Seq %d, want %d", last.Seq, tc.records+1)
	}
}

// A Compact that fails in the writer leaves the log as it was: all or
// none, whichever way it took.
func TestCompactFailsWhole(t *testing.T) {
	for _, rebuild := range []bool{true, false} {
		t.Run(fmt.Sprintf("rebuild=%v", rebuild), func(t *testing.T) {
			d := openTemp(t)
			ctx := t.Context()
			for i := range 20 {
				if _, err := d.Append(ctx, decision(fmt.Sprint(i+1))); err != nil {
					t.Fatal(err)
				}
			}
			// The trigger refuses a record's deletion, or its putting back.
			trigger := `CREATE TRIGGER test_fail BEFORE DELETE ON log WHEN OLD.source = '4' BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`
			through, keep := int64(5), []int64{2}
			if rebuild {
				trigger = `CREATE TRIGGER test_fail BEFORE INSERT ON log WHEN NEW.source = '2' BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`
				through = 20
			}
			mustExec(t, rawDB(t, d.Path()), trigger)
			n, err := d.Compact(ctx, through, keep)
			want := fmt.Sprintf("store %s: compact the log through seq %d keeping 1 record: ", d.Path(), through)
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "refused by the test trigger") || n != 0 {
				t.Fatalf("Compact = %d, %v; want 0 and an error starting %q and giving SQLite's", n, err, want)
			}
			if got := count(t, d); got != 20 {
				t.Fatalf("the log holds %d records after a failed Compact, want all 20", got)
			}
			if _, err := d.Append(ctx, decision("after")); err != nil {
				t.Fatalf("Append after a failed Compact: %v", err)
			}
		})
	}
}

// A Compact queued with other calls is a transaction of its own; the
// calls before and after it are grouped as usual.
func TestCompactIsABatchOfItsOwn(t *testing.T) {
	d := openTemp(t)
	release, first := stall(t, d)
	ctx := t.Context()
	a := appendAsync(t, d, ctx, decision("a"))
	b := appendAsync(t, d, ctx, decision("b"))
	n := queueLen(d)
	compacted := make(chan error, 1)
	go func() {
		_, err := d.Compact(ctx, 2, []int64{1}) // first is 1, a 2
		compacted <- err
	}()
	waitFor(t, "the Compact to be queued", func() bool { return queueLen(d) == n+1 })
	c := appendAsync(t, d, ctx, decision("c"))
	e := appendAsync(t, d, ctx, decision("e"))
	before := d.batches.Load()
	release()
	if err := errors.Join(<-first, <-a, <-b, <-compacted, <-c, <-e); err != nil {
		t.Fatal(err)
	}
	// [a b] [Compact] [c e]
	if got := d.batches.Load() - before; got != 3 {
		t.Errorf("the five queued calls took %d transactions, want 3", got)
	}
	if got, want := sources(t, d), []string{"first", "b", "c", "e"}; !equal(got, want) {
		t.Errorf("log holds %v, want %v", got, want)
	}
}

// After a Compact that wrote a large -wal, the -wal is cut back to the
// limit (Options.walLimit) once it starts over: after a checkpoint, at the
// next write.
func TestCompactWALIsCutBack(t *testing.T) {
	const limit = 64 << 10
	d := openAt(t, filepath.Join(t.TempDir(), "host.db"), &Options{walLimit: limit})
	ctx := t.Context()
	recs := make([]store.Record, 2000)
	for i := range recs {
		recs[i] = decision(strings.Repeat("x", 200))
	}
	for range 5 {
		if _, err := d.Append(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}
	// Keeping every other record deletes the ranges between: every page
	// of the log changes.
	var keep []int64
	for seq := int64(1); seq <= 10_000; seq += 2 {
		keep = append(keep, seq)
	}
	if n, err := d.Compact(ctx, 10_000, keep); err != nil || n != 5000 {
		t.Fatalf("Compact = %d, %v; want 5000 dropped", n, err)
	}
	size := func() int64 {
		fi, err := os.Stat(d.Path() + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if s := size(); s <= limit {
		t.Fatalf("the -wal after the Compact is %d bytes: the test wants it above the limit, %d", s, limit)
	}
	// A checkpoint (the test's here: SQLite's own runs at a COMMIT that
	// leaves the -wal past 1,000 pages), and the next write starts the
	// -wal over, and cuts it back.
	var busy, frames, copied int
	if err := rawDB(t, d.Path()).QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil || busy != 0 || frames != copied {
		t.Fatalf("checkpoint: busy %d, %d frames, %d copied, %v; want all copied", busy, frames, copied, err)
	}
	if _, err := d.Append(ctx, decision("after")); err != nil {
		t.Fatal(err)
	}
	if s := size(); s > limit {
		t.Fatalf("the -wal after a checkpoint and an Append is %d bytes, above the limit, %d", s, limit)
	}
}

// TestMigrateFromVersion6: a file of schema version 6 opens at the current
// version with its log's records and numbering kept, even past a
// compaction that dropped the highest Seq, and takes the lazy kinds.
func TestMigrateFromVersion6(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v6.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:6] {
		mustExec(t, raw, m)
	}
	for i := range 5 {
		mustExec(t, raw, fmt.Sprintf(`INSERT INTO log (kind, server, channel, state, source, message_id, acknowledgment, at) VALUES ('decision', 's', 'c', 'open', 'v6-%d', '', '', 1)`, i))
	}
	mustExec(t, raw, `DELETE FROM log WHERE seq > 2`) // a compaction dropped 3..5
	mustExec(t, raw, "PRAGMA user_version = 6")
	raw.Close()

	d := openAt(t, path, nil)
	ctx := t.Context()
	if got := sources(t, d); !equal(got, []string{"v6-0", "v6-1"}) {
		t.Errorf("log after the migration = %v, want [v6-0 v6-1]", got)
	}
	recs, err := d.Append(ctx, store.Record{Kind: store.KindLazy, Server: "s", Channel: "dm"}, store.Record{Kind: store.KindLazyGone, Server: "s", Channel: "dm"})
	if err != nil || len(recs) != 2 || recs[0].Seq != 6 || recs[1].Seq != 7 {
		t.Errorf("Append of the lazy kinds after the migration = %+v, %v; want Seqs 6 and 7 (numbering on after 5)", recs, err)
	}
	var v int
	if err := rawDB(t, path).QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Errorf("schema version after the migration = %d (%v), want %d", v, err, SchemaVersion)
	}
}
