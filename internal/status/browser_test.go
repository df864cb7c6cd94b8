package status_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium (.ci/run installs it when missing).
// Without one the browser test is skipped, saying why, except under CI,
// where it fails.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH under CI: .ci/run installs Debian's chromium package")
	}
	t.Skip("skipped: no chromium on PATH (apt-get install chromium, or run .ci/run, which installs it)")
	return ""
}

// screenshotPath is where the browser test leaves its screenshot for
// people to look at: $MCPL_ARTIFACTS, or artifacts/ at the module's root
// (ignored by git).
func screenshotPath(t *testing.T) string {
	dir := os.Getenv("MCPL_ARTIFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "status-page.png")
}

// The status page in headless Chromium: it loads, shows the room's server
// connected and its channels, the agent's reply, and, when the host opens
// #dev, shows #dev open by its next refresh, with nothing reloaded by
// hand. It saves a screenshot.
func TestPageInChromium(t *testing.T) {
	bctx := chromium(t, 90*time.Second)
	r := startRoom(t)
	r.waitTurn(t)

	const (
		room    = `tr[data-server="room"] td.state .s-connected`
		general = `tr[data-channel="room/chatroom:#general"] td.decision .d-open`
		devRow  = `tr[data-channel="room/chatroom:#dev"]`
		devOpen = devRow + ` td.decision .d-open`
		reply   = `section[data-agent="ada"] li.e-speech`
	)
	text := func(sel string) string { return pageText(t, bctx, sel) }
	if err := chromedp.Do(bctx,
		chromedp.Navigate(r.srv.URL()),
		chromedp.WaitVisible(room),
		chromedp.WaitVisible(general),
		chromedp.WaitVisible(reply),
	); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	if state, devBefore := text(room), text(devRow+` td.decision`); state != "connected" || devBefore != "closed" {
		t.Errorf("the page shows the room %q and #dev %q, want connected and closed", state, devBefore)
	}
	if said, want := text(reply), "→ chatroom:#general (delivered): Morning, alice!"; !strings.Contains(said, want) {
		t.Errorf("ada's reply on the page: %q, want it to hold %q", said, want)
	}

	r.openDev(t)
	if err := chromedp.Do(bctx, chromedp.WaitVisible(devOpen)); err != nil {
		t.Fatalf("waiting for #dev to show open: %v", err)
	}
	if devAfter, source := text(devRow+` td.decision`), text(devRow+` td.source`); devAfter != "open" || source != "agent-tool" {
		t.Errorf("#dev after the open: %q decided by %q, want open by agent-tool", devAfter, source)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(shot) < 8 || string(shot[1:4]) != "PNG" {
		t.Fatalf("the screenshot is not a PNG (%d bytes)", len(shot))
	}
	out := screenshotPath(t)
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the status page's screenshot: %s", out)
}
