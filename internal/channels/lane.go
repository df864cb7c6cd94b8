package channels

import (
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/store"
)

// The lifecycle lane: one per channel, in the machine, so channels never
// wait on each other and one channel's opens and closes go out in order,
// one request at a time. Each op carries out the channel's decision as it
// stands when it runs, not as it stood when it was queued. Work that wants
// what the op out will produce joins it, and a plain op that finds the
// channel already confirmed in the wanted state sends nothing: only an
// intent that needs the request itself (channel_open's history, a
// decline's close) is forced to send it.

// op is one lifecycle operation.
type op struct {
	id int64
	// gen is the channel's removal count when the op was queued: an op
	// from before its registrations were removed is cancelled.
	gen int
	// history is channel_open's history request, sent with channels/open.
	history json.RawMessage
	// forced sends the request even when the channel is confirmed in the
	// wanted state.
	forced bool
	// inc is set for an open by delivery or reply: its failure puts back
	// the decision it replaced.
	inc *incidental
	// waiters get the op's result.
	waiters []func(opResult)

	// The request out: its attempt, what it asks, and for which target.
	attempts int
	want     bool
	target   int
	out      bool
	// settling: the op's request has ended, and its put-back is being
	// recorded.
	settling bool
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
	running *op
	queue   []*op
}

func (l *lane) idle() bool { return l.running == nil && len(l.queue) == 0 }

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

// busy reports whether lifecycle work that counts is running or queued on
// c.
func (c *chanState) busy() bool {
	return (c.lane.running != nil && c.lane.running.gen == c.gen) || c.lane.queuedFor(c.gen)
}

// errClosing is the failure of work refused because the registry is
// closing.
var errClosing = errors.New("this host is shutting down")

// enqueue queues o on c's lane and runs the lane; it reports whether it
// did. Once the machine is closing it does not, and o's waiters get
// errClosing.
func (m *machine) enqueue(c *chanState, o *op) bool {
	if m.closing {
		for _, w := range o.waiters {
			w(opResult{err: errClosing})
		}
		return false
	}
	m.ids++
	o.id = m.ids
	c.lane.queue = append(c.lane.queue, o)
	m.runLane(c)
	return true
}

// carryOut queues work that carries out c's decision; w, if not nil, gets
// its result. It joins the op out when that op asks for the state the
// decision wants, for the registration's current target, and nothing
// waits behind it; else the plain op queued last: one request serves
// every waiter.
func (m *machine) carryOut(c *chanState, w func(opResult)) {
	want := wantOpen(c.decision)
	if r := c.lane.running; r != nil && r.gen == c.gen && r.out && r.want == want && r.target == c.target && !c.lane.queuedFor(c.gen) {
		if w != nil {
			r.waiters = append(r.waiters, w)
		}
		return
	}
	if n := len(c.lane.queue); n > 0 {
		if last := c.lane.queue[n-1]; last.gen == c.gen && last.inc == nil && !last.forced {
			if w != nil {
				last.waiters = append(last.waiters, w)
			}
			return
		}
	}
	o := &op{gen: c.gen}
	if w != nil {
		o.waiters = []func(opResult){w}
	}
	m.enqueue(c, o)
}

// runLane starts c's next op while none runs.
func (m *machine) runLane(c *chanState) {
	for c.lane.running == nil && len(c.lane.queue) > 0 {
		o := c.lane.queue[0]
		c.lane.queue = c.lane.queue[1:]
		c.lane.running = o
		m.attempt(c, o, true)
	}
	m.touch(c)
}

// attempt sends the request c's decision calls for, or ends o when none
// is to be sent. first is the op's first attempt: only then does a plain
// op find the channel confirmed and send nothing.
func (m *machine) attempt(c *chanState, o *op, first bool) {
	switch {
	case !c.registered || c.gen != o.gen:
		m.finish(c, o, opResult{err: &lifecycleError{text: textNoLongerRegistered(c.key.Channel), kind: kindGone}})
		return
	case !m.hasServer(c.key.Server):
		m.finish(c, o, opResult{err: &lifecycleError{text: textServerNotFound(c.key.Server), kind: kindNoServer}})
		return
	case !m.has(c.key.Server, "channels.lifecycle"):
		m.finish(c, o, opResult{err: &lifecycleError{text: textNoLifecycle(c.key.Server), kind: kindNoGrant}})
		return
	}
	want := wantOpen(c.decision)
	if first && !o.forced && c.confirmed && c.open == want {
		m.finish(c, o, opResult{open: want})
		return
	}
	if o.attempts == MaxAttempts {
		m.logf(slog.LevelWarn, "channel did not converge", "server", c.key.Server, "channel", c.key.Channel, "attempts", MaxAttempts)
		err := &lifecycleError{text: textNotConverged(c.key.Channel, MaxAttempts), kind: kindNotConverged}
		m.failed(c, want, err)
		m.finish(c, o, opResult{err: err})
		return
	}
	o.attempts++
	o.want, o.target, o.out = want, c.target, true
	m.running++
	s := sendOut{op: o.id, key: c.key, open: want, desc: c.desc}
	if want {
		s.history = o.history
	}
	m.out.Sends = append(m.out.Sends, s)
}

// response steps in the answer to op's request on key: the result or
// err.
func (m *machine) response(key Key, opID int64, answer json.RawMessage, err error) {
	c := m.chans[key]
	if c == nil || c.lane.running == nil || c.lane.running.id != opID || !c.lane.running.out {
		return
	}
	o := c.lane.running
	o.out = false
	m.running--
	switch {
	case !c.registered || c.gen != o.gen:
		// Removed meanwhile: the work is cancelled, and a failure is
		// reported as what it was.
		c.confirmed = false
		if err == nil {
			err = &lifecycleError{text: textNoLongerRegistered(c.key.Channel), kind: kindGone}
		}
		m.finish(c, o, opResult{err: err})
		return
	case c.target != o.target:
		// Retargeted meanwhile: a stale answer is never applied.
		c.confirmed = false
		m.attempt(c, o, false)
		return
	case err != nil:
		c.confirmed = false
		m.failed(c, o.want, err)
		m.finish(c, o, opResult{err: err})
		return
	}
	if o.want {
		if other, ok := substituted(c.key.Channel, answer); ok {
			c.confirmed = false
			m.substitution(c.key, other)
			err := &lifecycleError{text: textSubstituted(c.key.Server, c.key.Channel), kind: kindSubstituted}
			m.failed(c, true, err)
			m.finish(c, o, opResult{err: err})
			return
		}
	}
	c.confirmed, c.open = true, o.want
	c.failure = nil
	m.dirty[c.key] = true
	if o.want && c.lazy {
		m.describeLazy(c, answer)
	}
	if wantOpen(c.decision) != o.want && !c.lane.queuedFor(c.gen) {
		// The decision changed while the request was out, and no queued
		// work will carry it out: go again.
		m.attempt(c, o, false)
		return
	}
	m.finish(c, o, opResult{open: o.want, answer: answer})
}

// finish ends o with res: an incidental open settles first (its put-back
// is recorded before anything else runs on the lane).
func (m *machine) finish(c *chanState, o *op, res opResult) {
	if o.inc != nil {
		m.settleIncidental(c, o, res)
		return
	}
	m.done(c, o, res)
}

// done delivers o's result and runs the lane on. A failure no one waits
// for is logged, naming the state it was carrying out; work that a
// removal cancelled (its registration went, even while its request was
// out) is not a failure, and is not logged.
func (m *machine) done(c *chanState, o *op, res opResult) {
	c.lane.running = nil
	if res.err != nil && len(o.waiters) == 0 && o.inc == nil && !cancelled(res.err) && c.registered && c.gen == o.gen {
		want := wantOpen(c.decision)
		if o.attempts > 0 {
			want = o.want
		}
		state := store.Closed
		if want {
			state = store.Open
		}
		m.logf(slog.LevelWarn, "channel lifecycle work failed", "server", c.key.Server, "channel", c.key.Channel, "decision", string(state), "error", res.err.Error())
	}
	for _, w := range o.waiters {
		w(res)
	}
	m.runLane(c)
}

// cancelled reports whether err ended work that was cancelled rather than
// failed: the channel's registration went (a removal, a disconnect), or
// the host is shutting down.
func cancelled(err error) bool {
	var le *lifecycleError
	if errors.As(err, &le) && le.kind == kindGone {
		return true
	}
	var ce *wire.CallError
	return errors.Is(err, errClosing) || (errors.As(err, &ce) && ce.Cause == wire.CauseCanceled)
}

// substitution handles an open answered for another channel: the
// requested one is not marked open, and the other, if registered and
// decided closed, is closed through its own lane.
func (m *machine) substitution(requested Key, answered string) {
	m.logf(slog.LevelWarn, "channel open substituted", "server", requested.Server, "requested", requested.Channel, "answered", quoteID(answered))
	c := m.chans[Key{Server: requested.Server, Channel: answered}]
	if c != nil && c.registered && !wantOpen(c.decision) {
		// The server may have opened it in the requested one's place.
		c.confirmed = false
		m.carryOut(c, nil)
	}
}

// openParams is channels/open as this host sends it: the channel by id,
// with its type and address, and channel_open's history request.
type openParams struct {
	ChannelID string          `json:"channelId"`
	Type      string          `json:"type,omitempty"`
	Address   json.RawMessage `json:"address,omitempty"`
	History   json.RawMessage `json:"history,omitempty"`
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

// quoteID keeps a long id from filling a log line.
func quoteID(id string) string { return wire.Cut(id, 200) }
