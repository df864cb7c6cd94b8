package channels

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// Lazy registrations. A chat connector delivers a DM, or a mention in a
// channel the agent hasn't joined, as a push/event naming its channel as
// origin.mcplChannelId (RFC-011 revision 3), often a channel it never
// registered (a fresh DM). So that the agent can answer where it was
// spoken to, the host registers such a channel itself, as the reference
// host does: a closed lazy entry, whose descriptor is its id alone. It is
// durable (a store.KindLazy record, kept by compaction), listed
// (channel_list and the operator views mark it lazy), and made live again
// each time its server connects, its decision carried out once the
// connection's grant is known (Connected), until the server registers the
// channel itself (its own descriptor then stands) or removes it (a
// store.KindLazyGone record ends it). Only a server granted
// channels.publish gets one: without it a reply could go nowhere there. At
// MaxLazyPerServer, the oldest that is neither decided open nor registered
// by its server makes room. It is never opened by a
// registration's lift or by the subscription policy: nothing about it
// came from a descriptor. An agent's reply into it opens it first, as
// into any closed channel (seed 000's rules apply unchanged).
//
// Admission is unchanged: a push is admitted by its feature set and the
// pushEvents grant before its origin is read; a lazy entry admits
// nothing (SPEC §16.6), and a closed one shows an agent only what
// addresses it.

// MaxLazyPerServer bounds the lazy registrations one server's pushes can
// make: past it, a push naming yet another unregistered channel is shown
// as an event without a channel (LazyOutcome says why).
const MaxLazyPerServer = 4096

// Connected tells the registry that server's connection is up, its grant
// known: its lazy channels decided open are opened again on it, as a
// registration carries out the decisions of the channels it registers.
func (r *Registry) Connected(server string) {
	r.step(func(m *machine) {
		if !m.directs(server) {
			return
		}
		for ch := range m.lazy[server] {
			if c := m.live[server][ch]; c != nil && c.lazy && wantOpen(c.decision) {
				m.carryOut(c, nil)
			}
		}
	})
}

// LazyOutcome is how EnsureRegistered went: Registered when the channel
// is registered now (by its server, or lazily); else Why says why not,
// for the operator's log.
type LazyOutcome struct {
	Registered bool
	Lazy       bool // the registration is the host's own
	// Directed says this host directs the server's channels (it is
	// granted channels.lifecycle): store.Message.Directed.
	Directed bool
	Why      string
}

// EnsureRegistered makes sure server has channel registered, registering
// it lazily if the server hasn't: it returns once the lazy registration
// is durable (or failed), or ctx ends.
func (r *Registry) EnsureRegistered(ctx context.Context, server, channel string) LazyOutcome {
	switch {
	case channel == "" || len(channel) > MaxIDBytes:
		return LazyOutcome{Why: "the channel id is empty or longer than 512 bytes"}
	case !content.Printable(channel):
		return LazyOutcome{Why: "the channel id holds a control, line break, bidirectional or invisible formatting character"}
	}
	o, err := ask(ctx, r, func(m *machine, reply func(LazyOutcome)) { m.ensureRegistered(Key{server, channel}, reply) })
	if err != nil {
		return LazyOutcome{Why: r.describe(server, err)}
	}
	o.Directed = r.directsLifecycle(server)
	return o
}

// ensureRegistered is EnsureRegistered in the machine.
func (m *machine) ensureRegistered(k Key, reply func(LazyOutcome)) {
	if c := m.live[k.Server][k.Channel]; c != nil {
		reply(LazyOutcome{Registered: true, Lazy: c.lazy})
		return
	}
	if !m.hasServer(k.Server) {
		reply(LazyOutcome{Why: "its server is not connected"})
		return
	}
	if !m.has(k.Server, "channels.publish") {
		reply(LazyOutcome{Why: "its server is not granted channels.publish, so a reply could not be posted there"})
		return
	}
	if _, known := m.lazy[k.Server][k.Channel]; known {
		// Recorded before, not live: its server came back (addServer
		// makes them live; this is a race with it).
		m.liveLazy(m.chanOf(k))
		reply(LazyOutcome{Registered: true, Lazy: true})
		return
	}
	if m.closing {
		reply(LazyOutcome{Why: "this host is shutting down"})
		return
	}
	if len(m.lazy[k.Server]) >= MaxLazyPerServer && !m.evictLazy(k.Server) {
		reply(LazyOutcome{Why: fmt.Sprintf("its server has %d lazy registrations already, the most this host keeps, and each is decided open or registered by it", MaxLazyPerServer)})
		return
	}
	if len(m.live[k.Server]) >= MaxChannelsPerServer {
		reply(LazyOutcome{Why: reasonTooMany})
		return
	}
	c := m.chanOf(k)
	m.whenSettled(c, func() {
		if c := m.live[k.Server][k.Channel]; c != nil {
			reply(LazyOutcome{Registered: true, Lazy: c.lazy})
			return
		}
		if _, known := m.lazy[k.Server][k.Channel]; known {
			m.liveLazy(c)
			reply(LazyOutcome{Registered: true, Lazy: true})
			return
		}
		rec := store.Record{Kind: store.KindLazy, Server: k.Server, Channel: k.Channel}
		m.persist([]*chanState{c}, []store.Record{rec}, func(recs []store.Record, ok bool) {
			if !ok {
				reply(LazyOutcome{Why: "the store could not record it"})
				return
			}
			m.rememberLazy(k, recs[0].Seq)
			if !m.hasServer(k.Server) {
				reply(LazyOutcome{Why: "its server is not connected"})
				return
			}
			if m.live[k.Server][k.Channel] == nil {
				m.liveLazy(c)
			}
			reply(LazyOutcome{Registered: true, Lazy: c.lazy})
		})
	})
}

func (m *machine) rememberLazy(k Key, seq int64) {
	l := m.lazy[k.Server]
	if l == nil {
		l = map[string]int64{}
		m.lazy[k.Server] = l
	}
	l[k.Channel] = seq
}

// liveLazy makes c's lazy registration live: a descriptor of its id
// alone.
func (m *machine) liveLazy(c *chanState) {
	live := m.live[c.key.Server]
	if live == nil {
		live = map[string]*chanState{}
		m.live[c.key.Server] = live
	}
	live[c.key.Channel] = c
	c.registered, c.lazy = true, true
	c.desc = protocol.ChannelDescriptor{ID: c.key.Channel}
	m.touch(c)
	m.out.Registered = true
}

// liveLazyOf makes server's recorded lazy registrations live, as it
// connects (those it registers itself then take its descriptor).
func (m *machine) liveLazyOf(server string) {
	for ch := range m.lazy[server] {
		if m.live[server][ch] == nil {
			m.liveLazy(m.chanOf(Key{server, ch}))
		}
	}
}

// dropLazy ends k's lazy registration, durably: its server removed the
// channel.
func (m *machine) dropLazy(c *chanState) {
	if _, known := m.lazy[c.key.Server][c.key.Channel]; !known {
		return
	}
	delete(m.lazy[c.key.Server], c.key.Channel)
	if len(m.lazy[c.key.Server]) == 0 {
		delete(m.lazy, c.key.Server)
	}
	rec := store.Record{Kind: store.KindLazyGone, Server: c.key.Server, Channel: c.key.Channel}
	m.persist([]*chanState{c}, []store.Record{rec}, func([]store.Record, bool) {})
}

// evictLazy ends server's oldest lazy registration that is neither
// decided open nor registered by the server itself, to make room; false
// when there is none.
func (m *machine) evictLazy(server string) bool {
	var oldest *chanState
	var at int64
	for ch, seq := range m.lazy[server] {
		c := m.chans[Key{server, ch}]
		if c != nil && (wantOpen(c.decision) || c.registered && !c.lazy || c.writing > 0) {
			continue
		}
		if oldest == nil || seq < at {
			if c == nil {
				c = m.chanOf(Key{server, ch})
			}
			oldest, at = c, seq
		}
	}
	if oldest == nil {
		return false
	}
	if oldest.lazy {
		m.unregister(oldest)
	}
	m.dropLazy(oldest)
	return true
}

// replayLazy applies a lazy record of the log at start.
func (m *machine) replayLazy(rec store.Record) {
	k := keyOf(rec)
	if rec.Kind == store.KindLazy {
		m.rememberLazy(k, rec.Seq)
		return
	}
	delete(m.lazy[k.Server], k.Channel)
	if len(m.lazy[k.Server]) == 0 {
		delete(m.lazy, k.Server)
	}
}

// lazyKept is the Seqs of the lazy records the state rests on, for a
// compaction to keep.
func (m *machine) lazyKept() []int64 {
	var out []int64
	for _, l := range m.lazy {
		for _, seq := range l {
			out = append(out, seq)
		}
	}
	return out
}

// describeLazy takes, for a lazy registration its server has just opened,
// the descriptor the server answered with ({channel: descriptor} naming
// the same id): its label, type, tags and capabilities then read as the
// server describes the channel (a DM's @name, its publish target). One
// that is refused as a registration would be, or names another id, is not
// taken; the registration stays lazy either way (its server never
// registered it).
func (m *machine) describeLazy(c *chanState, answer json.RawMessage) {
	var a struct {
		Channel *json.RawMessage `json:"channel"`
	}
	if json.Unmarshal(answer, &a) != nil || a.Channel == nil {
		return
	}
	var d protocol.ChannelDescriptor
	if json.Unmarshal(*a.Channel, &d) != nil || d.ID != c.key.Channel || checkDescriptor(d) != "" {
		return
	}
	size := len(*a.Channel)
	if m.checkSize(c.key.Server, c, size) != "" {
		return
	}
	// Its target stays the one just opened (the id alone): a new one
	// would have the channel opened again.
	d.Type, d.Address = c.desc.Type, c.desc.Address
	c.desc = d
	m.setSize(c, size)
	m.dirty[c.key] = true
}
