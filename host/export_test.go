package host

import (
	"context"
	"encoding/json"

	"github.com/mcpl-go/mcpl/internal/coalesce"
	"github.com/mcpl-go/mcpl/store"
)

// ForgetCoalescing empties the coalescing state kept in st, as a host that
// lost it (its state, not its inbox or histories): the corpus's
// restartWithoutHistory.
func ForgetCoalescing(st store.Store) error {
	b, err := json.Marshal(coState{Table: coalesce.New(coalesce.Options{}).Export()})
	if err != nil {
		return err
	}
	return st.SaveState(context.Background(), coStateName, b)
}

// CoalescedContext says what the host keeps of server's inbox row whose
// EventID is occ for a model: shown reports whether it is context at all (not
// withdrawn, and not a deferred batch's placeholder still to render), and
// content is what it shows instead of its own (a render's result), nil
// for its own. For the coalescing corpus's allContextText.
func (h *Host) CoalescedContext(server, occ string) (shown bool, content []json.RawMessage) {
	c := h.coalescer
	binding, eventID := c.resolve(server, occ)
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.row(binding, eventID)
	if r == nil {
		return true, nil
	}
	if r.Withdrawn {
		return false, nil
	}
	if r.Materialized {
		return true, r.Content
	}
	_, kind, tracked := c.tab.Occurrence(binding, eventID)
	return !tracked || kind == coalesce.KindOccupant, nil
}
