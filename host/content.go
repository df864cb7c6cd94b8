package host

import (
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/protocol"
)

// ResultText renders a successful result of the tool named name as text
// for a reader that takes text only: text blocks as they are, a
// reference as its stub (registered with this host, bound to the server
// that delivered it, its link never shown), each inline image or audio as
// a line that says so, and every block this host can't show as its
// marker (docs/content.md).
func (h *Host) ResultText(name string, res protocol.CallToolResult) string {
	h.mu.Lock()
	id, _, _ := h.resolveLocked(name)
	h.mu.Unlock()
	lane := content.Lane{Server: id, Provenance: content.ProvenanceToolResult, Refs: h.refs}
	return content.PlainText(lane.View(res.Content))
}
