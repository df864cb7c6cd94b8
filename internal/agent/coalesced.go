package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpl-go/mcpl/store"
)

// Coalesced events (RFC-006), as an agent reads them. The host decides
// what each coalesced push event does to its subject (host/coalesce.go);
// an agent asks it, for each push event it reads, whether the event is
// still to be shown (Env.Coalesced), and, as it assembles a request with
// such events, what each shows then (Env.Assemble): the host renders a
// deferred batch there, leaves out what was withdrawn since the read,
// and consumes the rest, which no later event can then replace.
//
//   - An event withdrawn unread (replaced, retracted) is consumed unseen:
//     it neither shows nor wakes the agent, so a turn whose only cause
//     was replaced or retracted does not start (§4.2).
//   - A replacement's postponement runs from the first occurrence it
//     displaced (Coalesced.Since): a subject replaced faster than the
//     debounce's quiet still wakes the agent within MaxDelay (§4.2's
//     no-starvation rule).
//   - What an agent keeps without a model call (batched events, between
//     turns) is consumed too, since nothing is taken out of a history: so
//     a read with nothing that wakes the agent and a coalesced event that
//     may still change is kept in the inbox, unrecorded, for the next
//     turn, up to HoldBatched after the event came, and while the read
//     leaves nothing out; then it is recorded as any batched read is.

// Coalesced is what the host says of a push event an agent read.
type Coalesced struct {
	// Withdrawn: taken out of delivery unread; never shown.
	Withdrawn bool
	// Tracked: it may still change before a request includes it (be
	// replaced, withdrawn, or, a deferred batch's placeholder, rendered):
	// the request's assembly asks Env.Assemble.
	Tracked bool
	// Since is when the first occurrence it displaced came, directly or
	// through others; zero for none.
	Since time.Time
	// By is the inbox Seq of the occurrence that replaced it, when one
	// did (Withdrawn); 0 for none.
	By int64
}

// Assembled is what a coalesced event shows in the request being
// assembled.
type Assembled struct {
	// Gone: nothing (withdrawn since it was read, or a batch that
	// rendered nothing).
	Gone bool
	// Content is what it shows instead of its own content (a render's
	// result); nil for its own.
	Content []json.RawMessage
}

// HoldBatched bounds how long a read that wakes nothing waits, unrecorded,
// for a turn, because a coalesced event in it may still change.
const HoldBatched = time.Minute

// holds reports whether the runner keeps sel unrecorded (see above), and
// until when.
func (r *runner) holds(sel *selection, notices []string) (time.Time, bool) {
	if len(notices) > 0 || len(sel.left) > 0 || r.woken(sel.items) {
		return time.Time{}, false
	}
	var oldest time.Time
	for _, it := range sel.items {
		if it.co != nil {
			oldest = earliest(oldest, it.co.m.At)
		}
	}
	if oldest.IsZero() {
		return time.Time{}, false
	}
	until := oldest.Add(HoldBatched)
	return until, time.Now().Before(until)
}

// occurrence is what the host knows m by as a coalesced occurrence: its
// EventID, which only coalesced messages and events have ("" for every
// other message).
func occurrence(m store.Message) string { return m.EventID }

// coItem is what an item that shows a coalesced event keeps to be shown
// anew at assembly.
type coItem struct {
	m store.Message
	v verdict
}

// assemble asks the host what each coalesced event of sel shows now, and
// consumes them: those gone leave the selection, those with content of
// the host's are shown with it.
func (r *runner) assemble(ctx context.Context, sel *selection) {
	byServer := map[string][]int{}
	var servers []string
	for i, it := range sel.items {
		if it.co == nil {
			continue
		}
		s := it.co.m.Server
		if byServer[s] == nil {
			servers = append(servers, s)
		}
		byServer[s] = append(byServer[s], i)
	}
	if len(servers) == 0 {
		return
	}
	gone := map[int]bool{}
	for _, s := range servers {
		idx := byServer[s]
		ids := make([]string, len(idx))
		for k, i := range idx {
			ids[k] = occurrence(sel.items[i].co.m)
		}
		got := r.rt.opts.Env.Assemble(ctx, s, ids)
		for k, i := range idx {
			if k >= len(got) {
				break
			}
			switch a := got[k]; {
			case a.Gone:
				gone[i] = true
			case a.Content != nil:
				r.reshow(&sel.items[i], a.Content)
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	kept := sel.items[:0]
	for i, it := range sel.items {
		if !gone[i] {
			kept = append(kept, it)
		}
	}
	clear(sel.items[len(kept):])
	sel.items = kept
}

// reshow renders it again with content in place of its event's own.
func (r *runner) reshow(it *item, content []json.RawMessage) {
	m := it.co.m
	var params map[string]json.RawMessage
	if json.Unmarshal(m.Body, &params) != nil {
		params = map[string]json.RawMessage{}
	}
	payload, _ := json.Marshal(map[string]any{"content": content})
	params["payload"] = payload
	m.Body, _ = json.Marshal(params)
	shown, ok := r.show(m, it.co.v)
	if !ok {
		return
	}
	shown.seq, shown.treat, shown.at, shown.co = it.seq, it.treat, it.at, it.co
	*it = shown
	it.tokens = blocksTokens(it.blocks)
}
