package channels

import (
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// Decision sources (anchor-host.md §3.3): who decided a channel's state.
const (
	// SourceDefaultClosed: nobody decided; a later registration may lift
	// it.
	SourceDefaultClosed = "default-closed"
	// SourceServerBootstrap: the descriptor's initiallyOpen.
	SourceServerBootstrap = "server-bootstrap"
	// SourceSubscriptionPolicy: the server's channels.subscription admits
	// the channel.
	SourceSubscriptionPolicy = "subscription-policy"
	// SourceAgentTool: channel_open or channel_close.
	SourceAgentTool = "agent-tool"
	// SourceInvitationDeclined: channel_decline.
	SourceInvitationDeclined = "invitation-declined"
	// SourceOpenedByDelivery: speech or channel_publish into a closed
	// channel.
	SourceOpenedByDelivery = "opened-by-delivery"
	// SourceOpenedByReply: a send tool posted into a closed channel.
	SourceOpenedByReply = "opened-by-reply"
	// SourceSubscriptionGC and SourceHousekeeping are the machine close
	// sources.
	SourceSubscriptionGC = "subscription-gc"
	SourceHousekeeping   = "housekeeping"
)

// MachineCloseSources is the closed vocabulary of machine closes.
var MachineCloseSources = []string{SourceSubscriptionGC, SourceHousekeeping}

// The pure rules of channel decisions. They read a channel's current
// record (nil when none) and say what to write; they do no I/O, so the
// executor (Registry) can make each write durable before it applies it,
// and a replay of the log applies the same records to the same state.

// agentOwn reports whether source is the agent's own decision.
func agentOwn(source string) bool {
	return source == SourceAgentTool || source == SourceInvitationDeclined
}

// writes is the same-state rule: a decision that records the state already
// on record writes nothing, unless it is the agent's own and the record
// isn't. No record reads as closed/default-closed: a default needs no
// record.
func writes(cur *store.Record, state store.State, source string) bool {
	if cur == nil {
		return state != store.Closed || agentOwn(source)
	}
	if cur.State != state {
		return true
	}
	return agentOwn(source) && !agentOwn(cur.Source)
}

// liftable reports whether cur may be decided by a registration: nobody
// decided (no record, or the default).
func liftable(cur *store.Record) bool { return isDefault(cur) }

// initial is the lift rule: what a sighting of desc, which the
// subscription policy admits or not, decides over cur. With no record (or
// the default): initiallyOpen → open/server-bootstrap; else the policy →
// open/subscription-policy; else it stays closed by default, which needs
// no record. Every real decision sticks. ok is false when nothing is to be
// written.
func initial(cur *store.Record, desc protocol.ChannelDescriptor, admits bool) (state store.State, source string, ok bool) {
	if !liftable(cur) {
		return "", "", false
	}
	switch {
	case desc.InitiallyOpen:
		return store.Open, SourceServerBootstrap, true
	case admits:
		return store.Open, SourceSubscriptionPolicy, true
	}
	return "", "", false
}

// isDefault reports whether rec says nobody decided: no record, or the
// default's record (a put-back of the default writes one, so that it
// supersedes the open it undoes).
func isDefault(rec *store.Record) bool {
	return rec == nil || (rec.State == store.Closed && rec.Source == SourceDefaultClosed)
}

// closeRefusal says why a close with source over cur is refused: "" when
// it is allowed. The agent's close (agent-tool) is always allowed; a
// machine close must use the machine vocabulary, and may not close a
// channel the agent opened with channel_open unless override is set.
func closeRefusal(cur *store.Record, source string, override bool) refusal {
	if source == SourceAgentTool {
		return refusalNone
	}
	if source != SourceSubscriptionGC && source != SourceHousekeeping {
		return refusalSource
	}
	if cur != nil && cur.State == store.Open && cur.Source == SourceAgentTool && !override {
		return refusalExplicitOpen
	}
	return refusalNone
}

type refusal int

const (
	refusalNone refusal = iota
	refusalSource
	refusalExplicitOpen
)

// liftSource reports whether source is one the lift writes.
func liftSource(source string) bool {
	return source == SourceServerBootstrap || source == SourceSubscriptionPolicy
}

// putBack is the decision a failed incidental open puts back: the one it
// replaced, with its source, or closed/default-closed when there was
// none.
func putBack(replaced *store.Record) (store.State, string) {
	if replaced == nil {
		return store.Closed, SourceDefaultClosed
	}
	return replaced.State, replaced.Source
}

// wantOpen reports whether cur decides the channel open.
func wantOpen(cur *store.Record) bool { return cur != nil && cur.State == store.Open }
