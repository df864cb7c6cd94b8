package host

import (
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/protocol"
)

// ServerState is a snapshot of one server as the host sees it.
type ServerState struct {
	ID         string
	ToolPrefix string
	// Connecting: a connect of the server (at start, at runtime, or a
	// restart's) is in flight; the fields below are empty meanwhile.
	Connecting bool
	// Connected: its connection is open now.
	Connected bool
	// Reconnecting: it will reconnect after a drop.
	Reconnecting bool
	// State is one of StateConnecting, StateConnected, StateReconnecting,
	// StateDisconnected and StateFailed (serverrecord.go says when);
	// Since when it was entered. LastError is the latest failure seen
	// (a dial or connect that failed, a connection lost), LastErrorAt
	// when; both stay once the server is connected again.
	State       string
	Since       time.Time
	LastError   string
	LastErrorAt time.Time
	// NextAttempt is, while reconnecting, when the next redial is due
	// (zero while one is under way).
	NextAttempt time.Time
	// ServerInfo is from the current connection's initialize; nil when
	// the server gave none.
	ServerInfo *protocol.Implementation
	// ProtocolVersion is the MCP revision the current connection speaks
	// ("" between connections); Stateless says it is 2026-07-28's.
	ProtocolVersion string
	Stateless       bool
	// Advertisement is its MCPL advertisement as this host understands
	// it; nil for a plain MCP server.
	Advertisement *grant.Advertisement
	// Policy is how the current connection's policy exchange ended; empty
	// for a plain MCP server, and between connections.
	Policy grant.PolicyOutcome
	// PolicyReason is the server's reason for a refusal, or why the policy
	// went unanswered; Fallback is a refusal's fallback.
	PolicyReason, Fallback string
	// Unavailable lists the feature sets a degraded receipt named.
	Unavailable []protocol.UnavailableFeature
	// Grant is the effective grant now (Effective empty when MCPL is off
	// or there is no connection).
	Grant grant.Grant
	// Calls are its tool calls in flight, oldest first, with the progress
	// it reported (progress.go).
	Calls []CallInFlight
}

// Server returns the state of the server with id, registered or
// connecting, and whether there is one. A server out of the registry
// (failed, disconnected) is not returned here; Servers lists it.
func (h *Host) Server(id string) (ServerState, bool) {
	st, in := h.serverState(id)
	return st, in == foundRegistered
}

// Where serverState found a server.
const (
	foundNone       = iota
	foundRegistered // registered or connecting
	foundRecord     // only its record: failed or disconnected
)

// serverState is id's state, registered or not, and where the host has
// it.
func (h *Host) serverState(id string) (ServerState, int) {
	h.mu.Lock()
	srv, connecting, prefix, rec := h.servers[id], h.connecting[id], h.prefixes[id], h.recordCopyLocked(id)
	h.mu.Unlock()
	var st ServerState
	in := foundRegistered
	switch {
	case srv != nil:
		st = stateOf(srv)
	case connecting:
		st = ServerState{ID: id, ToolPrefix: prefix, Connecting: true}
	case rec != nil:
		st, in = ServerState{ID: id}, foundRecord
	default:
		return ServerState{}, foundNone
	}
	st.State = stateName(srv, connecting, rec)
	fillRecord(&st, rec)
	return st, in
}

// Servers returns the state of every server configured or connected, in
// the order they were first configured or connected: those registered or
// connecting, and those whose connect failed or whose connection ended
// for good (State says which), until Disconnect removes one.
func (h *Host) Servers() []ServerState {
	h.mu.Lock()
	ids := append([]string(nil), h.listed...)
	h.mu.Unlock()
	out := make([]ServerState, 0, len(ids))
	for _, id := range ids {
		if st, in := h.serverState(id); in != foundNone {
			out = append(out, st)
		}
	}
	return out
}

func stateOf(srv *server) ServerState {
	st := srv.sess.State()
	out := ServerState{
		ID:            srv.cfg.ID,
		ToolPrefix:    srv.cfg.ToolPrefix,
		Connected:     st.Connected,
		Reconnecting:  srv.sess.Reconnecting(),
		NextAttempt:   srv.sess.NextAttempt(),
		ServerInfo:    st.Init.ServerInfo,
		Advertisement: st.Advertisement,
		Grant:         st.Grant,
	}
	if st.Connected {
		out.ProtocolVersion, out.Stateless = st.Version, st.Modern
	}
	out.Calls = callsOf(srv)
	if p := st.Policy; p != nil {
		out.Policy, out.PolicyReason, out.Fallback = p.Outcome, p.Reason, p.Fallback
		if p.Receipt != nil {
			out.Unavailable = p.Receipt.UnavailableFeatures
		}
	}
	return out
}
