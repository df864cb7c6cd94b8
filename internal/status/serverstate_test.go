package status_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/status"
)

// fakeHost serves what its fields say, and may be changed meanwhile;
// settled, when not nil, is its Settled. Each Agents call adds an event
// to the first agent when grow is set, as a busy agent would.
type fakeHost struct {
	mu      sync.Mutex
	servers []host.ServerState
	agents  []host.AgentState
	grow    bool
	settled chan struct{}
	calls   int
	backlog int // every agent's, with more
}

func (f *fakeHost) Backlog(context.Context, string) (int, bool) { return f.backlog, f.backlog > 0 }

func (f *fakeHost) Servers() []host.ServerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.servers)
}
func (f *fakeHost) Channels() []host.ChannelState { return nil }
func (f *fakeHost) Agents() []host.AgentState {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.grow && len(f.agents) > 0 {
		a := &f.agents[0]
		a.Recent = append(a.Recent, host.TranscriptEvent{At: time.Now(), Agent: a.Name, Turn: a.Turn, Event: "notice", Text: "refresh " + itoa(f.calls)})
		if len(a.Recent) > host.RecentEvents {
			a.Recent = a.Recent[len(a.Recent)-host.RecentEvents:]
		}
	}
	out := slices.Clone(f.agents)
	for i := range out {
		out[i].Recent = slices.Clone(out[i].Recent)
	}
	return out
}
func (f *fakeHost) Settled() <-chan struct{} { return f.settled }

func itoa(n int) string { return strconv.Itoa(n) }

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	return v
}

// /healthz names every server not connected, and a turn past its
// deadline, with 503; with every server connected and no turn overdue
// it is 200 {"status":"ok"}. A turn still inside its deadline is no
// reason.
func TestHealthzReasons(t *testing.T) {
	since := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	f := &fakeHost{
		servers: []host.ServerState{
			{ID: "up", State: host.StateConnected, Connected: true},
			{ID: "chatroom", State: host.StateDisconnected, Since: since, LastError: "the connection ended, and it will not reconnect"},
			{ID: "missing", State: host.StateFailed, Since: since, LastError: `exec: "no-such": executable file not found in $PATH`},
		},
		agents: []host.AgentState{
			{Name: "ada", InTurn: true, Turn: 3, TurnStartedAt: time.Now().Add(-2 * time.Hour), TurnDeadline: 15 * time.Minute},
			{Name: "bob", InTurn: true, Turn: 1, TurnStartedAt: time.Now(), TurnDeadline: 15 * time.Minute},
		},
	}
	srv := httptest.NewServer(status.Handler(f, prometheus.NewRegistry()))
	defer srv.Close()
	code, body := getPath(t, srv, "/healthz")
	if code != http.StatusServiceUnavailable {
		t.Errorf("/healthz = %d, want 503", code)
	}
	v := decode[status.HealthView](t, body)
	if v.Status != "unhealthy" || len(v.Reasons) != 3 {
		t.Fatalf("/healthz = %s, want unhealthy with three reasons", body)
	}
	if r := v.Reasons[0]; r.Server != "chatroom" || r.State != "disconnected" || !r.Since.Equal(since) || r.LastError == "" {
		t.Errorf("the first reason = %+v, want chatroom disconnected since %v", r, since)
	}
	if r := v.Reasons[1]; r.Server != "missing" || r.State != "failed" || !strings.Contains(r.LastError, "executable file not found") {
		t.Errorf("the second reason = %+v, want missing failed with its error", r)
	}
	if r := v.Reasons[2]; r.Agent != "ada" || r.Turn != 3 || r.RunningFor == "" || r.Deadline != "15m0s" {
		t.Errorf("the third reason = %+v, want ada's turn 3 past 15m", r)
	}
	if !strings.Contains(body, `"runningFor":"2h0m`) {
		t.Errorf("/healthz = %s, want ada's turn running for 2h", body)
	}

	f.mu.Lock()
	f.servers = f.servers[:1]
	f.agents = f.agents[1:]
	f.mu.Unlock()
	if code, body := getPath(t, srv, "/healthz"); code != http.StatusOK || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz with every server connected and no turn overdue = %d %q", code, body)
	}
}

// /readyz is 503 until the host settles, 200 after; /api/host says so,
// with the build and the uptime.
func TestReadyz(t *testing.T) {
	f := &fakeHost{settled: make(chan struct{})}
	srv := httptest.NewServer(status.Handler(f, prometheus.NewRegistry()))
	defer srv.Close()
	code, body := getPath(t, srv, "/readyz")
	if v := decode[status.ReadyView](t, body); code != http.StatusServiceUnavailable || v.Status != "starting" || v.Why == "" {
		t.Errorf("/readyz before the host settled = %d %s", code, body)
	}
	if hv := decode[status.HostView](t, func() string { _, b := getPath(t, srv, "/api/host"); return b }()); hv.Ready || hv.Version == "" || hv.Started.IsZero() || hv.Health != "ok" {
		t.Errorf("/api/host before the host settled = %+v", hv)
	}
	close(f.settled)
	if code, body := getPath(t, srv, "/readyz"); code != http.StatusOK || body != `{"status":"ready"}`+"\n" {
		t.Errorf("/readyz after the host settled = %d %q", code, body)
	}
	if hv := decode[status.HostView](t, func() string { _, b := getPath(t, srv, "/api/host"); return b }()); !hv.Ready {
		t.Errorf("/api/host after the host settled = %+v", hv)
	}
}

// /api/ lists the endpoints, each with what it serves, and each one it
// lists answers (none is a 404).
func TestAPIIndex(t *testing.T) {
	srv := httptest.NewServer(status.Handler(&fakeHost{}, prometheus.NewRegistry()))
	defer srv.Close()
	code, body := getPath(t, srv, "/api/")
	eps := decode[[]status.Endpoint](t, body)
	if code != 200 || len(eps) < 9 {
		t.Fatalf("/api/ = %d %s", code, body)
	}
	var paths []string
	for _, e := range eps {
		paths = append(paths, e.Path)
		if e.What == "" || strings.Contains(e.What, "\n") {
			t.Errorf("%s: %q, want one line", e.Path, e.What)
		}
		if code, _ := getPath(t, srv, e.Path); code == http.StatusNotFound {
			t.Errorf("%s is listed and answers 404", e.Path)
		}
	}
	for _, want := range []string{"/healthz", "/readyz", "/metrics", "/api/servers", "/api/agents", "/api/host"} {
		if !slices.Contains(paths, want) {
			t.Errorf("/api/ lacks %s: %v", want, paths)
		}
	}
}

// /api/servers gives a failed server its state, since when and the last
// error; an agent in a turn has its number, start, duration and wakes.
func TestServerAndTurnShapes(t *testing.T) {
	since := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	started := time.Now().Add(-90 * time.Second)
	f := &fakeHost{
		backlog: 1000,
		servers: []host.ServerState{{ID: "missing", ToolPrefix: "missing", State: host.StateFailed, Since: since, LastError: "exec: no", LastErrorAt: since}},
		agents: []host.AgentState{{Name: "ada", Model: "scripted", InTurn: true, Turn: 2, TurnStartedAt: started, TurnDeadline: time.Hour,
			WokenBy: []host.Wake{{Kind: "channel", Server: "room", Channel: "#general", MessageID: "m1"}}}},
	}
	srv := httptest.NewServer(status.Handler(f, prometheus.NewRegistry()))
	defer srv.Close()
	_, body := getPath(t, srv, "/api/servers")
	want := `[{"id":"missing","toolPrefix":"missing","state":"failed","since":"2026-12-02T15:00:00Z","lastError":"exec: no","lastErrorAt":"2026-12-02T15:00:00Z","calls":[],"effective":[],"denied":[],"featureSets":[]}]`
	if strings.TrimSpace(body) != want {
		t.Errorf("/api/servers = %s\nwant %s", body, want)
	}
	_, body = getPath(t, srv, "/api/agents")
	a := decode[[]status.AgentView](t, body)
	if len(a) != 1 || a[0].Turn != 2 || a[0].TurnStartedAt.Sub(started).Abs() > time.Millisecond ||
		a[0].TurnMs < 90_000 || a[0].TurnMs > 10*60_000 || len(a[0].WokenBy) != 1 || a[0].WokenBy[0].MessageID != "m1" || a[0].TurnDeadlineMs != 3_600_000 ||
		a[0].Backlog != 1000 || !a[0].BacklogMore {
		t.Errorf("/api/agents = %s", body)
	}
}
