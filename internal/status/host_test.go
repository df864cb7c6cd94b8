package status_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/status"
)

// getHost fetches url with the Host header set to hostHeader and returns
// the status and body.
func getHost(t *testing.T, url, hostHeader string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = hostHeader
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %q): %v", url, hostHeader, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A request whose Host names another server (a DNS-rebinding page's) gets
// 421 on every path, the page's included, and reads nothing of the host;
// the status server's own address and localhost get the answers.
func TestHostHeaderRefused(t *testing.T) {
	r := startRoom(t)
	addr := r.srv.Addr()
	_, port, _ := net.SplitHostPort(addr)
	paths := []string{"/", "/healthz", "/metrics", "/api/servers", "/api/channels", "/api/agents"}
	for _, p := range paths {
		for _, foreign := range []string{"evil.example:" + port, "evil.example", "127.0.0.1:1" + port, "[::1]:" + port} {
			code, body := getHost(t, "http://"+addr+p, foreign)
			if code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: %d, want 421; body %.200q", p, foreign, code, body)
				continue
			}
			want := `mcplhost status: refused, nothing served: the Host header said "` + foreign + `", and this server answers only requests addressed to http://` + addr + `/ (or localhost with that port).`
			if !strings.HasPrefix(body, want) || strings.Contains(body, "chatroom") {
				t.Errorf("GET %s with Host %q: body %q, want it to start %q and to show nothing of the host", p, foreign, body, want)
			}
		}
		for _, own := range []string{addr, "localhost:" + port, "LOCALHOST:" + port} {
			if code, body := getHost(t, "http://"+addr+p, own); code != http.StatusOK {
				t.Errorf("GET %s with Host %q: %d, want 200; body %.200q", p, own, code, body)
			}
		}
	}
	if code, body := getHost(t, "http://"+addr+"/api/servers", "localhost:"+port); !strings.Contains(body, `"name":"chatroom"`) {
		t.Errorf("/api/servers with Host localhost: %d %.200q, want the room", code, body)
	}
}

// noHost is a Host with nothing in it, for the listening tests.
type noHost struct{}

func (noHost) Servers() []host.ServerState                 { return nil }
func (noHost) Channels() []host.ChannelState               { return nil }
func (noHost) Agents() []host.AgentState                   { return nil }
func (noHost) Backlog(context.Context, string) (int, bool) { return 0, false }

// ipv6Loopback skips the test when the machine has no IPv6 loopback.
func ipv6Loopback(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here (%v): the listening families can't be told apart", err)
	}
	ln.Close()
}

// startStatus starts a status server on addr over noHost.
func startStatus(t *testing.T, addr string) *status.Server {
	t.Helper()
	srv, err := status.Start(addr, noHost{}, prometheus.NewRegistry(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the status server: %v", err)
		}
	})
	return srv
}

// 0.0.0.0 listens on IPv4 only and [::] on IPv6 only: each is reachable
// over its own family's loopback (and answers with its own address in
// Host, the one the URL shows, or the loopback one), not over the other's.
func TestListenOneFamily(t *testing.T) {
	ipv6Loopback(t)
	for _, tc := range []struct {
		listen, reach, unreachable string
	}{
		{"0.0.0.0:0", "127.0.0.1", "::1"},
		{"[::]:0", "::1", "127.0.0.1"},
	} {
		srv := startStatus(t, tc.listen)
		_, port, _ := net.SplitHostPort(srv.Addr())
		if srv.Loopback() {
			t.Errorf("%s: says it is on loopback", srv.Addr())
		}
		reach := net.JoinHostPort(tc.reach, port)
		for _, h := range []string{srv.Addr(), reach} {
			if code, body := getHost(t, "http://"+reach+"/healthz", h); code != http.StatusOK || body != `{"status":"ok"}`+"\n" {
				t.Errorf("%s: /healthz over %s with Host %q: %d %q, want 200 ok", tc.listen, reach, h, code, body)
			}
		}
		if code, _ := getHost(t, "http://"+reach+"/healthz", "localhost:"+port); code != http.StatusMisdirectedRequest {
			t.Errorf("%s: Host localhost on a wildcard listener: %d, want 421", tc.listen, code)
		}
		other := net.JoinHostPort(tc.unreachable, port)
		if c, err := net.Dial("tcp", other); err == nil {
			c.Close()
			t.Errorf("%s (%s) took a connection over %s", tc.listen, srv.Addr(), other)
		}
	}
}

// [::1] listens on IPv6's loopback, and takes its own literal and
// localhost in Host.
func TestListenIPv6Loopback(t *testing.T) {
	ipv6Loopback(t)
	srv := startStatus(t, "[::1]:0")
	if !srv.Loopback() {
		t.Errorf("%s: says it is not on loopback", srv.Addr())
	}
	_, port, _ := net.SplitHostPort(srv.Addr())
	for h, want := range map[string]int{srv.Addr(): 200, "localhost:" + port: 200, "127.0.0.1:" + port: 421, "evil.example:" + port: 421} {
		if code, _ := getHost(t, srv.URL()+"healthz", h); code != want {
			t.Errorf("Host %q: %d, want %d", h, code, want)
		}
	}
}
