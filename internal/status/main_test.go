package status_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/status"
	"github.com/mcpl-go/mcpl/internal/testbin"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testbin.Chatroom.Cleanup()
		chanserver.Cleanup()
		os.Exit(code)
	}))
}

// client makes no keep-alive connections, so none outlives a test.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}

var quiet = slog.New(slog.DiscardHandler)

// waitFor bounds every wait on the real host.
const waitFor = 15 * time.Second

// running is a host on the chat room (examples/chatroom, a real
// subprocess) with a scripted agent, and its status server.
type running struct {
	h    *host.Host
	srv  *status.Server
	turn chan struct{} // a turn ended
}

// startRoom starts the host: alice addresses ada in #general (open), and
// ada answers; #dev and #random stay closed.
func startRoom(t *testing.T) *running {
	bin := testbin.Chatroom.Path(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	room := write("room.script", "+0s #general alice @agent: morning!\n")
	write("ada.yaml", "steps:\n  - say: Morning, alice!\n")
	cfgPath := write("config.yaml", fmt.Sprintf(`servers:
  - id: room
    command: [%q, -q, -script, %q]
agents:
  - name: ada
    model: {provider: scripted, script: ./ada.yaml}
`, bin, room))
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := &running{turn: make(chan struct{}, 8)}
	h, err := host.New(host.Options{Logger: quiet, Metrics: reg, Transcript: turnSignal(r.turn)})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	t.Cleanup(func() { h.Close() })
	if err := h.Start(cfg); err != nil {
		t.Fatal(err)
	}
	r.srv = serve(t, h, reg)
	return r
}

// serve starts h's status server on 127.0.0.1, closed as the test ends,
// and waits for h's servers to connect.
func serve(t *testing.T, h *host.Host, reg *prometheus.Registry) *status.Server {
	t.Helper()
	srv, err := status.Start("127.0.0.1:0", h, reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the status server: %v", err)
		}
	})
	select {
	case <-h.Settled():
	case <-time.After(waitFor):
		t.Fatal("the host's servers did not connect")
	}
	return srv
}

// turnSignal is a transcript writer that signals each turn's end.
type turnSignal chan struct{}

func (s turnSignal) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"event":"turn_end"`)) {
		s <- struct{}{}
	}
	return len(p), nil
}

func (r *running) waitTurn(t *testing.T) {
	t.Helper()
	select {
	case <-r.turn:
	case <-time.After(waitFor):
		t.Fatal("no turn ended")
	}
}

// openDev has the host open #dev, as an agent's channel_open does.
func (r *running) openDev(t *testing.T) {
	t.Helper()
	res, err := r.h.CallTool(context.Background(), "channel_open", json.RawMessage(`{"channelId":"chatroom:#dev","serverId":"room"}`))
	if err != nil || res.IsError {
		t.Fatalf("channel_open: %+v %v", res, err)
	}
}

// get fetches path from the status server, wanting 200.
func (r *running) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := client.Get("http://" + r.srv.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return string(b)
}

// getJSON fetches path and decodes it into v.
func (r *running) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.get(t, path)), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// channel finds one channel in /api/channels.
func (r *running) channel(t *testing.T, id string) status.ChannelView {
	t.Helper()
	var chans []status.ChannelView
	r.getJSON(t, "/api/channels", &chans)
	for _, c := range chans {
		if c.Server == "room" && c.ID == id {
			return c
		}
	}
	t.Fatalf("/api/channels lacks room/%s: %+v", id, chans)
	return status.ChannelView{}
}

// metricValue returns the value of the one metric line that starts with
// series, or 0 when there is none.
func (r *running) metricValue(t *testing.T, series string) float64 {
	t.Helper()
	lines := r.metricLines(t, series+" ")
	if len(lines) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimPrefix(lines[0], series+" "), 64)
	if err != nil || len(lines) > 1 {
		t.Fatalf("/metrics %s: %q", series, lines)
	}
	return v
}

// metricLines returns the lines of /metrics that start with name.
func (r *running) metricLines(t *testing.T, name string) []string {
	var out []string
	for _, l := range strings.Split(r.get(t, "/metrics"), "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return out
}
