package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// client makes no keep-alive connections, so none outlives a test.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}

// httpGet gets url with client: its status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// lineWatch is a writer that tells when a line matching re is written.
type lineWatch struct {
	re    *regexp.Regexp
	found chan string

	mu   sync.Mutex
	text strings.Builder
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text.Write(p)
	if m := w.re.FindStringSubmatch(w.text.String()); m != nil {
		w.once.Do(func() { w.found <- m[1] })
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.text.String()
}

// mcplhost run --status serves the status page, its API and metrics for
// the running host (the chat room, a real subprocess), and stops serving
// when run stops.
func TestRunStatus(t *testing.T) {
	u, stop := runWithStatus(t, "127.0.0.1:0")
	if u.Hostname() != "127.0.0.1" {
		t.Errorf("the status page is at %s, want 127.0.0.1", u)
	}
	url := u.String()
	get := func(path string) (int, string) { return httpGet(t, url+path) }
	if code, body := get("healthz"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(""); code != 200 || !strings.Contains(body, "<title>mcplhost status</title>") {
		t.Errorf("/: %d, not the page", code)
	}
	// The room connects in the background, then registers its three
	// channels; the API shows each step as it comes.
	deadline := time.Now().Add(30 * time.Second)
	var servers []struct{ ID, State string }
	var channels []struct {
		ID                 string
		Registered         bool
		Decision, OnServer string
	}
	// registered counts the channels registered whose state on the
	// server is settled (each decision carried out: open or closed).
	registered := func() int {
		n := 0
		for _, c := range channels {
			if c.Registered && (c.OnServer == "open" || c.OnServer == "closed") {
				n++
			}
		}
		return n
	}
	for {
		_, body := get("api/servers")
		if err := json.Unmarshal([]byte(body), &servers); err != nil {
			t.Fatalf("/api/servers: %v: %s", err, body)
		}
		_, body = get("api/channels")
		if err := json.Unmarshal([]byte(body), &channels); err != nil {
			t.Fatalf("/api/channels: %v: %s", err, body)
		}
		if len(servers) == 1 && servers[0].State == "connected" && registered() == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the API, as its page does
	}
	if len(servers) != 1 || servers[0].ID != "room" || servers[0].State != "connected" || registered() != 3 {
		t.Fatalf("/api/servers = %+v, /api/channels = %+v", servers, channels)
	}
	// The decision and the server's state, apart: #general is decided
	// open and open on the server, the others closed and closed.
	for _, c := range channels {
		want := "closed"
		if c.ID == "chatroom:#general" {
			want = "open"
		}
		if c.Decision != want || c.OnServer != want {
			t.Errorf("/api/channels: %s decided %q, %q on the server; want %s and %s", c.ID, c.Decision, c.OnServer, want, want)
		}
	}
	_, metrics := get("metrics")
	for _, want := range []string{`mcpl_server_connected{server="room"} 1`, `mcpl_channels_registered{server="room"} 3`, "go_goroutines ", "process_open_fds "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	stop()
	if _, err := client.Get(url + "healthz"); err == nil {
		t.Error("the status server still answers after run stopped")
	}
}

func TestRunStatusUsage(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"x:y", `mcplhost run: --status "x:y": "y" is not a port`},
		{"", `mcplhost run: --status "": an address is required`},
	} {
		code, _, stderr := runCLI("run", "--config", "none.yaml", "--status", tc.arg)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("--status %q: exit %d, stderr %q; want 2 and %q", tc.arg, code, stderr, tc.want)
		}
	}
}
