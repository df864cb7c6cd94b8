package host

import (
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
	// ServerInfo is from the current connection's initialize; nil when
	// the server gave none.
	ServerInfo *protocol.Implementation
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
}

// Server returns the state of the server with id, registered or
// connecting, and whether there is one.
func (h *Host) Server(id string) (ServerState, bool) {
	h.mu.Lock()
	srv, connecting, prefix := h.servers[id], h.connecting[id], h.prefixes[id]
	h.mu.Unlock()
	switch {
	case srv != nil:
		return stateOf(srv), true
	case connecting:
		return ServerState{ID: id, ToolPrefix: prefix, Connecting: true}, true
	}
	return ServerState{}, false
}

// Servers returns the state of every server registered or connecting, in
// the order they were configured or connected.
func (h *Host) Servers() []ServerState {
	h.mu.Lock()
	ids := append([]string(nil), h.order...)
	h.mu.Unlock()
	out := make([]ServerState, 0, len(ids))
	for _, id := range ids {
		if st, ok := h.Server(id); ok {
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
		ServerInfo:    st.Init.ServerInfo,
		Advertisement: st.Advertisement,
		Grant:         st.Grant,
	}
	if p := st.Policy; p != nil {
		out.Policy, out.PolicyReason, out.Fallback = p.Outcome, p.Reason, p.Fallback
		if p.Receipt != nil {
			out.Unavailable = p.Receipt.UnavailableFeatures
		}
	}
	return out
}
