package status_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/status"
)

// evalJS runs js on bctx's page and returns its value.
func evalJS[T any](t *testing.T, bctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(bctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// refreshes is how many times the page has refreshed (its counter).
func refreshes(t *testing.T, bctx context.Context) int {
	return evalJS[int](t, bctx, `Number(document.body.dataset.refreshes || 0)`)
}

// awaitRefreshes waits, polling, until the page has refreshed n more
// times than from.
func awaitRefreshes(t *testing.T, bctx context.Context, from, n int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for refreshes(t, bctx) < from+n {
		if time.Now().After(deadline) {
			t.Fatalf("the page did not refresh %d times past %d within %v", n, from, waitFor)
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
}

// awaitText polls sel's text until it is want, within waitFor, and returns
// the last read.
func awaitText(t *testing.T, bctx context.Context, sel, want string) string {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		got := pageText(t, bctx, sel)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
}

// A configured server whose command does not exist is listed on the page
// as failed, with the error, beside the one that connected; the header
// says the host is unhealthy. With MCPL_SCREENSHOT=1 it saves the page as
// docs/status-page-servers.png.
func TestPageShowsAFailedServerInChromium(t *testing.T) {
	bctx := chromium(t, 90*time.Second)
	chans := `[{"id":"c","type":"chat","label":"#c"}]`
	r := startConfig(t, fmt.Sprintf(`servers:
  - id: chat
    command: [%q, -channels, %q]
  - id: missing
    command: [/nonexistent/mcpl-chatroom]
`, chanserver.Binary(t), chans))
	const (
		chat    = `tr[data-server="chat"] td.state .s-connected`
		missing = `tr[data-server="missing"] td.state .s-failed`
	)
	if err := chromedp.Do(bctx, chromedp.Navigate(r.srv.URL()), chromedp.WaitVisible(chat), chromedp.WaitVisible(missing)); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	if got := pageText(t, bctx, `tr[data-server="missing"] td.error`); !strings.Contains(got, "/nonexistent/mcpl-chatroom") {
		t.Errorf("missing's last error on the page: %q, want the exec error naming its command", got)
	}
	if got := pageText(t, bctx, `tr[data-server="chat"] td.error`); got != "none" {
		t.Errorf("chat's last error on the page: %q, want none", got)
	}
	// The header's health follows /api/host, whose readiness may lag the
	// servers' states by a refresh.
	if got := awaitText(t, bctx, `#health`, "unhealthy: 1 server not connected"); got != "unhealthy: 1 server not connected" {
		t.Errorf("the header's health: %q", got)
	}
	if got := pageText(t, bctx, `#build`); !strings.Contains(got, " · up ") {
		t.Errorf("the header's build and uptime: %q", got)
	}
	if os.Getenv("MCPL_SCREENSHOT") != "1" {
		return
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(filepath.Dir(file), "..", "..", "docs", "status-page-servers.png")
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

// An agent's events show newest first; a reader who scrolled its list to
// 190 px is still there after two refreshes, though a new event arrived
// at each (the list is rebuilt then, and its scroll put back); and its
// turn in progress shows with its duration and what woke it.
func TestPageKeepsScrollAndShowsTheTurnInChromium(t *testing.T) {
	bctx := chromium(t, 90*time.Second)
	started := time.Now().Add(-75 * time.Second)
	var recent []host.TranscriptEvent
	for i := range 60 {
		recent = append(recent, host.TranscriptEvent{At: started, Agent: "ada", Turn: 4, Event: "notice", Text: "old " + strconv.Itoa(i)})
	}
	f := &fakeHost{grow: true,
		servers: []host.ServerState{{ID: "room", State: host.StateConnected, Connected: true}},
		agents: []host.AgentState{{Name: "ada", Model: "scripted", InTurn: true, Turn: 4, TurnStartedAt: started, TurnDeadline: time.Hour,
			WokenBy: []host.Wake{{Kind: "channel", Server: "room", Channel: "#general", MessageID: "m7"}}, Recent: recent}},
	}
	srv, err := status.Start("127.0.0.1:0", f, prometheus.NewRegistry(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	const list = `section[data-agent="ada"] ol.events`
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL()), chromedp.WaitVisible(list+` li`)); err != nil {
		t.Fatalf("loading the page: %v", err)
	}

	// Newest first: the first item is the latest refresh's event, the
	// last the oldest of the 30 /api/agents gives.
	first := evalJS[string](t, bctx, `document.querySelector('`+list+` li').textContent`)
	last := evalJS[string](t, bctx, `document.querySelector('`+list+` li:last-child').textContent`)
	if !strings.Contains(first, "refresh ") || !strings.Contains(last, "old ") {
		t.Errorf("the event list starts with %q and ends with %q; want the newest first, the oldest last", first, last)
	}

	turn := pageText(t, bctx, `section[data-agent="ada"] .turn`)
	if !regexp.MustCompile(`^in turn 4 for 1 min \d+ s, woken by m7 in #general on room$`).MatchString(turn) {
		t.Errorf("ada's turn on the page: %q, want its number, its duration and what woke it", turn)
	}

	top := evalJS[float64](t, bctx, `(() => { const l = document.querySelector('`+list+`'); l.scrollTop = 190; return l.scrollTop; })()`)
	if top < 180 {
		t.Fatalf("the list scrolled only to %v px: too short to test", top)
	}
	from := refreshes(t, bctx)
	before := evalJS[string](t, bctx, `document.querySelector('`+list+` li').textContent`)
	awaitRefreshes(t, bctx, from, 2)
	if got := evalJS[float64](t, bctx, `document.querySelector('`+list+`').scrollTop`); got < 180 {
		t.Errorf("after two refreshes the list is scrolled to %v px, want it kept at 190", got)
	}
	if after := evalJS[string](t, bctx, `document.querySelector('`+list+` li').textContent`); after == before {
		t.Errorf("the first event is still %q after two refreshes: no new event came in, so the rebuild was not tested", after)
	}
}
