package session

import (
	"context"
	"fmt"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// MaxToolPages bounds tools/list paging against a server whose cursor never
// ends.
const MaxToolPages = 1000

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
	cursor := ""
	for range MaxToolPages {
		var page protocol.ListToolsResult
		if err := s.Call(ctx, protocol.MethodToolsList, protocol.ListToolsParams{Cursor: cursor}, &page, opts...); err != nil {
			return tools, err
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			return tools, nil
		}
		if seen[page.NextCursor] {
			return tools, &ListingStoppedError{Reason: fmt.Sprintf("the server repeated the tools/list cursor %q; listing stopped", page.NextCursor)}
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
	return tools, &ListingStoppedError{Reason: fmt.Sprintf("tools/list went past %d pages; listing stopped", MaxToolPages)}
}
