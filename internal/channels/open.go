package channels

import (
	"context"
	"errors"

	"github.com/mcpl-go/mcpl/store"
)

// Incidental opens (seeds/000): speech, channel_publish or a send tool's
// reply into a closed channel records the channel open, with its source,
// and opens it through the queue. When the round-trip fails, the decision
// it replaced is put back, durably, while the record is still the open's
// own; the decision standing then is carried out on the server; and a
// default put back is lifted again against the channel's current
// descriptor and the subscription policy.

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

// openIfClosed makes sure key's channel is open for a delivery or reply
// (source SourceOpenedByDelivery or SourceOpenedByReply), opening it if it
// is closed. Whether the host directs the server's lifecycle is read
// before anything else, as a transport that drops while the open is out
// clears the grant before the failure arrives.
func (r *Registry) openIfClosed(ctx context.Context, c *chanState, source string, who caller) openOutcome {
	srv := r.server(c.key.Server)
	if srv == nil {
		err := &lifecycleError{text: textServerNotFound(c.key.Server), kind: kindNoServer}
		return openOutcome{err: err, reason: err.text}
	}
	if !srv.conn.Has("channels.lifecycle") {
		return openOutcome{noLifecycle: true}
	}
	c.decide.Lock()
	cur := r.decisionOf(c)
	r.mu.Lock()
	busy := c.busyLocked()
	ready := c.confirmed && c.open && !busy
	r.mu.Unlock()
	if wantOpen(cur) || busy {
		// Selected open already (reconfirm its transport if needed), or
		// lifecycle work is queued: join it rather than replace it. An
		// explicit close is never replaced by a delivery.
		c.decide.Unlock()
		if ready {
			return openOutcome{}
		}
		res, err := wait(ctx, r.apply(c, true))
		switch {
		case err != nil:
			return openOutcome{err: err, reason: r.describe(c.key.Server, err)}
		case res.err != nil:
			return openOutcome{err: res.err, reason: r.describe(c.key.Server, res.err)}
		case !res.open:
			return openOutcome{err: errPrevented, reason: textPreventedByLifecycle, prevented: true}
		}
		return openOutcome{}
	}
	rec, replaced, err := r.decideLocked(c, store.Open, source)
	if err != nil {
		c.decide.Unlock()
		return openOutcome{err: err, reason: "this host couldn't record opening the channel, so nothing changed and no open was sent"}
	}
	// Queued before the decide lock goes: a delivery that comes meanwhile
	// finds the lane busy and joins the work behind this open.
	ch := make(chan opResult, 1)
	inc := &incidental{rec: *rec, replaced: replaced, agent: who.agent, tool: who.tool, label: who.label}
	r.mu.Lock()
	queued := r.enqueueLocked(c, &op{gen: c.removals, incidental: inc, waiters: []chan opResult{ch}})
	r.mu.Unlock()
	c.decide.Unlock()
	if !queued {
		// Closing: the open is never sent, so its decision is put back
		// here.
		res := opResult{err: errClosing}
		r.putBack(c, inc, &res)
		return openOutcome{opening: true, err: res.err, reason: r.describe(c.key.Server, res.err), selected: res.selected, openSeq: rec.Seq}
	}
	res, werr := wait(ctx, ch)
	if werr != nil {
		return openOutcome{opening: true, err: werr, reason: r.describe(c.key.Server, werr), openSeq: rec.Seq}
	}
	if res.err != nil {
		return openOutcome{opening: true, err: res.err, reason: r.describe(c.key.Server, res.err), selected: res.selected, overtaken: res.overtaken, openSeq: rec.Seq}
	}
	return openOutcome{opening: true, openSeq: rec.Seq}
}

// caller says who an incidental open is for.
type caller struct {
	agent, tool, label string
}

// errSuperseded is an incidental open that succeeded after a newer
// decision closed the channel: the lane carried out that decision.
var errSuperseded = &lifecycleError{text: textOpenSuperseded, kind: kindSuperseded}

// settleIncidental runs on c's lane when an incidental open's work ends:
// a failure puts back the decision it replaced; an open that a newer
// decision superseded counts as overtaken; and the agent layer gets its
// notice whether or not the caller still waits: the channel opened, or a
// reply's open failed where it would have opened the channel.
func (r *Registry) settleIncidental(c *chanState, inc *incidental, res *opResult) {
	switch {
	case res.err == nil && !res.open:
		res.err, res.overtaken = errSuperseded, true
		return
	case res.err != nil:
		r.putBack(c, inc, res)
	}
	ref := []ChannelRef{{ID: c.key.Channel, Label: inc.label}}
	switch {
	case res.err == nil:
		r.notify(Notice{Kind: NoticeOpened, Cause: inc.rec.Source, Server: c.key.Server, Agent: inc.agent, Channels: ref})
	case inc.rec.Source == SourceOpenedByReply && !res.overtaken:
		reason := r.describe(c.key.Server, res.err)
		r.log.Info("a reply's open of a closed channel failed", "server", c.key.Server, "channel", c.key.Channel, "tool", inc.tool, "selected", res.selected, "error", res.err.Error())
		r.notify(Notice{Kind: NoticeReplyOpenFailed, Cause: SourceOpenedByReply, Server: c.key.Server, Agent: inc.agent, Channels: ref,
			Tool: inc.tool, Opening: true, SelectedForOpening: res.selected, Reason: reason})
	default:
		r.log.Info("an open by delivery failed", "server", c.key.Server, "channel", c.key.Channel, "selected", res.selected, "error", res.err.Error())
	}
}

// wait waits for an op's result, or for ctx. The op goes on without the
// caller.
func wait(ctx context.Context, ch <-chan opResult) (opResult, error) {
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		return opResult{}, ctx.Err()
	}
}

// putBack runs on c's lane after its incidental open failed: res gets
// what the failure leaves.
func (r *Registry) putBack(c *chanState, inc *incidental, res *opResult) {
	c.decide.Lock()
	cur := r.decisionOf(c)
	if cur == nil || cur.Seq != inc.rec.Seq {
		// A decision made during the round-trip (the agent's close, its
		// channel_open) stands.
		c.decide.Unlock()
		res.overtaken = true
		return
	}
	state, source := putBack(inc.replaced)
	if _, err := r.record(store.Record{Kind: store.KindDecision, Server: c.key.Server, Channel: c.key.Channel, State: state, Source: source}); err != nil {
		// The decision stays and no close is sent: the channel stays
		// selected for opening, and the failure says so.
		c.decide.Unlock()
		res.selected = SelectedUnrecorded
		return
	}
	if source == SourceDefaultClosed {
		res.selected = r.liftLocked(c)
	}
	c.decide.Unlock()
	// The failed request may have reached the server: carry out the
	// decision standing now, unless queued work will (work queued before
	// the registrations were removed does not: it cancels).
	r.mu.Lock()
	if !c.lane.queuedFor(c.removals) {
		r.enqueueLocked(c, &op{gen: c.removals})
	}
	r.mu.Unlock()
}

// liftLocked runs the lift rule against c's current descriptor and the
// subscription policy, under c's decide lock, and returns the source of
// an open it recorded ("" when none). A lift that can't be recorded
// leaves the default.
func (r *Registry) liftLocked(c *chanState) string {
	r.mu.Lock()
	e, srv := c.entry, r.servers[c.key.Server]
	cur := c.decision
	r.mu.Unlock()
	if e == nil || srv == nil {
		return ""
	}
	state, source, ok := initial(cur, e.desc, srv.admits(c.key.Channel))
	if !ok || state != store.Open {
		return ""
	}
	if _, err := r.record(store.Record{Kind: store.KindDecision, Server: c.key.Server, Channel: c.key.Channel, State: state, Source: source}); err != nil {
		return ""
	}
	return source
}

func (s *serverState) admits(channel string) bool {
	return s.cfg.Admits != nil && s.cfg.Admits(channel)
}
