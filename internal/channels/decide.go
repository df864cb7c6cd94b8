package channels

import (
	"encoding/json"

	"github.com/mcpl-go/mcpl/store"
)

// The agent's and the host's modules' decisions, as the machine takes
// them: channel_open, channel_close (and a module's machine close),
// channel_decline. Each runs once the channel's earlier decisions are
// durable, records its own (the same-state rule decides whether it
// writes), and only then carries it out and answers.

// toolOutcome is how a channel tool's decision went, for tools.go to
// word.
type toolOutcome struct {
	// missing is why the channel named was not found ("" when it was).
	missing string
	// already: the channel was already in the state asked for, confirmed,
	// with no work queued: nothing was sent.
	already bool
	// unrecorded: the decision could not be recorded; nothing changed.
	unrecorded bool
	// refusal is why a machine close was refused.
	refusal refusal
	// alreadyOpen: a decline of a channel that is open.
	alreadyOpen bool
	// res is the lifecycle work's result, when work was carried out.
	res opResult
	// key is the channel's, when it was found.
	key Key
}

// openTool is channel_open: the agent's open decision, recorded even when
// the channel is open already, then carried out by an op of its own.
func (m *machine) openTool(c *chanState, history json.RawMessage, then func(toolOutcome)) {
	m.whenSettled(c, func() {
		already := wantOpen(c.decision) && c.confirmed && c.open && !c.busy() && history == nil
		m.decide(c, store.Open, SourceAgentTool, func(ok bool) {
			out := toolOutcome{key: c.key, already: already, unrecorded: !ok}
			if !ok || already {
				then(out)
				return
			}
			// An op of its own, never joined to one out: the agent's
			// decision is carried out by its own request, after any
			// other's (an incidental open out fails without it).
			// History asks for a request even on a confirmed channel.
			w := func(res opResult) { out.res = res; then(out) }
			m.enqueue(c, &op{gen: c.gen, history: history, forced: history != nil, waiters: []func(opResult){w}})
		})
	})
}

// closeTool is channel_close (source SourceAgentTool) and a module's
// machine close: the source check comes before the "already closed"
// answer, which records the decision too.
func (m *machine) closeTool(c *chanState, source string, override bool, then func(toolOutcome)) {
	m.whenSettled(c, func() {
		if why := closeRefusal(c.decision, source, override); why != refusalNone {
			then(toolOutcome{key: c.key, refusal: why})
			return
		}
		already := !wantOpen(c.decision) && c.confirmed && !c.open && !c.busy()
		m.decide(c, store.Closed, source, func(ok bool) {
			out := toolOutcome{key: c.key, already: already, unrecorded: !ok}
			if !ok || already {
				then(out)
				return
			}
			m.carryOut(c, func(res opResult) { out.res = res; then(out) })
		})
	})
}

// declineTool is channel_decline's decision: closed/invitation-declined,
// carried out with a close of its own (the server hears the agent stays
// out) where the host directs the lifecycle. Its acknowledgment and its
// record of the decline come after, from the caller.
func (m *machine) declineTool(c *chanState, then func(toolOutcome)) {
	m.whenSettled(c, func() {
		if wantOpen(c.decision) || (c.confirmed && c.open) {
			then(toolOutcome{key: c.key, alreadyOpen: true})
			return
		}
		m.decide(c, store.Closed, SourceInvitationDeclined, func(ok bool) {
			if ok && m.directs(c.key.Server) {
				m.enqueue(c, &op{gen: c.gen, forced: true})
			}
			then(toolOutcome{key: c.key, unrecorded: !ok})
		})
	})
}

// recordDeclined appends a decline's record (the decision is recorded
// already); then gets whether it was written.
func (m *machine) recordDeclined(rec store.Record, then func(ok bool)) {
	m.persist(nil, []store.Record{rec}, func(_ []store.Record, ok bool) { then(ok) })
}
