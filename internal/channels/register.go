package channels

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// Registration (SPEC §14.3, §14.5): each descriptor is validated and
// authorized on its own and answered with an itemized result before any
// lifecycle work starts; the decisions a registration makes are recorded,
// all in one durable append, and carried out through each channel's queue
// once the caller has sent the answer (Register's start).

// Bounds on what a server registers (docs/limits.md).
const (
	// MaxIDBytes bounds a channel id, and an inbound message's id and thread id.
	MaxIDBytes = 512
	// MaxChannelsPerServer bounds the channels one server has registered
	// at once.
	MaxChannelsPerServer = 65536
)

// Reasons a descriptor or a message is refused, as the server reads them.
const (
	reasonMissingID     = "invalid descriptor: missing id"
	reasonLongID        = "invalid descriptor: the id is longer than 512 bytes"
	reasonBadID         = "invalid descriptor: the id is not valid UTF-8"
	reasonUnprintableID = "invalid descriptor: the id holds a control, line break, bidirectional or invisible formatting character"
	reasonDirection     = "invalid descriptor: direction must be outbound, inbound or bidirectional"
	reasonDuplicate     = "invalid descriptor: the id appears twice in this request"
	reasonTooMany       = "too many channels: this host keeps at most 65536 per server"
	reasonNotRegistered = "not registered"
	reasonUpdateUnknown = "not registered — update rejected (§14.5)"
	reasonShuttingDown  = "this host is shutting down; register the channel again once it is back"
)

// checkDescriptor says why d is refused ("" when it is not).
func checkDescriptor(d protocol.ChannelDescriptor) string {
	switch {
	case d.ID == "":
		return reasonMissingID
	case len(d.ID) > MaxIDBytes:
		return reasonLongID
	case !utf8.ValidString(d.ID):
		return reasonBadID
	case !content.Printable(d.ID):
		// An agent repeats an id exactly, and reads it in the host's
		// lines: it must read as it is.
		return reasonUnprintableID
	case len(d.Label) > MaxLabelBytes:
		return reasonLongLabel
	case len(d.Type) > MaxTypeBytes:
		return reasonLongType
	}
	switch d.Direction {
	case "", protocol.DirectionInbound, protocol.DirectionOutbound, protocol.DirectionBidirectional:
	default:
		return reasonDirection
	}
	return ""
}

// Register takes a server's channels/register. It returns the itemized
// results, to be sent as the answer, and start, to be called once the
// answer is sent: it starts the lifecycle work. start is never nil.
func (r *Registry) Register(server string, descs []protocol.ChannelDescriptor) (protocol.ChannelResults, func()) {
	return r.registerWith(func(m *machine) ([]protocol.ChannelResult, *registration) { return m.register(server, descs, nil, nil) }, func() []string {
		ids := make([]string, len(descs))
		for i, d := range descs {
			ids[i] = d.ID
		}
		return ids
	})
}

// Changed takes a server's channels/changed, as a request or (notify) a
// notification: removals, updates and additions, each itemized. A
// notification that must be partly refused is filtered and logged, since
// it carries no answer.
func (r *Registry) Changed(server string, p protocol.ChannelsChangedParams, notify bool) (protocol.ChannelResults, func()) {
	return r.changed(server, changes{added: p.Added, removed: p.Removed, updated: p.Updated}, notify)
}

// changes is a channels/changed, with the reasons items that did not
// decode are refused for ("" for those that did) and the bytes each
// descriptor was received as (nil: given as values; see sizeOf).
type changes struct {
	added, updated           []protocol.ChannelDescriptor
	addedBad, updatedBad     []string
	addedSizes, updatedSizes []int
	removed, removedBad      []string
}

func (r *Registry) changed(server string, ch changes, notify bool) (protocol.ChannelResults, func()) {
	res, start := r.registerWith(func(m *machine) ([]protocol.ChannelResult, *registration) { return m.changed(server, ch) }, func() []string {
		ids := slices.Clone(ch.removed)
		for _, d := range slices.Concat(ch.updated, ch.added) {
			ids = append(ids, d.ID)
		}
		return ids
	})
	if notify {
		r.logRefused(server, protocol.MethodChannelsChanged, res.Results)
	}
	return res, start
}

// registerWith steps a registration into the machine and returns its
// results and its start. Once the registry has stopped, every item is
// refused, saying so.
func (r *Registry) registerWith(f func(*machine) ([]protocol.ChannelResult, *registration), ids func() []string) (protocol.ChannelResults, func()) {
	var results []protocol.ChannelResult
	var reg *registration
	if !r.do(func(m *machine) { results, reg = f(m) }) {
		for _, id := range ids() {
			results = append(results, protocol.ChannelResult{ID: id, Accepted: false, Reason: reasonShuttingDown})
		}
		return protocol.ChannelResults{Results: results}, func() {}
	}
	return protocol.ChannelResults{Results: results}, func() { r.step(func(m *machine) { m.answered(reg) }) }
}

// registration is a registration's work: its channels' lifts, recorded
// in one durable append, and, once the answer is sent (answered) and the
// lifts are durable, the notice of what the policy selected and each
// channel's decision carried out through its lane. A server whose
// lifecycle this host does not direct owns its channels: nothing is
// recorded or sent.
type registration struct {
	server   string
	chans    []*chanState
	retarget []*chanState
	directs  bool
	// answered: the caller sent the answer; decided: the lifts are
	// recorded (ok) or could not be.
	answered, decided, ok bool
	admitted              []ChannelRef
}

// register validates descs and makes the accepted ones live; pre[i], when
// not "", refuses descs[i] for that reason; sizes[i] is the bytes descs[i]
// was received as (see sizeOf). It returns the itemized results, to be
// sent as the answer, and the registration, to be answered once the
// answer is sent.
func (m *machine) register(server string, descs []protocol.ChannelDescriptor, pre []string, sizes []int) ([]protocol.ChannelResult, *registration) {
	results, accepted := m.add(server, descs, pre, sizes)
	reg := &registration{server: server, chans: accepted, directs: m.directs(server)}
	m.decideLifts(reg)
	m.out.Registered = m.out.Registered || len(accepted) > 0
	return results, reg
}

// changed takes a channels/changed: removals, updates and additions, each
// itemized. A notification that must be partly refused is filtered, since
// it carries no answer; the caller logs what was refused.
func (m *machine) changed(server string, ch changes) ([]protocol.ChannelResult, *registration) {
	var results []protocol.ChannelResult
	for i, id := range ch.removed {
		if bad := at(ch.removedBad, i); bad != "" {
			results = append(results, protocol.ChannelResult{ID: id, Accepted: false, Reason: bad})
			continue
		}
		c := m.live[server][id]
		if c == nil {
			results = append(results, protocol.ChannelResult{ID: id, Accepted: false, Reason: reasonNotRegistered})
			continue
		}
		// The live entry goes and its queued work is cancelled; the
		// decision stays, unless the lift made it.
		m.unregister(c)
		m.forgetLift(c)
		m.dropLazy(c)
		results = append(results, protocol.ChannelResult{ID: id, Accepted: true})
	}
	var retarget []*chanState
	for i, d := range ch.updated {
		why := at(ch.updatedBad, i)
		if why == "" {
			why = checkDescriptor(d)
		}
		if why != "" {
			results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: false, Reason: why})
			continue
		}
		c := m.live[server][d.ID]
		if c == nil {
			results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: false, Reason: reasonUpdateUnknown})
			continue
		}
		size := sizeOf(ch.updated, ch.updatedSizes, i)
		if why := m.checkSize(server, c, size); why != "" {
			results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: false, Reason: why})
			continue
		}
		moved := !sameTarget(c.desc, d)
		c.desc = d
		m.setSize(c, size)
		if moved {
			// A new target invalidates the open confirmation, and the
			// decision is carried out again; a label change alone does
			// not.
			c.confirmed = false
			c.target++
			retarget = append(retarget, c)
		}
		m.touch(c)
		results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: true})
	}
	added, accepted := m.add(server, ch.added, ch.addedBad, ch.addedSizes)
	results = append(results, added...)
	reg := &registration{server: server, chans: accepted, retarget: retarget, directs: m.directs(server)}
	m.decideLifts(reg)
	m.out.Registered = m.out.Registered || len(accepted) > 0
	return results, reg
}

// forgetLift forgets, once its writes are done, the decision of a
// channel its server removed when the lift made it (server-bootstrap,
// subscription-policy): nobody else decided, and the next registration
// makes it again from the descriptor and the policy then. So a server
// that registers and removes initially open channels leaves nothing
// behind. A decision of the agent's, a machine close, an incidental open
// stay. The default's record supersedes the lift's, so a replay forgets it
// too.
func (m *machine) forgetLift(c *chanState) {
	m.whenSettled(c, func() {
		if c.registered || c.decision == nil || !liftSource(c.decision.Source) {
			return
		}
		m.persist([]*chanState{c}, []store.Record{decisionRec(c, store.Closed, SourceDefaultClosed)}, func([]store.Record, bool) {})
	})
}

// at returns l[i], or "" past its end.
func at(l []string, i int) string {
	if i < len(l) {
		return l[i]
	}
	return ""
}

// logRefused logs each item a notification had refused: nothing can tell
// the server, and silent filtering would leave the two sides disagreeing
// about which channels exist (SPEC §14.5).
func (r *Registry) logRefused(server, method string, results []protocol.ChannelResult) {
	for _, res := range results {
		if !res.Accepted {
			r.log.Warn("a channel notification was partly refused: the server thinks a channel changed that this host did not take",
				"server", server, "method", method, "channel", quoteID(res.ID), "reason", res.Reason)
		}
	}
}

// sameTarget reports whether a and b name the same place: the same type
// and an equal address.
func sameTarget(a, b protocol.ChannelDescriptor) bool {
	return a.Type == b.Type && jsonEqual(a.Address, b.Address)
}

func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// add validates descs and makes the accepted ones live; pre[i], when not
// "", refuses descs[i] for that reason; sizes[i] is the bytes it was
// received as (see sizeOf).
func (m *machine) add(server string, descs []protocol.ChannelDescriptor, pre []string, sizes []int) ([]protocol.ChannelResult, []*chanState) {
	results := make([]protocol.ChannelResult, 0, len(descs))
	var accepted []*chanState
	seen := map[string]bool{}
	live := m.live[server]
	for i, d := range descs {
		why := at(pre, i)
		if why == "" {
			why = checkDescriptor(d)
		}
		if why == "" && seen[d.ID] {
			why = reasonDuplicate
		}
		c := live[d.ID]
		if why == "" && c == nil && len(live) >= MaxChannelsPerServer {
			why = reasonTooMany
		}
		size := 0
		if why == "" {
			size = sizeOf(descs, sizes, i)
			why = m.checkSize(server, c, size)
		}
		if why != "" {
			results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: false, Reason: why})
			continue
		}
		seen[d.ID] = true
		if c == nil {
			c = m.chanOf(Key{server, d.ID})
			if live == nil {
				live = map[string]*chanState{}
				m.live[server] = live
			}
			live[d.ID] = c
			c.registered = true
		} else if !sameTarget(c.desc, d) {
			c.confirmed = false
			c.target++
		}
		// The server's own descriptor takes a lazy registration's place;
		// its record stays, so that the channel is known again at the
		// next connect before the server registers it (lazy.go).
		c.lazy = false
		c.desc = d
		m.setSize(c, size)
		m.touch(c)
		accepted = append(accepted, c)
		results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: true})
	}
	return results, accepted
}

// decideLifts records the lifts reg's channels call for, once each
// channel's earlier decisions are durable, in one append.
func (m *machine) decideLifts(reg *registration) {
	if len(reg.chans) == 0 || !reg.directs {
		reg.decided, reg.ok = true, true
		return
	}
	waiting := 1
	ready := func() {
		if waiting--; waiting > 0 {
			return
		}
		var recs []store.Record
		var held []*chanState
		for _, c := range reg.chans {
			if !c.registered {
				continue
			}
			state, source, ok := initial(c.decision, c.desc, m.admits(c.key.Server, c.key.Channel))
			if !ok {
				continue
			}
			recs = append(recs, decisionRec(c, state, source))
			held = append(held, c)
			if source == SourceSubscriptionPolicy {
				reg.admitted = append(reg.admitted, ChannelRef{ID: c.key.Channel, Label: c.desc.Label})
			}
		}
		if len(recs) == 0 {
			reg.decided, reg.ok = true, true
			m.startRegistration(reg)
			return
		}
		for _, c := range held {
			c.lifting = true
			m.dirty[c.key] = true
		}
		m.persist(held, recs, func(_ []store.Record, ok bool) {
			for _, c := range held {
				c.lifting = false
			}
			// What waited to be judged against the lifts may go.
			m.out.Registered = true
			reg.decided, reg.ok = true, ok
			if !ok {
				ids := make([]string, len(held))
				for i, c := range held {
					ids[i] = quoteID(c.key.Channel)
				}
				m.logf(slog.LevelError, "registered channels left undecided: their decisions could not be recorded, so no lifecycle request is sent until they are registered again", "server", reg.server, "channels", ids)
			}
			m.startRegistration(reg)
		})
	}
	for _, c := range reg.chans {
		if c.writing > 0 || len(c.settled) > 0 {
			waiting++
			m.whenSettled(c, ready)
		}
	}
	ready()
}

// answered steps in that reg's answer was sent: its work may start.
func (m *machine) answered(reg *registration) {
	reg.answered = true
	m.startRegistration(reg)
}

// startRegistration starts reg's work once it is answered and decided: the
// notice of the channels the subscription policy selected, and each
// channel's decision carried out through its lane. Registered channels
// whose decisions couldn't be recorded are left undecided: nothing is
// sent until they are registered again.
func (m *machine) startRegistration(reg *registration) {
	if !reg.answered || !reg.decided || reg.chans == nil && reg.retarget == nil {
		return
	}
	chans, retarget := reg.chans, reg.retarget
	reg.chans, reg.retarget = nil, nil
	if reg.directs && reg.ok {
		if len(reg.admitted) > 0 {
			m.notify(Notice{Kind: NoticeOpened, Cause: SourceSubscriptionPolicy, Server: reg.server, Channels: reg.admitted})
		}
		for _, c := range chans {
			if m.chans[c.key] == c {
				m.carryOut(c, nil)
			}
		}
	}
	if m.directs(reg.server) {
		for _, c := range retarget {
			if m.chans[c.key] == c {
				m.carryOut(c, nil)
			}
		}
	}
}
