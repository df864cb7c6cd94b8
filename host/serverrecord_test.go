package host_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/host"
)

// listed is the server id as Servers lists it, and whether it does.
func listed(h *host.Host, id string) (host.ServerState, bool) {
	for _, s := range h.Servers() {
		if s.ID == id {
			return s, true
		}
	}
	return host.ServerState{}, false
}

// A server whose first connect failed (its command does not exist) is
// out of the registry, but Servers lists it as failed, since when, and
// why; the one beside it that connected is listed as connected.
func TestServersListsAFailedConnect(t *testing.T) {
	h, _ := newHost(t)
	h.Start(parse(t, `servers:
  - id: ok
    command: `+ts(t)+`
  - id: dead
    command: [/nonexistent/mcpl-server]
`))
	<-h.Settled()
	if _, ok := h.Server("dead"); ok {
		t.Error("a server whose connect failed is in the registry")
	}
	st, ok := listed(h, "dead")
	if !ok || st.State != host.StateFailed || st.Since.IsZero() || !strings.Contains(st.LastError, "/nonexistent/mcpl-server") || st.LastErrorAt.IsZero() || st.Connected {
		t.Errorf("Servers' dead = %+v (listed %v), want failed, dated, with the exec error", st, ok)
	}
	if st, ok := listed(h, "ok"); !ok || st.State != host.StateConnected || !st.Connected || st.LastError != "" {
		t.Errorf("Servers' ok = %+v (listed %v), want connected with no error", st, ok)
	}
	if ids := h.Servers(); len(ids) != 2 || ids[0].ID != "ok" || ids[1].ID != "dead" {
		t.Errorf("Servers = %+v, want ok then dead, in configuration order", ids)
	}
}

// A server whose connection ends with reconnect off leaves the registry
// and is listed as disconnected, with the loss as its last error; a
// Disconnect, the operator's removal, forgets a server entirely.
func TestServersListsAnEndedConnection(t *testing.T) {
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	if err := h.Connect(t.Context(), server(t, "id: y\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	if st, _ := listed(h, "x"); st.State != host.StateConnected {
		t.Fatalf("x before its exit = %+v, want connected", st)
	}
	call(t, h, "x--exit", `{"code":0}`)
	waitLog(t, rec, logLeft, "x", 1)
	st, ok := listed(h, "x")
	if !ok || st.State != host.StateDisconnected || st.Connected || st.Since.IsZero() || !strings.Contains(st.LastError, "will not reconnect") {
		t.Errorf("x after its exit = %+v (listed %v), want disconnected with why", st, ok)
	}
	if err := h.Disconnect("y"); err != nil {
		t.Fatal(err)
	}
	if _, ok := listed(h, "y"); ok {
		t.Error("y is listed after Disconnect removed it")
	}
}

// A server whose connection drops with reconnect on is listed as
// reconnecting, with the loss as its last error and when the next
// attempt is due.
func TestServersListsAReconnect(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t)+"\nreconnect: {enabled: true, initial: 1h, max: 1h}")); err != nil {
		t.Fatal(err)
	}
	call(t, h, "x--exit", `{"code":0}`)
	deadline := time.Now().Add(waitFor)
	var st host.ServerState
	for {
		st, _ = listed(h, "x")
		if st.State == host.StateReconnecting && !st.NextAttempt.IsZero() || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // a poll, bounded by deadline
	}
	if st.State != host.StateReconnecting || st.Connected || !strings.Contains(st.LastError, "reconnecting") {
		t.Fatalf("x after its exit = %+v, want reconnecting with the loss as its last error", st)
	}
	if wait := time.Until(st.NextAttempt); wait < 30*time.Minute || wait > 2*time.Hour {
		t.Errorf("the next attempt is due in %v, want about the hour's backoff (±25%%)", wait)
	}
	if _, ok := h.Server("x"); !ok {
		t.Error("a reconnecting server is out of the registry")
	}
}
