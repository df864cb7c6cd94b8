package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/mcpl-go/mcpl/store"
)

// TestMigrateFromVersion1: a file of schema version 1 opens at the current
// version with its messages kept, tagless.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, raw, migrations[0])
	mustExec(t, raw, `INSERT INTO inbox (server, channel, message_id, thread_id, body, at) VALUES ('s', 'c', 'm1', '', X'7b7d', 1)`)
	mustExec(t, raw, "PRAGMA user_version = 1")
	raw.Close()
	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var got []store.Message
	d.Messages(t.Context(), 0, func(m store.Message) error {
		got = append(got, m)
		return nil
	})
	if len(got) != 1 || got[0].MessageID != "m1" || got[0].Tags != nil {
		t.Errorf("messages after the migration = %+v", got)
	}
	added, err := d.AddMessages(t.Context(), []store.Message{{Server: "s", Channel: "c", MessageID: "m2", Tags: []string{"chat:dm"}}})
	if err != nil || !added[0] {
		t.Fatalf("AddMessages after the migration: %v %v", added, err)
	}
}

// TestMigrateFromVersion2: a file of schema version 2 opens at the current
// version with its log and messages kept (channel messages, with their
// tags), and takes histories, cursors and push events.
func TestMigrateFromVersion2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:2] {
		mustExec(t, raw, m)
	}
	mustExec(t, raw, `INSERT INTO log (kind, server, channel, state, source, message_id, acknowledgment, at) VALUES ('decision', 's', 'c', 'open', 'v2', '', '', 1)`)
	mustExec(t, raw, `INSERT INTO inbox (server, channel, message_id, thread_id, body, at, tags) VALUES ('s', 'c', 'm1', 't', X'7b7d', 2, '["chat:dm"]')`)
	mustExec(t, raw, "PRAGMA user_version = 2")
	raw.Close()

	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := t.Context()
	if got := sources(t, d); !equal(got, []string{"v2"}) {
		t.Errorf("log after the migration = %v, want [v2]", got)
	}
	var got []store.Message
	if err := d.Messages(ctx, 0, func(m store.Message) error {
		got = append(got, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].MessageID != "m1" || got[0].Kind != store.KindChannelMessage || got[0].FeatureSet != "" ||
		len(got[0].Tags) != 1 || got[0].Tags[0] != "chat:dm" || string(got[0].Body) != "{}" {
		t.Errorf("messages after the migration = %+v", got)
	}
	if cur, err := d.Cursors(ctx); err != nil || len(cur) != 0 {
		t.Errorf("cursors after the migration = %v, %v; want none", cur, err)
	}

	push := store.Message{Server: "s", MessageID: "ev-1", Kind: store.KindPushEvent, FeatureSet: "mcpl.calendar"}
	added, err := d.AddMessages(ctx, []store.Message{push, {Server: "s", Channel: "c", MessageID: "m1"}})
	if err != nil || !added[0] || added[1] {
		t.Fatalf("AddMessages(push, old message) after the migration = %v, %v; want [true false]", added, err)
	}
	out, err := d.Record(ctx, []store.Entry{{Conversation: "agent", Body: []byte(`{"n":1}`)}}, map[string]int64{"agent": 2})
	if err != nil {
		t.Fatalf("Record after the migration: %v", err)
	}
	var hist []store.Entry
	if err := d.History(ctx, "agent", func(e store.Entry) error { hist = append(hist, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Seq != out[0].Seq || string(hist[0].Body) != `{"n":1}` {
		t.Errorf("history after the migration = %+v", hist)
	}
	got = got[:0]
	if err := d.Messages(ctx, 0, func(m store.Message) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Kind != store.KindPushEvent || got[1].FeatureSet != "mcpl.calendar" || got[1].Channel != "" {
		t.Errorf("messages after adding a push event = %+v", got)
	}

	check := rawDB(t, path)
	var v, idx int
	if err := check.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Errorf("schema version after the migration = %d (%v), want %d", v, err, SchemaVersion)
	}
	if err := check.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'history_conversation' AND tbl_name = 'history'`).Scan(&idx); err != nil || idx != 1 {
		t.Errorf("index history_conversation: %d (%v), want it there", idx, err)
	}
}

// The schema refuses what Record refuses, whichever way a row comes in.
func TestSchemaChecksHistoryAndCursors(t *testing.T) {
	d := openTemp(t)
	raw := rawDB(t, d.Path())
	for _, q := range []string{
		`INSERT INTO history (conversation, body, at) VALUES ('', NULL, NULL)`,
		`INSERT INTO cursors (name, position) VALUES ('', 1)`,
		`INSERT INTO cursors (name, position) VALUES ('a', -1)`,
		`INSERT INTO cursors (name, position) VALUES (NULL, 1)`,
		`INSERT INTO cursors (name, position) VALUES ('a', 'x')`,
	} {
		if _, err := raw.Exec(q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
}

// TestMigrateFromVersion8: a file of schema version 8 opens at the current
// version with its messages, their Seqs and the numbering after them, and
// its pruned keys kept; a message's edit of the same message id is added
// as an occurrence of its own (Message.EventID), and a pruned key still
// keeps its message out.
func TestMigrateFromVersion8(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v8.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:8] {
		mustExec(t, raw, m)
	}
	mustExec(t, raw, `INSERT INTO inbox (seq, server, channel, message_id, thread_id, body, at, tags, kind, feature_set, directed) VALUES (7, 's', 'c', 'M', 't', X'7b7d', 2, '["chat:dm"]', '', '', 1)`)
	mustExec(t, raw, `INSERT INTO inbox_pruned (server, channel, message_id, at) VALUES ('s', 'c', 'gone', 1)`)
	mustExec(t, raw, "PRAGMA user_version = 8")
	raw.Close()

	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var got []store.Message
	d.Messages(t.Context(), 0, func(m store.Message) error {
		got = append(got, m)
		return nil
	})
	if len(got) != 1 || got[0].Seq != 7 || got[0].MessageID != "M" || got[0].EventID != "" || !got[0].Directed || got[0].ThreadID != "t" {
		t.Fatalf("messages after the migration = %+v", got)
	}
	msgs := []store.Message{
		{Server: "s", Channel: "c", MessageID: "M"},                  // the same: not added
		{Server: "s", Channel: "c", MessageID: "M", EventID: "edit"}, // an occurrence of its own
		{Server: "s", Channel: "c", MessageID: "gone"},               // pruned: not added
	}
	added, err := d.AddMessages(t.Context(), msgs)
	if err != nil || added[0] || !added[1] || added[2] {
		t.Fatalf("AddMessages after the migration = %v, %v; want [false true false]", added, err)
	}
	if msgs[1].Seq <= 7 {
		t.Errorf("the new message's Seq = %d, want it after 7 (numbering goes on after the kept rows)", msgs[1].Seq)
	}
	page, err := d.Page(t.Context(), store.InboxQuery{Server: "s"})
	if err != nil || len(page) != 2 || page[1].EventID != "edit" {
		t.Fatalf("Page after the migration = %+v, %v", page, err)
	}
}
