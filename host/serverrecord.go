package host

import (
	"slices"
	"time"
)

// The states Servers reports a configured server in (docs/status.md).
//
// The registry (h.servers) holds only servers whose handshake is done, and
// a server leaves it when its first connect fails or its connection ends
// with no reconnect to come; calls to its tools then read that it is gone.
// What an operator watching the host needs is the opposite: a server that
// died is the one to show. So the host also keeps a record per server
// configured or connected (serverRecord), which outlives the registry
// entry, and Servers lists every record:
//
//	connecting    a connect (at start, Connect, or a restart's) is in flight
//	connected     registered, and its connection is open
//	reconnecting  registered, its connection is down, and its session is
//	              redialling (a drop with reconnect on, or a first connect
//	              that failed with reconnect on)
//	disconnected  its connection ended and will not come back (reconnect
//	              off, or the session gave up); it left the registry
//	failed        its connect failed (the command does not exist, the
//	              handshake was refused, ...); it never joined the registry
//
// connecting goes to connected, reconnecting or failed; connected to
// reconnecting or disconnected; reconnecting to connected or
// disconnected; disconnected and failed only to connecting, by a Restart
// or a Connect of the id. Disconnect, the operator's removal, forgets the
// record: the server is no longer configured. Since is when the state
// was entered; LastError and LastErrorAt the latest failure seen (a
// failed dial or connect, a dropped connection), kept across states so
// a connected server still shows what last went wrong.
const (
	StateConnecting   = "connecting"
	StateConnected    = "connected"
	StateReconnecting = "reconnecting"
	StateDisconnected = "disconnected"
	StateFailed       = "failed"
)

// ServerStates are the states, in the order above (for an enum metric).
var ServerStates = []string{StateConnecting, StateConnected, StateReconnecting, StateDisconnected, StateFailed}

// serverRecord is what the host remembers of one configured server, under
// Host.mu.
type serverRecord struct {
	prefix string
	// out is "", or StateFailed or StateDisconnected once the server is
	// out of the registry for that reason.
	out string
	// state and since: the state last entered and when; state is only a
	// hint for the registered states, which the session says (see
	// stateName).
	state       string
	since       time.Time
	lastError   string
	lastErrorAt time.Time
	reconnects  int64 // the session's, when it left the registry
}

// recordLocked is id's record, made (and listed) if there is none.
func (h *Host) recordLocked(id string) *serverRecord {
	r := h.records[id]
	if r == nil {
		r = &serverRecord{}
		h.records[id] = r
	}
	if !slices.Contains(h.listed, id) {
		h.listed = append(h.listed, id)
	}
	return r
}

// enterLocked moves id's record to state, now.
func (h *Host) enterLocked(id, state string) *serverRecord {
	r := h.recordLocked(id)
	if r.state != state {
		r.state, r.since = state, h.now()
	}
	if state != StateFailed && state != StateDisconnected {
		r.out = ""
	} else {
		r.out = state
	}
	return r
}

// failLocked records a failure of id's, and moves it to state when that
// is not "".
func (h *Host) failLocked(id, state string, err string) {
	r := h.recordLocked(id)
	if state != "" {
		r = h.enterLocked(id, state)
	}
	r.lastError, r.lastErrorAt = err, h.now()
}

// noteFailure records a failure of id's without changing its state (a
// dial that failed while the session redials).
func (h *Host) noteFailure(id string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.records[id]; ok {
		h.failLocked(id, "", err.Error())
	}
}

// forgetLocked drops id's record: the operator removed the server.
func (h *Host) forgetLocked(id string) {
	delete(h.records, id)
	h.listed = remove(h.listed, id)
}

// stateName is a server's state now: connecting and the registered states
// from the registry and the session, the others from its record. It
// takes no lock of the host's (the session's own, for a registered one).
func stateName(srv *server, connecting bool, r *serverRecord) string {
	switch {
	case connecting:
		return StateConnecting
	case srv != nil && srv.sess.Connected():
		return StateConnected
	case srv != nil && srv.sess.Reconnecting():
		return StateReconnecting
	case srv != nil:
		return StateDisconnected
	case r != nil && r.out != "":
		return r.out
	}
	return StateDisconnected
}

// fillRecord adds r (a copy of a server's record, or nil) to st.
func fillRecord(st *ServerState, r *serverRecord) {
	if r == nil {
		return
	}
	st.Since, st.LastError, st.LastErrorAt = r.since, r.lastError, r.lastErrorAt
	if st.ToolPrefix == "" {
		st.ToolPrefix = r.prefix
	}
}

// recordCopyLocked is a copy of id's record, or nil.
func (h *Host) recordCopyLocked(id string) *serverRecord {
	if r := h.records[id]; r != nil {
		c := *r
		return &c
	}
	return nil
}
