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

// healthz answers /healthz: 200 "ok" while the host's store writes; 503,
// saying since when and why, while its writes fail (a full disk, say),
// since the host then refuses what servers send it. It is 200 again after
// the store's next write succeeds.
func healthz(w http.ResponseWriter, h Host) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	st := storeState(h)
	if !st.Failing {
		w.Write([]byte("ok\n"))
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, "store failing since %s: %d %s failed, and what they carried was not accepted (the last: %s); it is ok again once a write succeeds (free disk space if the disk is full)\n",
		st.Since.UTC().Format(time.RFC3339), st.FailedWrites, plural(st.FailedWrites, "write", "writes"), st.LastError)
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
