package channels

import (
	"encoding/json"
	"errors"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// The lifecycle queue: one serial lane per channel, so channels never wait
// on each other, and one channel's opens and closes go out in order. Each
// operation carries out the channel's decision as it stands when it runs,
// not as it stood when it was queued.

// op is one lifecycle operation.
type op struct {
	// gen is the channel's removal count when the op was queued: an op
	// from before its registrations were removed is cancelled.
	gen int
	// history is channel_open's history request, sent with channels/open.
	history json.RawMessage
	// incidental is set for an open by delivery or reply: its failure
	// puts back the decision it replaced.
	incidental *incidental
	// waiters get the op's result; none for fire-and-forget work.
	waiters []chan opResult
}

// incidental is an open by delivery or reply.
type incidental struct {
	rec      store.Record  // the decision the open recorded
	replaced *store.Record // the decision it replaced; nil when none
	// Who it was for, for the notice the lane gives when it ends: the
	// agent, the send tool (a reply's), the channel's label.
	agent, tool, label string
}

// opResult is how an op ended.
type opResult struct {
	open   bool            // the server confirmed the channel open
	answer json.RawMessage // channels/open's answer
	err    error
	// For an incidental open that failed:
	overtaken bool   // a decision made while it was out stands
	selected  string // why the channel is selected for opening after it ("" when not)
}

// lane is a channel's queue.
type lane struct {
	queue   []*op
	running bool
}

// queuedFor reports whether ops queued at removal count gen wait in the
// lane (the running one aside).
func (l *lane) queuedFor(gen int) bool {
	for _, o := range l.queue {
		if o.gen == gen {
			return true
		}
	}
	return false
}

// busyLocked reports whether lifecycle work that counts is running or
// queued on c.
func (c *chanState) busyLocked() bool {
	return c.lane.running || c.lane.queuedFor(c.removals)
}

// errClosing is the failure of work refused because the registry is
// closing.
var errClosing = errors.New("this host is shutting down")

// enqueueLocked queues o on c's lane and starts the lane if it is idle;
// it reports whether it did. After Close it does not, and the op's
// waiters get errClosing.
func (r *Registry) enqueueLocked(c *chanState, o *op) bool {
	if r.closed {
		for _, w := range o.waiters {
			w <- opResult{err: errClosing}
		}
		return false
	}
	c.lane.queue = append(c.lane.queue, o)
	if c.lane.running {
		return true
	}
	c.lane.running = true
	r.wg.Add(1)
	go r.runLane(c)
	return true
}

// apply queues work that carries out c's decision; with wait, the result
// comes on the channel returned. A plain op already queued for the same
// removal count is joined rather than doubled: it reads the decision when
// it runs, so one request serves every waiter.
func (r *Registry) apply(c *chanState, wait bool) <-chan opResult {
	var ch chan opResult
	if wait {
		ch = make(chan opResult, 1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(c.lane.queue); n > 0 {
		last := c.lane.queue[n-1]
		if last.gen == c.removals && last.incidental == nil && last.history == nil {
			if ch != nil {
				last.waiters = append(last.waiters, ch)
			}
			return ch
		}
	}
	o := &op{gen: c.removals}
	if ch != nil {
		o.waiters = []chan opResult{ch}
	}
	r.enqueueLocked(c, o)
	return ch
}

// runLane runs c's ops in order until the lane is empty.
func (r *Registry) runLane(c *chanState) {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		if len(c.lane.queue) == 0 {
			c.lane.running = false
			r.mu.Unlock()
			return
		}
		o := c.lane.queue[0]
		c.lane.queue = c.lane.queue[1:]
		r.mu.Unlock()
		res := r.carryOut(c, o)
		if o.incidental != nil {
			r.settleIncidental(c, o.incidental, &res)
		}
		if res.err != nil && len(o.waiters) == 0 && o.incidental == nil {
			r.logFailed(c, res.err)
		}
		for _, w := range o.waiters {
			w <- res
		}
	}
}

// logFailed logs queued work no one waits for that failed, naming the
// decision it was carrying out.
func (r *Registry) logFailed(c *chanState, err error) {
	d := r.decisionOf(c)
	want := store.Closed
	if wantOpen(d) {
		want = store.Open
	}
	r.log.Warn("channel lifecycle work failed", "server", c.key.Server, "channel", c.key.Channel, "decision", string(want), "error", err.Error())
}

// carryOut sends the request c's decision calls for, and repeats it while
// the decision or the target changes under it, up to MaxAttempts.
func (r *Registry) carryOut(c *chanState, o *op) opResult {
	for range MaxAttempts {
		r.mu.Lock()
		e := c.entry
		if e == nil || c.removals != o.gen {
			r.mu.Unlock()
			return opResult{err: &lifecycleError{text: textNoLongerRegistered(c.key.Channel), kind: kindGone}}
		}
		srv := r.servers[c.key.Server]
		if srv == nil {
			r.mu.Unlock()
			return opResult{err: &lifecycleError{text: textServerNotFound(c.key.Server), kind: kindNoServer}}
		}
		want, target := wantOpen(c.decision), c.target
		r.mu.Unlock()
		if !srv.conn.Has("channels.lifecycle") {
			return opResult{err: &lifecycleError{text: textNoLifecycle(c.key.Server), kind: kindNoGrant}}
		}
		answer, err := r.send(srv, e, want, o.history)
		r.mu.Lock()
		if c.entry == nil || c.removals != o.gen {
			// Removed meanwhile: the work is cancelled, and a failure
			// is reported as what it was.
			c.confirmed = false
			r.mu.Unlock()
			if err != nil {
				return opResult{err: err}
			}
			return opResult{err: &lifecycleError{text: textNoLongerRegistered(c.key.Channel), kind: kindGone}}
		}
		if c.target != target {
			// Retargeted meanwhile: a stale answer is never applied.
			c.confirmed = false
			r.mu.Unlock()
			continue
		}
		if err != nil {
			c.confirmed = false
			r.mu.Unlock()
			return opResult{err: err}
		}
		if want {
			if other, ok := substituted(c.key.Channel, answer); ok {
				c.confirmed = false
				r.mu.Unlock()
				r.substitution(srv, c.key, other)
				return opResult{err: &lifecycleError{text: textSubstituted(c.key.Server, c.key.Channel), kind: kindSubstituted}}
			}
		}
		c.confirmed, c.open = true, want
		again := wantOpen(c.decision) != want
		r.mu.Unlock()
		if !again {
			return opResult{open: want, answer: answer}
		}
	}
	r.log.Warn("channel did not converge", "server", c.key.Server, "channel", c.key.Channel, "attempts", MaxAttempts)
	return opResult{err: &lifecycleError{text: textNotConverged(c.key.Channel, MaxAttempts), kind: kindNotConverged}}
}

// openParams is channels/open as this host sends it: the channel by id,
// with its type and address, and channel_open's history request.
type openParams struct {
	ChannelID string          `json:"channelId"`
	Type      string          `json:"type,omitempty"`
	Address   json.RawMessage `json:"address,omitempty"`
	History   json.RawMessage `json:"history,omitempty"`
}

// send sends channels/open or channels/close for e, under the server's
// lifecycle deadline, which holds even when requestTimeout is 0.
func (r *Registry) send(srv *serverState, e *entry, open bool, history json.RawMessage) (json.RawMessage, error) {
	var answer json.RawMessage
	if open {
		p := openParams{ChannelID: e.desc.ID, Type: e.desc.Type, Address: e.desc.Address, History: history}
		return answer, srv.conn.Call(r.ctx, protocol.MethodChannelsOpen, p, &answer, srv.cfg.Timeout)
	}
	return answer, srv.conn.Call(r.ctx, protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: e.desc.ID}, &answer, srv.cfg.Timeout)
}

// substituted reports whether a channels/open answer names a channel other
// than id: its channel, or a history item's.
func substituted(id string, answer json.RawMessage) (string, bool) {
	var a struct {
		Channel *struct {
			ID *string `json:"id"`
		} `json:"channel"`
		History []struct {
			ChannelID *string `json:"channelId"`
		} `json:"history"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return "", false
	}
	if a.Channel != nil && a.Channel.ID != nil && *a.Channel.ID != id && *a.Channel.ID != "" {
		return *a.Channel.ID, true
	}
	for _, h := range a.History {
		if h.ChannelID != nil && *h.ChannelID != id {
			return *h.ChannelID, true
		}
	}
	return "", false
}

// substitution handles an open answered for another channel: the
// requested one is not marked open, and the other, if registered and
// decided closed, is closed through its own queue.
func (r *Registry) substitution(srv *serverState, requested Key, answered string) {
	r.log.Warn("channel open substituted", "server", srv.id, "requested", requested.Channel, "answered", quoteID(answered))
	other := Key{Server: requested.Server, Channel: answered}
	r.mu.Lock()
	c := r.chans[other]
	closeIt := c != nil && c.entry != nil && !wantOpen(c.decision)
	r.mu.Unlock()
	if closeIt {
		r.apply(c, false)
	}
}

// quoteID keeps a long id from filling a log line.
func quoteID(id string) string { return wire.Cut(id, 200) }
