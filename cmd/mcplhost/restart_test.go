package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// TestRunKilledThenRestarted is issue 22's crash through the path a user
// takes: mcplhost run, with a channel server that runs its own channels
// (no channels.lifecycle) and an agent on an OpenAI-compatible model.
// Turn 1 (message m1) is recorded; turn 2 (m2) waits on its model call
// while the server sends 50 more messages, each acknowledged (accepted:
// true), so they sit in the inbox not yet shown. The host is killed with
// SIGKILL, then run again on the same store and config, the model now
// answering at once. Every acknowledged message is shown, and across the
// turns the store recorded, over both runs, each is shown exactly once:
// m1, recorded before the kill, is not shown again.
func TestRunKilledThenRestarted(t *testing.T) {
	dir := t.TempDir()
	api := fakeapi.NewOpenAI(t)
	ctlPath := filepath.Join(dir, "control.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`store: ./host.db
servers:
  - id: chat
    command: `+chanserverCommand(t, ctlPath, "-no-lifecycle")+`
agents:
  - name: ada
    model: {provider: openai, model: m, baseURL: `+api.URL+`, keyOptional: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}

	run1 := startRun(t, dir, cfg, "run1")
	ctl := awaitControl(t, ctlPath, run1)
	incoming := func(c control, id string) {
		t.Helper()
		if out := c.call(t, waitFor, "incoming", fmt.Sprintf(`{"channelId":"a","messageId":%q,"text":"message %s"}`, id, id)); !strings.Contains(out, `"accepted":true`) {
			t.Fatalf("incoming %s: %s", id, out)
		}
	}
	incoming(ctl, "m1")
	api.Wait(1)
	api.Hold()
	incoming(ctl, "m2")
	// Turn 2 asks the model only once turn 1 is recorded.
	api.WaitHeld(1)
	res := ctl.burst(t, 60*time.Second, `{"channelId":"a","count":50,"inflight":8,"prefix":"k"}`)
	acked := []string{"m1", "m2"}
	for i := 1; i <= res.Sent; i++ {
		acked = append(acked, chanserver.BurstMessageID("k", i))
	}
	run1.kill9()
	ctl.awaitGone(t)
	api.WaitAbandoned(1)
	api.Release()
	if err := os.Remove(ctlPath); err != nil {
		t.Fatal(err)
	}
	// Before the kill: turn 1 ended, turn 2 showed m2 and never ended.
	ev1 := run1.tr.all()
	if got := shownByTurn(ev1); !slices.Equal(got[1], []string{"m1"}) || !slices.Equal(got[2], []string{"m2"}) || len(got) != 2 {
		t.Fatalf("the first run showed %v, want m1 in turn 1 and m2 in turn 2", got)
	}
	if ends := countEvents(ev1, agent.EventTurnEnd); ends != 1 {
		t.Fatalf("the first run ended %d turns, want 1", ends)
	}

	run2 := startRun(t, dir, cfg, "run2")
	ctl2 := awaitControl(t, ctlPath, run2)
	run2.tr.wait(t, 60*time.Second, "every acknowledged message shown, its turn ended", func(evs []agent.Event) bool {
		seen := map[string]bool{}
		last := int64(0)
		for _, ev := range evs {
			if ev.Event == agent.EventShown {
				for _, id := range shownIDs(ev.Text) {
					seen[id] = true
				}
				last = ev.Turn
			}
		}
		if !seen[acked[len(acked)-1]] {
			return false
		}
		for _, ev := range evs {
			if ev.Event == agent.EventTurnEnd && ev.Turn == last {
				return true
			}
		}
		return false
	})
	if code := run2.stop(); code != 128+15 {
		t.Errorf("the second run exited %d after SIGTERM, want 143; it logged:\n%s", code, clip(run2.stderr.String()))
	}
	ctl2.awaitGone(t)
	for turn, ids := range shownByTurn(run2.tr.all()) {
		if slices.Contains(ids, "m1") {
			t.Errorf("the second run showed m1 again, in turn %d: its turn was recorded before the kill", turn)
		}
	}

	// What the store recorded, over both runs: each acknowledged message
	// shown once, in the order sent.
	st, err := sqlite.Open(filepath.Join(dir, "host.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var recorded []agent.Event
	if err := st.History(context.Background(), agent.TranscriptConversation, func(e store.Entry) error {
		var ev agent.Event
		if err := json.Unmarshal(e.Body, &ev); err != nil {
			return err
		}
		recorded = append(recorded, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, ev := range recorded {
		if ev.Event == agent.EventShown {
			shown = append(shown, shownIDs(ev.Text)...)
		}
	}
	t.Logf("the recorded turns showed %d messages; the second run showed %s", len(shown), counts(shownByTurn(run2.tr.all())))
	if strings.Join(shown, " ") != strings.Join(acked, " ") {
		t.Errorf("the recorded turns showed\n%s\nwant each acknowledged message once, in order:\n%s", strings.Join(shown, " "), strings.Join(acked, " "))
	}
	if t.Failed() {
		t.Logf("the second run logged:\n%s", clip(run2.stderr.String()))
	}
}

// shownByTurn is the ids of channel a's messages each turn showed.
func shownByTurn(evs []agent.Event) map[int64][]string {
	out := map[int64][]string{}
	for _, ev := range evs {
		if ev.Event == agent.EventShown {
			out[ev.Turn] = append(out[ev.Turn], shownIDs(ev.Text)...)
		}
	}
	return out
}

// counts says how many messages each turn showed: "turn 2: 52".
func counts(by map[int64][]string) string {
	var parts []string
	for turn, ids := range by {
		parts = append(parts, fmt.Sprintf("turn %d: %d", turn, len(ids)))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func countEvents(evs []agent.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Event == kind {
			n++
		}
	}
	return n
}
