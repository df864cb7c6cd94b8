package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// The flood: 30,000 messages of 4 KiB, 123 MB of text, in 6 bursts.
//
// The bound on the host's peak RSS, 80 MiB: the host's baseline, once
// connected with its agent idle, is about 28 MiB; what it needs to stream
// the flood (a commit's batch, a page of the inbox read back, a turn's
// selection, the garbage between two collections) takes its peak to about
// 52 MiB (50 MiB for 20,000 messages, 54 MiB for 40,000: it hardly grows
// with the flood), so the bound leaves 28 MiB of margin above it, for a
// collector that runs late on a loaded machine. A host that held what it had acknowledged but not yet shown
// (half the flood's bodies, 60 MB, on top of its baseline) would be over
// it, well before the flood's 123 MB.
const (
	floodChunks    = 6
	floodPerChunk  = 5000
	floodSize      = 4096 // under the window's sixteenth (8,000 bytes): no message is cut
	floodWindow    = 32000
	floodMaxRSSKiB = 80 << 10
)

// leftOutLine is the line a turn starts with when it leaves messages of
// channel a out.
var leftOutLine = regexp.MustCompile(`^\[host\] ([\d,]+) earlier messages? (?:was|were) left out of this turn, to keep it within what this agent is shown at once: ([\d,]+) from #a \(a\)\. The newest are shown below; those left out are not shown later\.$`)

// TestRunFloodDuringSlowModel is issue 22's flood through the path a user
// takes: mcplhost run (a subprocess, so that its peak RSS is the
// program's), an agent on an OpenAI-compatible model with contextWindow
// 32000 whose every answer waits until the test lets it go, and a chat
// server that sends 30,000 messages of 4 KiB (123 MB), pipelined 16 at
// a time, into the open channel a, in six bursts of 5,000, each while a
// model call is held. The host's peak RSS stays bounded; no request to
// the model is over the window (32000 tokens, 128,000 bytes at 4 a
// token); and every message acknowledged is either shown to the agent or
// counted in a turn's left-out line.
func TestRunFloodDuringSlowModel(t *testing.T) {
	dir := t.TempDir()
	api := fakeapi.NewOpenAI(t)
	api.Hold()
	ctlPath := filepath.Join(dir, "control.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`store: ./host.db
servers:
  - id: chat
    command: `+chanserverCommand(t, ctlPath)+`
agents:
  - name: ada
    model: {provider: openai, model: m, baseURL: `+api.URL+`, keyOptional: true, contextWindow: `+strconv.Itoa(floodWindow)+`}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := startRun(t, dir, cfg, "run")
	ctl := awaitControl(t, ctlPath, run)
	baseline := run.peakRSSKiB()
	if out := ctl.call(t, waitFor, "incoming", `{"channelId":"a","messageId":"m0","text":"the flood starts"}`); !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("incoming m0: %s", out)
	}
	acked := 1
	api.WaitHeld(1)
	start := time.Now()
	for k := range floodChunks {
		res := ctl.burst(t, 5*time.Minute, fmt.Sprintf(`{"channelId":"a","count":%d,"inflight":16,"prefix":"f%d","size":%d}`, floodPerChunk, k, floodSize))
		acked += res.Accepted
		// The turn held meanwhile ends; the next takes the backlog.
		api.WaitHeld(1)
		api.ReleaseOne()
	}
	api.Release()
	t.Logf("%d messages acknowledged in %s", acked, time.Since(start).Round(time.Millisecond))

	var shown, counted int
	tally := func(evs []agent.Event) {
		shown, counted = 0, 0
		for _, ev := range evs {
			if ev.Event != agent.EventShown {
				continue
			}
			shown += len(shownIDs(ev.Text))
			first, _, _ := strings.Cut(ev.Text, "\n")
			if m := leftOutLine.FindStringSubmatch(first); m != nil {
				n, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
				counted += n
			}
		}
	}
	run.tr.wait(t, 2*time.Minute, "every acknowledged message shown or counted", func(evs []agent.Event) bool {
		tally(evs)
		return shown+counted >= acked
	})
	peak := run.peakRSSKiB()
	if code := run.stop(); code != 128+15 {
		t.Errorf("mcplhost run exited %d after SIGTERM, want 143; it logged:\n%s", code, clip(run.stderr.String()))
	}
	evs := run.tr.all()
	tally(evs)
	t.Logf("peak RSS %d KiB (%d KiB once connected); %d turns; %d shown, %d counted left out", peak, baseline, countEvents(evs, agent.EventTurnStart), shown, counted)

	// (c) Each acknowledged message is shown or counted, once.
	if shown+counted != acked {
		t.Errorf("%d shown + %d counted as left out = %d, want the %d acknowledged", shown, counted, shown+counted, acked)
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.Event != agent.EventShown {
			continue
		}
		for _, id := range shownIDs(ev.Text) {
			if seen[id] {
				t.Errorf("%s was shown twice", id)
			}
			seen[id] = true
		}
		first, _, _ := strings.Cut(ev.Text, "\n")
		if strings.HasPrefix(first, "[host]") && leftOutLine.FindStringSubmatch(first) == nil {
			t.Errorf("turn %d starts with a line that is not the left-out line: %q", ev.Turn, first)
		}
		if m := leftOutLine.FindStringSubmatch(first); m != nil && m[1] != m[2] {
			t.Errorf("turn %d: %q counts %s in all but %s from #a", ev.Turn, first, m[1], m[2])
		}
	}
	// (b) No request over the window.
	reqs := api.Requests()
	for i, b := range reqs {
		if len(b) > floodWindow*4 {
			t.Errorf("request %d is %d bytes, over the %d tokens' %d bytes", i+1, len(b), floodWindow, floodWindow*4)
		}
	}
	// (a) The peak RSS.
	if peak > floodMaxRSSKiB {
		t.Errorf("peak RSS %d KiB, want at most %d KiB", peak, floodMaxRSSKiB)
	}
	largest := 0
	for _, b := range reqs {
		largest = max(largest, len(b))
	}
	t.Logf("%d model requests, the largest %d bytes", len(reqs), largest)
}
