package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are the schema's versions: migrations[i] takes a database at
// version i to version i+1. The version is kept in PRAGMA user_version (0
// for a new file). A migration is appended, never edited once released:
// files in the field are at every version it ever had.
//
// Version 1:
//
//   - log is the lifecycle log. seq is AUTOINCREMENT, so a seq is never
//     reused, not even after the newest records are gone. at is the
//     record's time in Unix nanoseconds (UTC), NULL for the zero time. The
//     CHECKs refuse what store.Record.Validate refuses, in case a record
//     comes in by another way than DB.Append.
//   - inbox is the message inbox, one row per (server, channel,
//     message_id): a duplicate is refused by the UNIQUE constraint, which
//     AddMessages turns into "not added". body is the message's JSON as
//     sent, NULL for none.
//
// Both are STRICT tables: a value of the wrong type is an error, not a
// silent conversion.
//
// Version 2:
//
//   - inbox.tags holds a message's event tags, closed at receipt, as a
//     JSON array ('[]' for none, and for the messages version 1 kept).
//
// Version 3:
//
//   - history is every conversation's history (store.Entry), one row an
//     entry. seq is AUTOINCREMENT, numbering across conversations, never
//     reused. body is the entry's encoding as recorded, NULL for none; at
//     is as in log. history_conversation serves DB.History's reading of
//     one conversation in seq order.
//   - cursors holds the positions DB.Record sets, one row a name, updated
//     in place.
//   - inbox.kind is the message's store.Message.Kind: empty for a
//     channel message (and for the messages version 2 kept), 'push' for a
//     push event. inbox.feature_set is a push event's feature set, empty
//     for a channel message. Dedupe stays by (server, channel,
//     message_id): a push event has an empty channel and its eventId for
//     message_id.
//
// history and cursors are STRICT tables, as log and inbox are, and their
// CHECKs refuse what DB.Record refuses, as log's do what DB.Append does.
//
// Version 4:
//
//   - inbox_server and inbox_server_channel index the inbox by server,
//     and by server and channel, each in seq order, so that DB.Page's
//     query of one server's or one channel's messages (a channel of ""
//     being the server's push events) is a range scan of its index from
//     After. They cost every AddMessages two more index entries a
//     message.
//
// Version 5:
//
//   - inbox.directed is store.Message.Directed: 1 when this host directed
//     the message's server's channels (channels.lifecycle) as it accepted
//     it, 0 when not (and for the messages version 4 kept, whose servers'
//     grants are not known: the agent layer judges those as from a server
//     that ran its own channels, should their channels be gone).
//
// Version 6:
//
//   - inbox_pruned keeps the dedupe key (server, channel, message_id) of
//     each message DB.PruneInbox dropped, with the message's at, so that
//     AddMessages still reports a message sent again after pruning as not
//     added; at (0 for the zero time) is what PruneQuery.KeysBefore
//     forgets keys by, through inbox_pruned_at. A key is some 60 bytes
//     against a message's several hundred.
//
// Version 7:
//
//   - log.kind also takes 'lazy-registered' and 'lazy-gone'
//     (store.KindLazy, store.KindLazyGone). SQLite can't change a CHECK,
//     so the log is made anew with its rows and its sqlite_sequence entry
//     (Append numbers on after the highest Seq ever given, compacted away
//     or not); the rename carries the entry to the new name.
//
// Version 8:
//
//   - states holds DB.SaveState's bodies, one row a name, replaced
//     whole (the host's coalescing table, RFC-006).
//
// Version 9:
//
//   - inbox.event_id is store.Message.EventID, empty for the messages
//     version 8 kept, and the dedupe key is (server, channel, message_id,
//     event_id): a coalesced message's edit shares its create's
//     message_id (RFC-006 §3.1). SQLite can't change a UNIQUE constraint,
//     so inbox and inbox_pruned are made anew with their rows (inbox's
//     sqlite_sequence entry carried, as log's was in version 7), and
//     inbox's indexes made again.
//
// Nothing in version 4 is for DB.Compact: it works on log's rowid (seq)
// alone, and an index on log would only make it and Append slower. A
// migration that adds a column to log adds it to logColumns too, which
// compaction copies.
var migrations = []string{
	`CREATE TABLE log (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		kind TEXT NOT NULL CHECK (kind IN ('decision', 'invitation-declined')),
		server TEXT NOT NULL,
		channel TEXT NOT NULL,
		state TEXT NOT NULL CHECK (state IN ('open', 'closed', '')),
		source TEXT NOT NULL,
		message_id TEXT NOT NULL,
		acknowledgment TEXT NOT NULL,
		at INTEGER
	) STRICT;
	CREATE TABLE inbox (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		server TEXT NOT NULL,
		channel TEXT NOT NULL,
		message_id TEXT NOT NULL,
		thread_id TEXT NOT NULL,
		body BLOB,
		at INTEGER,
		UNIQUE (server, channel, message_id)
	) STRICT;`,
	`ALTER TABLE inbox ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';`,
	`CREATE TABLE history (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		conversation TEXT NOT NULL CHECK (conversation <> ''),
		body BLOB,
		at INTEGER
	) STRICT;
	CREATE INDEX history_conversation ON history (conversation, seq);
	CREATE TABLE cursors (
		name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
		position INTEGER NOT NULL CHECK (position >= 0)
	) STRICT;
	ALTER TABLE inbox ADD COLUMN kind TEXT NOT NULL DEFAULT '';
	ALTER TABLE inbox ADD COLUMN feature_set TEXT NOT NULL DEFAULT '';`,
	`CREATE INDEX inbox_server ON inbox (server, seq);
	CREATE INDEX inbox_server_channel ON inbox (server, channel, seq);`,
	`ALTER TABLE inbox ADD COLUMN directed INTEGER NOT NULL DEFAULT 0 CHECK (directed IN (0, 1));`,
	`CREATE TABLE inbox_pruned (
		server TEXT NOT NULL,
		channel TEXT NOT NULL,
		message_id TEXT NOT NULL,
		at INTEGER NOT NULL,
		PRIMARY KEY (server, channel, message_id)
	) STRICT, WITHOUT ROWID;
	CREATE INDEX inbox_pruned_at ON inbox_pruned (at);`,
	`CREATE TABLE log_v7 (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		kind TEXT NOT NULL CHECK (kind IN ('decision', 'invitation-declined', 'lazy-registered', 'lazy-gone')),
		server TEXT NOT NULL,
		channel TEXT NOT NULL,
		state TEXT NOT NULL CHECK (state IN ('open', 'closed', '')),
		source TEXT NOT NULL,
		message_id TEXT NOT NULL,
		acknowledgment TEXT NOT NULL,
		at INTEGER
	) STRICT;
	INSERT INTO log_v7 (` + logColumns + `) SELECT ` + logColumns + ` FROM log ORDER BY seq;
	DELETE FROM sqlite_sequence WHERE name = 'log_v7';
	INSERT INTO sqlite_sequence (name, seq) SELECT 'log_v7', seq FROM sqlite_sequence WHERE name = 'log';
	DROP TABLE log;
	ALTER TABLE log_v7 RENAME TO log;`,
	`CREATE TABLE states (
		name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
		body BLOB NOT NULL
	) STRICT;`,
	`CREATE TABLE inbox_v9 (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		server TEXT NOT NULL,
		channel TEXT NOT NULL,
		message_id TEXT NOT NULL,
		thread_id TEXT NOT NULL,
		body BLOB,
		at INTEGER,
		tags TEXT NOT NULL DEFAULT '[]',
		kind TEXT NOT NULL DEFAULT '',
		feature_set TEXT NOT NULL DEFAULT '',
		directed INTEGER NOT NULL DEFAULT 0 CHECK (directed IN (0, 1)),
		event_id TEXT NOT NULL DEFAULT '',
		UNIQUE (server, channel, message_id, event_id)
	) STRICT;
	INSERT INTO inbox_v9 (seq, server, channel, message_id, thread_id, body, at, tags, kind, feature_set, directed)
		SELECT seq, server, channel, message_id, thread_id, body, at, tags, kind, feature_set, directed FROM inbox ORDER BY seq;
	DELETE FROM sqlite_sequence WHERE name = 'inbox_v9';
	INSERT INTO sqlite_sequence (name, seq) SELECT 'inbox_v9', seq FROM sqlite_sequence WHERE name = 'inbox';
	DROP TABLE inbox;
	ALTER TABLE inbox_v9 RENAME TO inbox;
	CREATE INDEX inbox_server ON inbox (server, seq);
	CREATE INDEX inbox_server_channel ON inbox (server, channel, seq);
	CREATE TABLE inbox_pruned_v9 (
		server TEXT NOT NULL,
		channel TEXT NOT NULL,
		message_id TEXT NOT NULL,
		event_id TEXT NOT NULL DEFAULT '',
		at INTEGER NOT NULL,
		PRIMARY KEY (server, channel, message_id, event_id)
	) STRICT, WITHOUT ROWID;
	INSERT INTO inbox_pruned_v9 (server, channel, message_id, at) SELECT server, channel, message_id, at FROM inbox_pruned;
	DROP TABLE inbox_pruned;
	ALTER TABLE inbox_pruned_v9 RENAME TO inbox_pruned;
	CREATE INDEX inbox_pruned_at ON inbox_pruned (at);`,
}

// SchemaVersion is the schema version this package writes and the newest
// it can open.
const SchemaVersion = 9

func init() {
	if len(migrations) != SchemaVersion {
		panic("store/sqlite: SchemaVersion is not len(migrations)")
	}
}

// migrate brings the database on conn to SchemaVersion, all the missing
// migrations in one transaction, so a crash leaves it at the version it
// had or at SchemaVersion. A database newer than SchemaVersion is refused
// and left untouched.
func (d *DB) migrate(ctx context.Context, conn *sql.Conn) error {
	version, err := userVersion(ctx, conn)
	if err != nil {
		return d.errf(err, "read the schema version")
	}
	if version > SchemaVersion {
		return d.tooNew(version)
	}
	if version == SchemaVersion {
		return nil
	}
	// Another process may be migrating the same file: take the write lock
	// first, then read the version again under it.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return d.errf(err, "begin the schema migration")
	}
	err = func() error {
		version, err := userVersion(ctx, conn)
		if err != nil {
			return d.errf(err, "read the schema version")
		}
		if version > SchemaVersion {
			return d.tooNew(version)
		}
		for v := version; v < SchemaVersion; v++ {
			if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
				return d.errf(err, "migrate the schema from version %d to %d", v, v+1)
			}
		}
		// PRAGMA takes no parameters; the version is a constant here.
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
			return d.errf(err, "set the schema version to %d", SchemaVersion)
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			return d.errf(err, "commit the schema migration from version %d to %d", version, SchemaVersion)
		}
		return nil
	}()
	if err != nil {
		// The transaction may be gone already (a failed COMMIT can end it);
		// the error that matters is err.
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
	}
	return err
}

func (d *DB) tooNew(version int) error {
	return fmt.Errorf("store %s: the file's schema is version %d, newer than this program knows (version %d): use a newer mcpl, or another file", d.path, version, SchemaVersion)
}

func userVersion(ctx context.Context, conn *sql.Conn) (int, error) {
	var v int
	err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}
