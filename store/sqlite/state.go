package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mcpl-go/mcpl/store"
)

// SaveState implements store.Store. It goes through the writer like
// DropCursors: in a SAVEPOINT of a group commit, returning after the
// COMMIT.
func (d *DB) SaveState(ctx context.Context, name string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%w: a state with no name", store.ErrInvalid)
	}
	if body == nil {
		body = []byte{} // NOT NULL: an empty body is kept as empty
	}
	return d.do(&call{ctx: ctx, kind: stateCall, saved: &namedState{name: name, body: body}, size: len(name) + len(body)})
}

// LoadState implements store.Store.
func (d *DB) LoadState(ctx context.Context, name string) ([]byte, bool, error) {
	if err := d.readable(ctx, "read a state"); err != nil {
		return nil, false, err
	}
	var body []byte
	err := d.loadState.QueryRowContext(ctx, name).Scan(&body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, d.readErr(ctx, err, "read the state %q", name)
	}
	return body, true, nil
}
