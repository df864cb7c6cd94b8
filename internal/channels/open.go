package channels

import (
	"errors"
	"log/slog"

	"github.com/mcpl-go/mcpl/store"
)

// Incidental opens (seeds/000): speech, channel_publish or a send tool's
// reply into a closed channel records the channel open, with its source,
// and opens it through the lane. When the round-trip fails, the decision
// it replaced is put back, durably, while the record is still the open's
// own; the decision standing then is carried out on the server; and a
// default put back is lifted again against the channel's current
// descriptor and the subscription policy. All of it happens on the
// channel's lane before anything else runs there.

// openOutcome is how an incidental open went.
type openOutcome struct {
	// opening: the open recorded the channel open over a decision that
	// was not (it would have opened a channel not selected open).
	opening bool
	// noLifecycle: the host does not direct the server's channels, so
	// nothing was recorded or sent.
	noLifecycle bool
	// err is the failure, reason its words for an agent; selected says
	// why the channel is selected for opening after it; overtaken that a
	// decision made while the open was out stands.
	err       error
	reason    string
	selected  string
	overtaken bool
	// openSeq is the open's own record, when it wrote one (for the
	// invariant tests: after a failure the record must be newer).
	openSeq int64
	// prevented: the channel was decided closed with lifecycle work
	// queued; the delivery waited for it and it left the channel closed.
	// No open was sent.
	prevented bool
}

// errPrevented is the failure of a delivery that waited on lifecycle work
// that left the channel closed.
var errPrevented = errors.New(textPreventedByLifecycle)

// errOpenUnrecorded is an incidental open whose decision couldn't be
// recorded.
var errOpenUnrecorded = errors.New(textOpenUnrecordedReason)

// caller says who an incidental open is for.
type caller struct {
	agent, tool, label string
}

// incidental is an open by delivery or reply.
type incidental struct {
	rec      store.Record  // the decision the open recorded
	replaced *store.Record // the decision it replaced; nil when none
	who      caller
	// then gets how the open went, once it has settled.
	then func(openOutcome)
}

// errSuperseded is an incidental open that succeeded after a newer
// decision closed the channel: the lane carried out that decision.
var errSuperseded = &lifecycleError{text: textOpenSuperseded, kind: kindSuperseded}

// ensureOpen makes sure key's channel is open for a delivery or reply
// (source SourceOpenedByDelivery or SourceOpenedByReply), opening it if
// it is closed; then gets the outcome. Whether the host directs the
// server's lifecycle is read before anything else, as a transport that
// drops while the open is out clears the grant before the failure
// arrives.
func (m *machine) ensureOpen(key Key, source string, who caller, then func(openOutcome)) {
	if !m.hasServer(key.Server) {
		err := &lifecycleError{text: textServerNotFound(key.Server), kind: kindNoServer}
		then(openOutcome{err: err, reason: err.text})
		return
	}
	if !m.has(key.Server, "channels.lifecycle") {
		then(openOutcome{noLifecycle: true})
		return
	}
	c := m.chans[key]
	if c == nil || !c.registered {
		err := &lifecycleError{text: textNoLongerRegistered(key.Channel), kind: kindGone}
		then(openOutcome{err: err, reason: err.text})
		return
	}
	m.whenSettled(c, func() { m.ensureOpenSettled(c, source, who, then) })
}

func (m *machine) ensureOpenSettled(c *chanState, source string, who caller, then func(openOutcome)) {
	if !c.registered {
		err := &lifecycleError{text: textNoLongerRegistered(c.key.Channel), kind: kindGone}
		then(openOutcome{err: err, reason: err.text})
		return
	}
	cur := c.decision
	if wantOpen(cur) || (!isDefault(cur) && c.busy()) {
		// Selected open already (reconfirm its transport if needed), or
		// a real closed decision with lifecycle work queued: join that
		// work rather than replace it. An explicit close is never
		// replaced by a delivery; the host's own default close is.
		if wantOpen(cur) && c.confirmed && c.open && !c.busy() {
			then(openOutcome{})
			return
		}
		m.carryOut(c, func(res opResult) {
			switch {
			case res.err != nil:
				then(openOutcome{err: res.err, reason: m.describe(c.key.Server, res.err)})
			case !res.open:
				then(openOutcome{err: errPrevented, reason: textPreventedByLifecycle, prevented: true})
			case !wantOpen(c.decision):
				// The open it joined succeeded, but a newer decision (the
				// agent's close) came while it was out: nothing is posted
				// into a channel the agent closed.
				then(openOutcome{err: errSuperseded, reason: errSuperseded.text})
			default:
				then(openOutcome{})
			}
		})
		return
	}
	m.persist([]*chanState{c}, []store.Record{decisionRec(c, store.Open, source)}, func(recs []store.Record, ok bool) {
		if !ok {
			if source == SourceOpenedByReply {
				// seeds/000: a reply's failed opening is told, this one
				// too: the reply went out, and the channel stays closed.
				m.notify(Notice{Kind: NoticeReplyOpenFailed, Cause: SourceOpenedByReply, Server: c.key.Server, Agent: who.agent,
					Channels: []ChannelRef{{ID: c.key.Channel, Label: who.label}}, Tool: who.tool, Opening: true, Reason: textOpenUnrecordedReason})
			}
			then(openOutcome{err: errOpenUnrecorded, reason: textOpenUnrecordedReason})
			return
		}
		inc := &incidental{rec: recs[0], replaced: cur, who: who, then: then}
		if !m.enqueue(c, &op{gen: c.gen, inc: inc}) {
			// Closing: the open is never sent, so its decision is put
			// back here.
			m.putBack(c, inc, opResult{err: errClosing}, func(res opResult) { then(m.outcome(c, inc, res)) })
		}
	})
}

// outcome is how an incidental open that settled with res reads to its
// caller.
func (m *machine) outcome(c *chanState, inc *incidental, res opResult) openOutcome {
	if res.err != nil {
		return openOutcome{opening: true, err: res.err, reason: m.describe(c.key.Server, res.err), selected: res.selected, overtaken: res.overtaken, openSeq: inc.rec.Seq}
	}
	return openOutcome{opening: true, openSeq: inc.rec.Seq}
}

// settleIncidental runs on c's lane when an incidental open's request has
// ended, once the decisions made meanwhile are durable: a failure puts
// back the decision it replaced; an open that a newer decision superseded
// counts as overtaken; and the agent layer gets its notice whether or not
// the caller still waits: the channel opened, or a reply's open failed
// where it would have opened the channel.
func (m *machine) settleIncidental(c *chanState, o *op, res opResult) {
	o.settling = true
	m.whenSettled(c, func() {
		inc := o.inc
		switch {
		case res.err == nil && res.open && wantOpen(c.decision):
			m.notify(Notice{Kind: NoticeOpened, Cause: inc.rec.Source, Server: c.key.Server, Agent: inc.who.agent, Channels: inc.ref(c)})
			m.settled(c, o, res)
		case res.err == nil:
			res.err, res.overtaken = errSuperseded, true
			m.settled(c, o, res)
		default:
			m.putBack(c, inc, res, func(res opResult) {
				if len(o.waiters) > 0 && res.selected != SelectedUnrecorded && !res.overtaken {
					// Those who joined the failed open wait for the work
					// that carries out the put-back.
					if n := len(c.lane.queue); n > 0 && c.lane.queue[n-1].gen == c.gen {
						last := c.lane.queue[n-1]
						last.waiters = append(last.waiters, o.waiters...)
						o.waiters = nil
					}
				}
				m.tellFailed(c, inc, res)
				m.settled(c, o, res)
			})
		}
	})
}

// settled gives an incidental open's caller its outcome and ends its op.
func (m *machine) settled(c *chanState, o *op, res opResult) {
	o.inc.then(m.outcome(c, o.inc, res))
	m.done(c, o, res)
}

func (inc *incidental) ref(c *chanState) []ChannelRef {
	return []ChannelRef{{ID: c.key.Channel, Label: inc.who.label}}
}

// tellFailed logs a failed incidental open, and gives a reply's its
// notice.
func (m *machine) tellFailed(c *chanState, inc *incidental, res opResult) {
	if inc.rec.Source == SourceOpenedByReply && !res.overtaken {
		reason := m.describe(c.key.Server, res.err)
		m.logf(slog.LevelInfo, "a reply's open of a closed channel failed", "server", c.key.Server, "channel", c.key.Channel, "tool", inc.who.tool, "selected", res.selected, "error", res.err.Error())
		m.notify(Notice{Kind: NoticeReplyOpenFailed, Cause: SourceOpenedByReply, Server: c.key.Server, Agent: inc.who.agent, Channels: inc.ref(c),
			Tool: inc.who.tool, Opening: true, SelectedForOpening: res.selected, Reason: reason})
		return
	}
	m.logf(slog.LevelInfo, "an open by delivery failed", "server", c.key.Server, "channel", c.key.Channel, "selected", res.selected, "error", res.err.Error())
}

// putBack undoes inc's failed open: then gets res with what the failure
// leaves (overtaken, or why the channel is selected for opening).
func (m *machine) putBack(c *chanState, inc *incidental, res opResult, then func(opResult)) {
	if c.decision == nil || c.decision.Seq != inc.rec.Seq {
		// A decision made during the round-trip (the agent's close, its
		// channel_open) stands.
		res.overtaken = true
		then(res)
		return
	}
	state, source := putBack(inc.replaced)
	m.persist([]*chanState{c}, []store.Record{decisionRec(c, state, source)}, func(_ []store.Record, ok bool) {
		if !ok {
			// The decision stays and no close is sent: the channel stays
			// selected for opening, and the failure says so.
			res.selected = SelectedUnrecorded
			then(res)
			return
		}
		carry := func(selected string) {
			res.selected = selected
			// The failed request may have reached the server: carry out
			// the decision standing now, unless queued work will (work
			// queued before the registrations were removed does not: it
			// cancels).
			if !c.lane.queuedFor(c.gen) {
				m.enqueue(c, &op{gen: c.gen})
			}
			then(res)
		}
		if source == SourceDefaultClosed {
			m.lift(c, carry)
			return
		}
		carry("")
	})
}

// lift runs the lift rule against c's current descriptor and the
// subscription policy, and gives then the source of an open it recorded
// ("" when none). A lift that can't be recorded leaves the default.
func (m *machine) lift(c *chanState, then func(string)) {
	if !c.registered || !m.hasServer(c.key.Server) {
		then("")
		return
	}
	state, source, ok := initial(c.decision, c.desc, m.admits(c.key.Server, c.key.Channel))
	if !ok || state != store.Open {
		then("")
		return
	}
	m.persist([]*chanState{c}, []store.Record{decisionRec(c, state, source)}, func(_ []store.Record, ok bool) {
		if ok {
			then(source)
			return
		}
		then("")
	})
}
