package session

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// MaxToolPages and MaxToolListBytes bound tools/list paging against a
// server whose cursor never ends, or whose pages are huge: the pages'
// bytes together (cursors included).
const (
	MaxToolPages     = 1000
	MaxToolListBytes = 32 << 20
)

// ListingStoppedError says why ListTools stopped before the server said the
// listing was complete: a cursor it had already given, or MaxToolPages.
type ListingStoppedError struct{ Reason string }

func (e *ListingStoppedError) Error() string { return e.Reason }

// ListTools lists the server's tools, following nextCursor. On an error it
// also returns what was listed before it: a failed request is a
// *wire.CallError; a listing that would not end is a *ListingStoppedError.
func (s *Session) ListTools(ctx context.Context, opts ...wire.CallOption) ([]protocol.Tool, error) {
	var tools []protocol.Tool
	seen := map[string]bool{}
	cursor, total := "", 0
	for range MaxToolPages {
		var raw json.RawMessage
		if err := s.Call(ctx, protocol.MethodToolsList, protocol.ListToolsParams{Cursor: cursor}, &raw, opts...); err != nil {
			return tools, err
		}
		if total += len(raw); total > MaxToolListBytes {
			return tools, &ListingStoppedError{Reason: fmt.Sprintf("tools/list went past %d MiB; listing stopped", MaxToolListBytes>>20)}
		}
		var page protocol.ListToolsResult
		if err := json.Unmarshal(raw, &page); err != nil {
			s.log.Warn("the tools/list answer could not be decoded", "error", err.Error())
			return tools, &wire.CallError{Outcome: wire.BadResponse, Cause: wire.CauseBadAnswer, Server: s.cfg.ID, Method: protocol.MethodToolsList, Err: err}
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			return tools, nil
		}
		if seen[page.NextCursor] {
			return tools, &ListingStoppedError{Reason: fmt.Sprintf("the server repeated the tools/list cursor %q; listing stopped", wire.OneLine(page.NextCursor, 100))}
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
	return tools, &ListingStoppedError{Reason: fmt.Sprintf("tools/list went past %d pages; listing stopped", MaxToolPages)}
}
