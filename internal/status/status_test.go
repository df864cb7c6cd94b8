package status_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/status"
)

// The API through a real host on the chat room: the room's server with its
// grant, its channels with their decisions, the agent's turn, and the
// metrics; a channel the host opens shows as open, decided by its tool.
func TestAPIThroughHost(t *testing.T) {
	r := startRoom(t)
	if got := r.get(t, "/healthz"); got != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz = %q", got)
	}
	var servers []status.ServerView
	r.getJSON(t, "/api/servers", &servers)
	if len(servers) != 1 || servers[0].ID != "room" || servers[0].State != "connected" || servers[0].Name != "chatroom" || servers[0].MCPL != "0.5" ||
		servers[0].Protocol != "2025-11-25" || servers[0].Stateless {
		t.Fatalf("/api/servers = %+v, want the room, connected", servers)
	}
	if s := servers[0]; s.Policy != "accepted" || !slices.Contains(s.Effective, "channels.lifecycle") || len(s.FeatureSets) == 0 || s.FeatureSets[0].State != "enabled" {
		t.Errorf("the room's policy, grant and feature sets: %+v", s)
	}

	r.waitTurn(t)
	var agents []status.AgentView
	r.getJSON(t, "/api/agents", &agents)
	if len(agents) != 1 || agents[0].Name != "ada" || agents[0].Model != "scripted" || agents[0].Turns != 1 || agents[0].TokensIn == 0 {
		t.Fatalf("/api/agents = %+v, want ada after one turn", agents)
	}
	var said bool
	for _, e := range agents[0].Recent {
		said = said || (e.Event == "speech" && e.Text == "Morning, alice!" && e.Outcome == "delivered")
	}
	if !said {
		t.Errorf("ada's recent events lack her delivered reply: %+v", agents[0].Recent)
	}
	r.getJSON(t, "/api/agents?recent=1", &agents)
	if len(agents[0].Recent) != 1 || agents[0].Recent[0].Event != "turn_end" {
		t.Errorf("?recent=1 gave %+v, want the last event only", agents[0].Recent)
	}

	if c := r.channel(t, "chatroom:#dev"); !c.Registered || c.Open || c.Decision != "closed" || c.Source != "default-closed" {
		t.Errorf("#dev before the open: %+v, want registered, closed by default", c)
	}
	// The host has sent #general one channels/open before this, or two:
	// it varies from run to run (7 and 13 of 20), with ada's reply there
	// meeting the first in flight. The open of #dev adds exactly one.
	opens := `mcpl_requests_total{direction="sent",method="channels/open",outcome="ok",server="room"}`
	before := r.metricValue(t, opens)
	t.Logf("channels/open sent before channel_open: %v", before)
	r.openDev(t)
	if after := r.metricValue(t, opens); after != before+1 {
		t.Errorf("channels/open sent: %v before channel_open, %v after; want one more", before, after)
	}
	c := r.channel(t, "chatroom:#dev")
	if !c.Open || c.Decision != "open" || c.Source != "agent-tool" || c.DecidedAt.IsZero() || c.Label != "#dev" {
		t.Errorf("#dev after channel_open: %+v, want open, decided, with its source", c)
	}

	for name, want := range map[string]string{
		"mcpl_server_connected":    `mcpl_server_connected{server="room"} 1`,
		"mcpl_channels_open":       `mcpl_channels_open{server="room"} 2`,
		"mcpl_channels_registered": `mcpl_channels_registered{server="room"} 3`,
		"mcpl_reconnects_total":    `mcpl_reconnects_total{server="room"} 0`,
		"mcpl_inbound_queue_depth": `mcpl_inbound_queue_depth{server="room"} 0`,
		`mcpl_request_duration_seconds_count{direction="answered",method="channels/register"`: `mcpl_request_duration_seconds_count{direction="answered",method="channels/register",server="room"} 1`,
		"mcpl_agent_turns_total": `mcpl_agent_turns_total{agent="ada",reason="end_turn"} 1`,
	} {
		if got := r.metricLines(t, name); !slices.Contains(got, want) {
			t.Errorf("/metrics: want %s, got %q", want, got)
		}
	}
	if got := r.metricLines(t, `mcpl_model_tokens_total{agent="ada",direction="out",provider="scripted"}`); len(got) != 1 || strings.HasSuffix(got[0], " 0") {
		t.Errorf("/metrics: ada's tokens out: %q", got)
	}
	if got := r.metricLines(t, `mcpl_model_calls_total{agent="ada",outcome="ok",provider="scripted"}`); len(got) != 1 || strings.HasSuffix(got[0], " 0") {
		t.Errorf("/metrics: ada's model calls: %q", got)
	}
}

// The page is one self-contained document: no external script, style or
// font, and a policy that forbids loading any.
func TestPageSelfContained(t *testing.T) {
	r := startRoom(t)
	if !r.srv.Loopback() {
		t.Errorf("a status server on %s says it is not on loopback", r.srv.Addr())
	}
	resp, err := client.Get(r.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	page := r.get(t, "/")
	for _, bad := range []string{"src=\"http", "href=\"http", "@import", "<link", "src=\"//"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page loads something from elsewhere: %q", bad)
		}
	}
	if !strings.Contains(page, "api/channels") || strings.Contains(page, "innerHTML") {
		t.Error("the page should read the API and never write markup from it")
	}
	for _, path := range []string{"/api/agents?recent=x", "/nope"} {
		resp, err := client.Get("http://" + r.srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("GET %s: %s, want a client error", path, resp.Status)
		}
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"8080":           "127.0.0.1:8080",
		":8080":          "127.0.0.1:8080",
		"127.0.0.1:0":    "127.0.0.1:0",
		"0.0.0.0:9000":   "0.0.0.0:9000",
		"[::1]:9000":     "[::1]:9000",
		"localhost:9000": "localhost:9000",
	} {
		if got, err := status.ListenAddr(in); err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", ":x", "1:2:3", "70000"} {
		if got, err := status.ListenAddr(bad); err == nil {
			t.Errorf("ListenAddr(%q) = %q, want an error", bad, got)
		}
	}
}
