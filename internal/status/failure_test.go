package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/status"
)

// startFailing starts a host on the channel server "chat" (a real
// subprocess) with c and ok registered and p admitted by its subscription
// once it registers; then has c's and p's opens fail, opens c and ok as
// an agent's channel_open does (c's fails), and registers p, whose open
// by the subscription policy fails, waiting until the page's API says so.
func startFailing(t *testing.T) *running {
	chans := `[{"id":"c","type":"chat","label":"#c"},{"id":"ok","type":"chat","label":"#ok"}]`
	r := startConfig(t, fmt.Sprintf("servers:\n  - id: chat\n    command: [%q, -channels, %q]\n    channels: {subscription: [p]}\n", chanserver.Binary(t), chans))
	tool := func(name, args string) (string, bool) {
		t.Helper()
		res, err := r.h.CallTool(context.Background(), name, json.RawMessage(args))
		if err != nil {
			return err.Error(), true // a failed tool call, as the agent reads it
		}
		return res.Text(), res.IsError
	}
	for _, id := range []string{"c", "p"} {
		if text, failed := tool("chat--script", `{"channelId":"`+id+`","open":"fail"}`); failed {
			t.Fatalf("script %s: %s", id, text)
		}
	}
	if text, failed := tool("channel_open", `{"channelId":"c","serverId":"chat"}`); !failed {
		t.Fatalf("channel_open c = %q, want its failure", text)
	}
	if text, failed := tool("channel_open", `{"channelId":"ok","serverId":"chat"}`); failed {
		t.Fatalf("channel_open ok: %s", text)
	}
	if text, failed := tool("chat--register", `{"channels":[{"id":"p","type":"chat","label":"#p"}]}`); failed || !strings.Contains(text, `"accepted":true`) {
		t.Fatalf("register p: %s", text)
	}
	r.waitChannel(t, "p", func(c status.ChannelView) bool { return c.OnServer == "open failed" })
	return r
}

// waitChannel reads /api/channels until chat's channel id meets done,
// bounded by waitFor: the subscription's open goes out and fails on the
// registry's own time, after the registration is answered.
func (r *running) waitChannel(t *testing.T, id string, done func(status.ChannelView) bool) status.ChannelView {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		var chans []status.ChannelView
		r.getJSON(t, "/api/channels", &chans)
		for _, c := range chans {
			if c.Server == "chat" && c.ID == id && done(c) {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat/%s never got as wanted within %v: %+v", id, waitFor, chans)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A channel whose decision is open but whose open failed on the server
// reads as both, apart, in /api/channels: decision open (by the agent's
// tool, or by the subscription policy), on the server "open failed" with
// the operator's reason and when; a channel whose open succeeded is open
// and open. A later open that succeeds clears the failure.
func TestAPIShowsFailedOpen(t *testing.T) {
	r := startFailing(t)
	get := func(id string) status.ChannelView {
		return r.waitChannel(t, id, func(status.ChannelView) bool { return true })
	}
	for _, tc := range []struct{ id, source string }{{"c", "agent-tool"}, {"p", "subscription-policy"}} {
		c := get(tc.id)
		want := "channels/open to \"chat\": error -32024: open of " + tc.id + " failed, as scripted"
		if c.Decision != "open" || c.Source != tc.source || c.DecidedAt.IsZero() {
			t.Errorf("%s's decision: %+v, want open by %s, dated", tc.id, c, tc.source)
		}
		if c.OnServer != "open failed" || c.Open || !c.Lifecycle || c.OpenFailed != want || c.CloseFailed != "" || c.FailedAt.IsZero() {
			t.Errorf("%s on the server: %+v, want open failed: %q, dated, not open", tc.id, c, want)
		}
		if c.FailedAt.Before(c.DecidedAt) {
			t.Errorf("%s failed at %v, before it was decided at %v", tc.id, c.FailedAt, c.DecidedAt)
		}
	}
	if c := get("ok"); c.Decision != "open" || c.Source != "agent-tool" || c.OnServer != "open" || !c.Open || c.OpenFailed != "" || !c.FailedAt.IsZero() {
		t.Errorf("ok: %+v, want decided open and open on the server, nothing failed", c)
	}
	// The JSON as a program reads it: the two apart, the failure's fields
	// only where there is one.
	body := r.get(t, "/api/channels")
	for _, want := range []string{`"id":"c"`, `"decision":"open","source":"agent-tool"`, `"onServer":"open failed"`, `"openFailed":"channels/open to \"chat\": error -32024: open of c failed, as scripted"`, `"onServer":"open"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/api/channels lacks %s: %s", want, body)
		}
	}
	if strings.Count(body, `"openFailed"`) != 2 || strings.Count(body, `"failedAt"`) != 2 || strings.Contains(body, `"closeFailed"`) {
		t.Errorf("/api/channels: want openFailed and failedAt on c and p only: %s", body)
	}

	res, err := r.h.CallTool(context.Background(), "chat--script", json.RawMessage(`{"channelId":"c","open":"ok"}`))
	if err != nil || res.IsError {
		t.Fatalf("script c: %+v %v", res, err)
	}
	res, err = r.h.CallTool(context.Background(), "channel_open", json.RawMessage(`{"channelId":"c","serverId":"chat"}`))
	if err != nil || res.IsError {
		t.Fatalf("channel_open c again: %+v %v", res, err)
	}
	if c := get("c"); c.OnServer != "open" || !c.Open || c.OpenFailed != "" || !c.FailedAt.IsZero() || c.Decision != "open" {
		t.Errorf("c after an open that succeeded: %+v, want open and open, the failure gone", c)
	}
}

// The page shows the same two things in their own columns: the decision
// (open, by agent-tool) and, on the server, "open failed" with the
// server's words; the channel whose open succeeded reads open on the
// server.
func TestPageShowsFailedOpen(t *testing.T) {
	bctx := chromium(t, 90*time.Second)
	r := startFailing(t)
	row := func(id string) string { return `tr[data-channel="chat/` + id + `"]` }
	if err := chromedp.Do(bctx, chromedp.Navigate(r.srv.URL()), chromedp.WaitVisible(row("p")+` td.live .o-failed`)); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	text := func(sel string) string { return pageText(t, bctx, sel) }
	for _, tc := range []struct{ id, source string }{{"c", "agent-tool"}, {"p", "subscription-policy"}} {
		if d, s := text(row(tc.id)+` td.decision`), text(row(tc.id)+` td.source`); d != "open" || s != tc.source {
			t.Errorf("%s's decision on the page: %q by %q, want open by %s", tc.id, d, s, tc.source)
		}
		live := text(row(tc.id) + ` td.live`)
		want := `open failed — channels/open to "chat": error -32024: open of ` + tc.id + ` failed, as scripted (`
		if !strings.HasPrefix(live, want) || !strings.HasSuffix(live, ") · chat") {
			t.Errorf("%s on the server, on the page: %q, want it to start %q and end with its time and type", tc.id, live, want)
		}
	}
	if d, live := text(row("ok")+` td.decision`), text(row("ok")+` td.live`); d != "open" || live != "open · chat" {
		t.Errorf("ok on the page: decision %q, on the server %q; want open and open · chat", d, live)
	}
	if head := text(`#channels thead`); !strings.Contains(head, "DECISION\t") || !strings.Contains(head, "\tON THE SERVER") {
		t.Errorf("the channels' heading %q, want Decision and On the server apart", head)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil || len(shot) < 8 || string(shot[1:4]) != "PNG" {
		t.Fatalf("the screenshot: %d bytes, %v", len(shot), err)
	}
	out := filepath.Join(filepath.Dir(screenshotPath(t)), "status-page-failed-open.png")
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the page with failed opens: %s", out)
}
