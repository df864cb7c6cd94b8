package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// InUseError is Open's refusal of a store another writer holds: its lock
// file (LockPath, beside the store) is locked by the process PID, 0 when
// the holder has not written its pid yet. Nothing was opened or changed.
type InUseError struct {
	Path     string // the store's file, absolute
	LockPath string // its lock file
	PID      int
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("store %s: in use by another process (%s), which holds its lock file %s", e.Path, e.Holder(), e.LockPath)
}

// Holder names the holding process: "pid 1234", or "its pid is not
// known yet" when it has not written it.
func (e *InUseError) Holder() string {
	if e.PID <= 0 {
		return "its pid is not known yet"
	}
	return fmt.Sprintf("pid %d", e.PID)
}

// CorruptError is Open's refusal of a store whose file is damaged:
// SQLite's PRAGMA quick_check found Problems in it (the first
// maxProblems of them), or failed with Err, a corruption it met while
// checking. Nothing was written to the file.
type CorruptError struct {
	Path     string // the store's file, absolute
	Problems []string
	Err      error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store %s: the file is damaged: %s", e.Path, e.Found())
}

// Found says what the check found: "SQLite's quick_check found: " and
// the problems, or the corruption error it met.
func (e *CorruptError) Found() string {
	what := strings.Join(e.Problems, "; ")
	if e.Err != nil {
		what = e.Err.Error()
	}
	return "SQLite's quick_check found: " + what
}

func (e *CorruptError) Unwrap() error { return e.Err }

// ErrReadOnly is what a write to a DB opened with Options.ReadOnly fails
// with (wrapped, naming the store and the call).
var ErrReadOnly = errors.New("the store was opened read-only: it takes no writes")

// maxProblems is how many of quick_check's findings a CorruptError keeps.
const maxProblems = 5

// quickCheck runs PRAGMA quick_check on db's connection (see the package
// doc, "Damage"): nil for "ok", a *CorruptError for what it found or for
// a corruption error it met; any other failure (a lock held past the busy
// timeout, an I/O error) is returned as it is, wrapped.
func (d *DB) quickCheck(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, fmt.Sprintf("PRAGMA quick_check(%d)", maxProblems))
	if err != nil {
		return d.checkErr(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return d.checkErr(err)
		}
		// A row may be several lines; the first names the database.
		for line := range strings.Lines(s) {
			line = strings.TrimSpace(line)
			if line != "ok" && line != "" && !strings.HasPrefix(line, "*** in database") && len(problems) < maxProblems {
				problems = append(problems, line)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return d.checkErr(err)
	}
	if len(problems) > 0 {
		return &CorruptError{Path: d.path, Problems: problems}
	}
	return nil
}

// checkErr is quickCheck's failure: a *CorruptError when SQLite says the
// file is corrupt, errf's wording otherwise.
func (d *DB) checkErr(err error) error {
	if corrupt(err) {
		return &CorruptError{Path: d.path, Err: err}
	}
	return d.openErr(err, "check the file (PRAGMA quick_check)")
}

// corrupt reports whether err is SQLite's SQLITE_CORRUPT.
func corrupt(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CORRUPT
}

// refuseWrites stands in for the writer goroutine of a read-only DB:
// every call queued fails with ErrReadOnly, and it stops, as run does,
// when the DB is closed and the queue empty.
func (d *DB) refuseWrites() {
	defer close(d.writerDone)
	for {
		batch, ok := d.next()
		if !ok {
			return
		}
		for _, c := range batch {
			if c.state.CompareAndSwap(queued, taken) {
				c.finish(d.errf(ErrReadOnly, "%s", c.what()))
			}
		}
	}
}
