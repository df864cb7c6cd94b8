package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openReadOnly is Open with Options.ReadOnly (see the package doc,
// "Read-only"): no lock, no file made, no check, no migration.
func (d *DB) openReadOnly() (*DB, error) {
	f, err := os.Open(d.path)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", d.path, err)
	}
	err = func() error {
		defer f.Close()
		fi, err := f.Stat()
		switch {
		case err != nil:
			return fmt.Errorf("store %s: %w", d.path, err)
		case fi.IsDir():
			// As the writer's open says it.
			return fmt.Errorf("store %s: %w", d.path, &fs.PathError{Op: "open", Path: d.path, Err: syscall.EISDIR})
		case fi.Size() == 0:
			return fmt.Errorf("store %s: the file is empty: no store has been made in it (a read-only open makes none)", d.path)
		}
		return d.checkHeader(f)
	}()
	if err != nil {
		return nil, err
	}

	ctx := context.Background()
	if err := d.readOnlyVersion(ctx); err != nil {
		return nil, err
	}
	if err := d.openReads(ctx); err != nil {
		return nil, err
	}
	go d.refuseWrites()
	return d, nil
}

// readOnlyVersion refuses a file whose schema is not SchemaVersion: a
// read-only open cannot migrate it, and this package's reads are of
// SchemaVersion's tables (their statements would fail to prepare on an
// older one, saying less).
func (d *DB) readOnlyVersion(ctx context.Context) error {
	db, err := sql.Open("sqlite", d.dsn(true))
	if err != nil {
		return d.errf(err, "open")
	}
	defer db.Close()
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return d.openErr(err, "read the schema version")
	}
	switch {
	case v > SchemaVersion:
		return d.tooNew(v)
	case v < SchemaVersion:
		return fmt.Errorf("store %s: the file's schema is version %d, older than this program's (version %d), and a read-only open does not migrate it: open it once for writing (a host does, at its start)", d.path, v, SchemaVersion)
	}
	return nil
}
