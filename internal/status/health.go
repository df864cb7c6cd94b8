package status

import (
	"fmt"
	"net/http"
	"time"

	"github.com/mcpl-go/mcpl/host"
)

// StoreHealth is what a Host that reports its store's health has besides
// (*host.Host does): /healthz, /api/store and the page read it. A Host
// without it is taken as having a store that writes.
type StoreHealth interface {
	StoreHealth() host.StoreState
}

// HealthView is /healthz's body. Status is "ok" (200) or "unhealthy"
// (503), with a reason for each thing wrong.
type HealthView struct {
	Status  string         `json:"status"`
	Reasons []HealthReason `json:"reasons,omitempty"`
}

// HealthReason is one thing that makes the host unhealthy: a server not
// connected (Server, State, Since, LastError), an agent's turn past its
// deadline (Agent, Turn, RunningFor, Deadline), or the store's writes
// failing (Store "failing", Since, FailedWrites, LastError). Why says it
// in words.
type HealthReason struct {
	Server       string    `json:"server,omitempty"`
	Agent        string    `json:"agent,omitempty"`
	Store        string    `json:"store,omitempty"`
	State        string    `json:"state,omitempty"`
	Since        time.Time `json:"since,omitzero"`
	LastError    string    `json:"lastError,omitempty"`
	Turn         int64     `json:"turn,omitempty"`
	RunningFor   string    `json:"runningFor,omitempty"`
	Deadline     string    `json:"deadline,omitempty"`
	FailedWrites int       `json:"failedWrites,omitempty"`
	Why          string    `json:"why"`
}

// health is the host's health at now. It is "ok" only while every
// configured server is connected, no agent's turn has run past its
// deadline (host.TurnDeadline), and the store writes: a server that is
// connecting, reconnecting, disconnected or failed is a reason, since
// the host can't do its work through it. One exception: until the host
// is ready (/readyz), a server still making its first connect is not,
// because the start is what /readyz reports, and a liveness probe that
// failed through every start would have an orchestrator restart a host
// that was only starting; a first connect that fails is a reason at
// once (failed), and a connect after the start (a restart's) is one. A store whose writes fail is one,
// since the host then refuses what servers send it, and it is ok again
// after the store's next write succeeds.
func health(h Host, now time.Time) HealthView {
	v := HealthView{Status: "ok"}
	starting := !ready(h)
	for _, s := range h.Servers() {
		st := serverState(s)
		if st == host.StateConnected || starting && st == host.StateConnecting {
			continue
		}
		r := HealthReason{Server: s.ID, State: st, Since: utc(s.Since), LastError: s.LastError, Why: "the server is " + st + ", not connected"}
		v.Reasons = append(v.Reasons, r)
	}
	for _, a := range h.Agents() {
		if !a.InTurn || a.TurnStartedAt.IsZero() || a.TurnDeadline <= 0 {
			continue
		}
		if d := now.Sub(a.TurnStartedAt); d > a.TurnDeadline {
			v.Reasons = append(v.Reasons, HealthReason{Agent: a.Name, Turn: a.Turn, Since: utc(a.TurnStartedAt),
				RunningFor: d.Round(time.Second).String(), Deadline: a.TurnDeadline.String(),
				Why: fmt.Sprintf("turn %d has run for %s, past its deadline of %s", a.Turn, d.Round(time.Second), a.TurnDeadline)})
		}
	}
	if st := storeState(h); st.Failing {
		v.Reasons = append(v.Reasons, HealthReason{Store: "failing", Since: utc(st.Since), FailedWrites: st.FailedWrites, LastError: st.LastError,
			Why: fmt.Sprintf("the store's writes fail: %d %s failed, and what they carried was not accepted; it is ok again once a write succeeds (free disk space if the disk is full)",
				st.FailedWrites, plural(st.FailedWrites, "write", "writes"))})
	}
	if len(v.Reasons) > 0 {
		v.Status = "unhealthy"
	}
	return v
}

// healthz answers /healthz: 200 and {"status":"ok"} while healthy (see
// health), else 503 and the reasons.
func healthz(w http.ResponseWriter, h Host, now time.Time) {
	v := health(h, now)
	code := http.StatusOK
	if v.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSONCode(w, code, v)
}

// Readiness is what a Host that says when it has started has (*host.Host
// does): Settled closes once Start's first connects have all ended, either
// way, after the store was replayed (host.New replays it). A Host without
// it is ready at once.
type Readiness interface {
	Settled() <-chan struct{}
}

// ReadyView is /readyz's body: "ready" (200) or "starting" (503).
type ReadyView struct {
	Status string `json:"status"`
	Why    string `json:"why,omitempty"`
}

func ready(h Host) bool {
	r, ok := h.(Readiness)
	if !ok {
		return true
	}
	select {
	case <-r.Settled():
		return true
	default:
		return false
	}
}

// readyz answers /readyz: ready once the host has started (its store
// replayed, the first connect of every configured server ended, either
// way), starting before. It does not go back: a server lost later is
// /healthz's business.
func readyz(w http.ResponseWriter, h Host) {
	if ready(h) {
		writeJSONCode(w, http.StatusOK, ReadyView{Status: "ready"})
		return
	}
	writeJSONCode(w, http.StatusServiceUnavailable, ReadyView{Status: "starting", Why: "the host's first connects to its servers have not all ended yet"})
}

func storeState(h Host) host.StoreState {
	if sh, ok := h.(StoreHealth); ok {
		return sh.StoreHealth()
	}
	return host.StoreState{}
}

// StoreView is /api/store.
type StoreView struct {
	// State is "ok" or "failing".
	State        string    `json:"state"`
	Since        time.Time `json:"since,omitzero"`        // when the failing began
	FailedWrites int       `json:"failedWrites,omitzero"` // since then
	LastError    string    `json:"lastError,omitempty"`
	Recovered    time.Time `json:"recovered,omitzero"` // when it last wrote again after failing
}

func storeView(h Host) StoreView {
	st := storeState(h)
	v := StoreView{State: "ok", Recovered: utc(st.Recovered)}
	if st.Failing {
		v.State, v.Since, v.FailedWrites, v.LastError = "failing", utc(st.Since), st.FailedWrites, st.LastError
	}
	return v
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
