package agent

import (
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/store"
)

// The gate: whether a channel message can be judged when it is read.
// Whether an agent is shown a message depends on its channel as its server
// registered it and on the channel's decision; after a restart, a server
// registers its channels again only once it has connected, so a message
// read before then would be judged against nothing and consumed unseen. A
// message whose channel is not registered waits: until its server
// registers it, or has been connected for RegistrationWait, or, while it
// is not connected, until GoneWait after the start. Then it is judged as
// from a channel that is gone: shown by its decision, or when it addresses
// the agent, or when its server ran its own channels (no
// channels.lifecycle when it was accepted) and it isn't decided closed; its
// header says the channel is no longer registered.
//
// A message whose channel is registered but whose registration's initial
// decision (the lift: initiallyOpen, the subscription policy) is still
// being recorded waits too, for that write (the registry wakes the
// agents once it is durable) or liftWait: judged before it, a message in
// a channel its server announced open, sent right after the
// registration, would read as from a closed one.

// liftWait bounds how long a message waits for its channel's initial
// decision to be recorded before it is read again.
const liftWait = time.Second

// verdict is how a channel message can be judged now.
type verdict struct {
	// wait: not yet, until then.
	wait  bool
	until time.Time
	ch    channels.ListedChannel
	known bool
	// gone: the channel is not registered, and won't be waited for.
	gone bool
}

// judge reads m's channel as the host has it now.
func (rt *Runtime) judge(m store.Message) verdict {
	ch, known := rt.opts.Env.Channel(m.Server, m.Channel)
	if known && ch.Registered && ch.Lifting {
		// Its registration's initial decision is being recorded: judged
		// once it is (the registry wakes the agents then), or after
		// liftWait at the latest.
		return verdict{wait: true, until: time.Now().Add(liftWait)}
	}
	if known && ch.Registered {
		return verdict{ch: ch, known: true}
	}
	now := time.Now()
	until := rt.start.Add(GoneWait)
	if since := rt.opts.Env.Connected(m.Server); !since.IsZero() {
		until = since.Add(RegistrationWait)
	}
	if now.Before(until) {
		return verdict{wait: true, until: until}
	}
	if !known {
		ch = channels.ListedChannel{ID: m.Channel, ServerID: m.Server, Desired: "unknown"}
	}
	// Judged by how the server ran its channels when the message came.
	ch.Lifecycle = m.Directed
	return verdict{ch: ch, known: true, gone: true}
}

// shows reports whether the verdict shows m, and whether its channel is
// open.
func (v verdict) shows(m store.Message) (shown, open bool) { return shows(m, v.ch, v.known) }
