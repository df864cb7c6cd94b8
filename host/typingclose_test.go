package host_test

import (
	"slices"
	"testing"

	"github.com/mcpl-go/mcpl/internal/agent"
)

// TestTypingStopsWhenAgentClosesChannel: woken in a, the agent closes a
// and then answers. The server is told the typing stopped as the channel
// closes, once: the stop comes after the turn's start and before the
// close request (a platform may refuse a typing stop into a channel the
// bot has left), and no typing start comes after it, though the answer
// reopens a to be posted.
func TestTypingStopsWhenAgentClosesChannel(t *testing.T) {
	r := newLeafRig(t, scriptConfig, map[string]string{"ada.yaml": `
steps:
  - call: [{tool: channel_close, args: {channelId: a}}]
  - say: Bye.
`}, "-typing")
	r.incoming("a", "m1", "leave, please", "chat:mention")
	r.tr.turnEnd(t, "ada", 1)
	evs := r.tr.turn("ada", 1)
	if tools := find(evs, agent.EventTool); len(tools) != 1 || tools[0].Tool != "channel_close" || tools[0].Outcome != "ok" {
		t.Fatalf("tool events = %+v", tools)
	}
	log := r.serverLog(0)
	// The registration's work went before the message: the turn's part
	// of the log starts at its typing start.
	start := slices.Index(log, "typing a start")
	if start < 0 {
		t.Fatalf("server log = %q, want a typing start in a", log)
	}
	turn := log[start:]
	stop := slices.Index(turn, "typing a stop")
	closeAt := slices.Index(turn, "close a")
	var stops, laterStarts int
	for i, l := range turn {
		switch {
		case l == "typing a stop":
			stops++
		case l == "typing a start" && i > stop:
			laterStarts++
		}
	}
	switch {
	case stop < 0 || closeAt < 0:
		t.Fatalf("server log = %q, want a typing stop and the close", log)
	case stop > closeAt:
		t.Errorf("server log = %q: the typing stop came after the close", log)
	case stops != 1:
		t.Errorf("server log = %q: %d typing stops, want 1", log, stops)
	case laterStarts != 0:
		t.Errorf("server log = %q: a typing start after the stop", log)
	}
	if !slices.Contains(turn, "publish a: Bye.") {
		t.Errorf("server log = %q, want the answer posted", log)
	}
}
