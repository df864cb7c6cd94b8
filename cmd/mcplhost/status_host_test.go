package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// runWithStatus runs `mcplhost run --status addr` in this process on the
// chat room (a real subprocess) and returns the status page's URL as run
// printed it, and stop, which stops the run and checks that it ended
// cleanly; the test's end calls it too, if the test didn't.
func runWithStatus(t *testing.T, addr string) (*url.URL, func()) {
	t.Helper()
	bin := buildChatroom(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "quiet.script")
	if err := os.WriteFile(script, []byte("+1h #random alice: much later\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "host.yaml")
	if err := os.WriteFile(cfg, []byte("store: ./host.db\nservers:\n  - id: room\n    command: ["+bin+", -q, -script, "+script+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &lineWatch{re: regexp.MustCompile(`status page at (http://\S+/)\n`), found: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "--config", cfg, "--status", addr}, io.Discard, stderr)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("run ended with %d:\n%s", code, stderr)
			}
		})
	}
	t.Cleanup(stop)
	var page string
	select {
	case page = <-stderr.found:
	case code := <-done:
		done <- code
		t.Fatalf("run ended with %d before serving its status:\n%s", code, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("no status page line:\n%s", stderr)
	}
	u, err := url.Parse(page)
	if err != nil {
		t.Fatalf("status page line %q: %v", page, err)
	}
	return u, stop
}

// getWithHost fetches path from the address dial, with the Host header
// host, and returns the status and body.
func getWithHost(t *testing.T, dial, path, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+dial+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %q): %v", req.URL, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mcplhost run --status answers a foreign Host header (a DNS-rebinding
// page's) with 421 on every path, and its own address and localhost with
// the answers.
func TestRunStatusRefusesForeignHost(t *testing.T) {
	u, _ := runWithStatus(t, "127.0.0.1:0")
	port := u.Port()
	for _, path := range []string{"/", "/healthz", "/metrics", "/api/agents", "/api/servers", "/api/channels"} {
		code, body := getWithHost(t, u.Host, path, "evil.example:"+port)
		if code != http.StatusMisdirectedRequest || !strings.HasPrefix(body, `mcplhost status: refused, nothing served: the Host header said "evil.example:`+port+`"`) {
			t.Errorf("GET %s with Host evil.example: %d %.300q, want 421 saying why", path, code, body)
		}
		for _, own := range []string{u.Host, "localhost:" + port} {
			if code, body := getWithHost(t, u.Host, path, own); code != http.StatusOK {
				t.Errorf("GET %s with Host %q: %d %.300q, want 200", path, own, code, body)
			}
		}
	}
}

// --status 0.0.0.0:0 listens on IPv4 only and --status [::]:0 on IPv6
// only; the URL each prints is one its Host check accepts.
func TestRunStatusOneFamily(t *testing.T) {
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback here (%v): the listening families can't be told apart", err)
	} else {
		ln.Close()
	}
	for _, tc := range []struct{ listen, reach, unreachable string }{
		{"0.0.0.0:0", "127.0.0.1", "::1"},
		{"[::]:0", "::1", "127.0.0.1"},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			u, _ := runWithStatus(t, tc.listen)
			reach := net.JoinHostPort(tc.reach, u.Port())
			if code, body := getWithHost(t, reach, "/healthz", u.Host); code != http.StatusOK || body != `{"status":"ok"}`+"\n" {
				t.Errorf("/healthz over %s with Host %q (the printed URL's): %d %q", reach, u.Host, code, body)
			}
			other := net.JoinHostPort(tc.unreachable, u.Port())
			if c, err := net.Dial("tcp", other); err == nil {
				c.Close()
				t.Errorf("--status %s (%s) took a connection over %s", tc.listen, u, other)
			}
		})
	}
}
