package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statusURL waits (polling stderr: a line being written has no event
// here) for run's "status page at" line and returns the page's address.
func statusURL(t *testing.T, p *runProc) string {
	t.Helper()
	re := regexp.MustCompile(`status page at (http://\S+/)\n`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1]
		}
		select {
		case <-p.done:
			t.Fatalf("mcplhost run exited before serving its status:\n%s", clip(p.stderr.String()))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no status page line within 60 s:\n%s", clip(p.stderr.String()))
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
}

// apiServer is an entry of /api/servers, as much as this test reads.
type apiServer struct {
	ID, State, LastError string
	Since                time.Time
}

// pollUntil polls every 20 ms until done says so or 60 s pass (a loaded
// 2-core machine under -race), and fails saying what was last seen.
func pollUntil(t *testing.T, what string, done func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, seen := done()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s; last seen:\n%s", what, seen)
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
	}
}

// mcplhost run --status on two servers, a real channel server and one
// whose command does not exist: the missing one is listed as failed with
// its error from the start (in the API, the metrics and /healthz, 503);
// once the channel server's process is killed, the API lists it as not
// connected, /metrics keeps its series at mcpl_server_connected 0, and
// /healthz names it too.
func TestRunServerState(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "chat.control")
	cfg := filepath.Join(dir, "host.yaml")
	if err := os.WriteFile(cfg, []byte("store: ./host.db\nservers:\n  - id: chat\n    command: "+chanserverCommand(t, ctl)+
		// Redialed, but not before the test has read it down.
		"\n    reconnect: {enabled: true, initial: 1h, max: 1h}"+
		"\n  - id: missing\n    command: [/nonexistent/mcpl-no-such-server]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRun(t, dir, cfg, "host", "--status", "127.0.0.1:0")
	url := statusURL(t, p)
	c := awaitControl(t, ctl, p)

	var servers []apiServer
	byID := func(id string) apiServer {
		for _, s := range servers {
			if s.ID == id {
				return s
			}
		}
		return apiServer{}
	}
	readServers := func() string {
		_, body := httpGet(t, url+"api/servers")
		if err := json.Unmarshal([]byte(body), &servers); err != nil {
			t.Fatalf("/api/servers: %v: %s", err, body)
		}
		return body
	}
	pollUntil(t, "chat connected and missing failed in /api/servers", func() (bool, string) {
		body := readServers()
		return len(servers) == 2 && byID("chat").State == "connected" && byID("missing").State == "failed", body
	})
	if m := byID("missing"); !strings.Contains(m.LastError, "/nonexistent/mcpl-no-such-server") || m.Since.IsZero() {
		t.Errorf("missing in /api/servers: %+v, want its exec error and since when", m)
	}
	if code, body := httpGet(t, url+"readyz"); code != 200 || strings.TrimSpace(body) != `{"status":"ready"}` {
		t.Errorf("/readyz once both connects ended: %d %s", code, body)
	}
	health := func() (int, healthBody) {
		code, body := httpGet(t, url+"healthz")
		var h healthBody
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("/healthz: %v: %s", err, body)
		}
		h.raw = body
		return code, h
	}
	if code, h := health(); code != 503 || h.Status != "unhealthy" || !h.names("missing", "failed") || h.names("chat", "") {
		t.Errorf("/healthz with missing failed = %d %s, want 503 naming missing only", code, h.raw)
	}
	_, metrics := httpGet(t, url+"metrics")
	for _, want := range []string{`mcpl_server_connected{server="chat"} 1`, `mcpl_server_connected{server="missing"} 0`,
		`mcpl_server_state{server="missing",state="failed"} 1`, `mcpl_server_state{server="chat",state="connected"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics before the kill lacks %q", want)
		}
	}
	if strings.Contains(metrics, `mcpl_server_last_error_timestamp_seconds{server="missing"} 0`+"\n") {
		t.Error("/metrics: missing's last error has no time")
	}

	// The channel server dies, as a crash would end it.
	if err := syscall.Kill(c.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the channel server %d: %v", c.Pid, err)
	}
	// The state follows the session at once; the loss is recorded as its
	// last error when the host hears of it (OnDisconnect), a moment later.
	pollUntil(t, "chat not connected in /api/servers, with its loss recorded", func() (bool, string) {
		body := readServers()
		s := byID("chat")
		return (s.State == "disconnected" || s.State == "reconnecting") && s.LastError != "", body
	})
	if s := byID("chat"); s.LastError == "" || s.Since.IsZero() {
		t.Errorf("chat after the kill: %+v, want the loss as its last error, and since when", s)
	}
	if len(servers) != 2 || byID("missing").State != "failed" {
		t.Errorf("/api/servers after the kill: %+v, want both, missing still failed", servers)
	}
	_, metrics = httpGet(t, url+"metrics")
	state := byID("chat").State
	for _, want := range []string{`mcpl_server_connected{server="chat"} 0`, `mcpl_server_state{server="chat",state="` + state + `"} 1`,
		`mcpl_server_state{server="chat",state="connected"} 0`, `mcpl_server_connected{server="missing"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics after the kill lacks %q", want)
		}
	}
	if code, h := health(); code != 503 || !h.names("chat", state) || !h.names("missing", "failed") {
		t.Errorf("/healthz after the kill = %d %s, want 503 naming chat and missing", code, h.raw)
	}
	if code := p.stop(); code != 128+15 {
		t.Errorf("mcplhost run exited %d:\n%s", code, clip(p.stderr.String()))
	}
}

// healthBody is /healthz's JSON, as much as this test reads.
type healthBody struct {
	Status  string
	Reasons []struct{ Server, State, LastError string }
	raw     string
}

// names says whether a reason names server (in state, when not "").
func (h healthBody) names(server, state string) bool {
	for _, r := range h.Reasons {
		if r.Server == server && (state == "" || r.State == state) {
			return true
		}
	}
	return false
}
