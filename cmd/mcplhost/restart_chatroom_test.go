package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/mcpl-go/mcpl/internal/agent"
)

// Issue 27: the README's agent example did nothing the second time. The
// chat room numbered its messages chatroom-1 … on every run, and the
// host, which keeps its inbox across restarts and deduplicates it by
// server and message id, took the second run's as ones it had already
// delivered. Now each run of the room draws ids of its own
// (chatroom-RUN-N), so a second mcplhost run on the same store, with the
// real chat room subprocess and the scripted echo model, answers as the
// first did: as many turns, woken by messages of its own run.
func TestRunChatroomRestart(t *testing.T) {
	bin := buildChatroom(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Each post after the first waits for the agent's answer to the one
	// before, so each is a turn of its own.
	room := write("room.script", `+0s #general alice @agent: hello there
+agent #general bob @agent: and again
+agent #general carol @agent: once more
`)
	cfg := write("config.yaml", `store: ./host.db
servers:
  - id: room
    command: [`+bin+`, -q, -script, `+room+`]
agents:
  - name: ada
    model: {provider: scripted, echo: true}
`)
	const turns = 3
	ids := regexp.MustCompile(`^chatroom-([0-9a-f]{8})-[1-3]$`)
	// wakes are the ids that woke a run's turns, and the run they share.
	wakes := func(t *testing.T, evs []agent.Event) (woken []string, run string) {
		t.Helper()
		for _, ev := range evs {
			if ev.Event != agent.EventTurnStart {
				continue
			}
			for _, w := range ev.WokenBy {
				m := ids.FindStringSubmatch(w.MessageID)
				if m == nil || run != "" && m[1] != run {
					t.Fatalf("turn %d woken by %q: want chatroom-RUN-N, one RUN a run", ev.Turn, w.MessageID)
				}
				run = m[1]
				woken = append(woken, w.MessageID)
			}
		}
		return woken, run
	}
	countTurns := func(evs []agent.Event) int {
		n := 0
		for _, ev := range evs {
			if ev.Event == agent.EventTurnEnd {
				n++
			}
		}
		return n
	}

	// runTurns fails the test if the turns don't come within its deadline:
	// before the fix, the second run's did not.
	first := runTurns(t, cfg, turns)
	second := runTurns(t, cfg, turns)
	if a, b := countTurns(first), countTurns(second); a != turns || b != a {
		t.Errorf("turns: the first run %d, the second %d; want %d each", a, b, turns)
	}
	w1, run1 := wakes(t, first)
	w2, run2 := wakes(t, second)
	if len(w1) != turns || len(w2) != turns || run1 == run2 {
		t.Errorf("the first run woken by %v, the second by %v: want %d each, of two runs", w1, w2, turns)
	}
	if slices.ContainsFunc(w2, func(id string) bool { return slices.Contains(w1, id) }) {
		t.Errorf("the second run was woken by an id of the first's: %v, %v", w1, w2)
	}
}
