package agent

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/store"
)

// TestBacklog: what an agent has not consumed is counted from its
// recorded cursors: messages wait while a turn is held, and are consumed
// once it records; the count is bounded.
func TestBacklog(t *testing.T) {
	m := heldModel()
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		backlog := func() (int, bool) {
			t.Helper()
			n, more, ok, err := h.rt.Backlog(context.Background(), "ada")
			if err != nil || !ok {
				t.Fatalf("Backlog: %v %v", ok, err)
			}
			return n, more
		}
		if n, _ := backlog(); n != 0 {
			t.Errorf("backlog %d before any message, want 0", n)
		}
		h.add(chanMsg("chat", "general", "g0", "first")) // its turn is held
		for i := range 3 {
			h.add(chanMsg("chat", "general", fmt.Sprint("g", i+1), "more"))
		}
		if n, more := backlog(); n != 4 || more {
			t.Errorf("backlog %d (more %v) during the held turn, want 4: the turn's own message and the 3 after it", n, more)
		}
		release(m)
		release(m)
		synctest.Wait()
		if n, _ := backlog(); n != 0 {
			t.Errorf("backlog %d once both turns recorded, want 0", n)
		}
		// A flood: counted up to MaxBacklog, then "more".
		h.add(chanMsg("chat", "general", "f0", "flood")) // held again
		var flood []store.Message
		for i := range MaxBacklog + 5 {
			flood = append(flood, chanMsg("chat", "general", fmt.Sprint("f", i+1), "flood"))
		}
		h.add(flood...)
		if n, more := backlog(); n != MaxBacklog || !more {
			t.Errorf("backlog %d (more %v) in a flood, want %d and more", n, more, MaxBacklog)
		}
		release(m)
		release(m)
		if _, _, ok, _ := h.rt.Backlog(context.Background(), "nobody"); ok {
			t.Error("Backlog of an agent the runtime doesn't run: ok")
		}
	})
}
