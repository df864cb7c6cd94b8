package host

import (
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
)

// An agent's turn in progress is its turn_start's number, time and wakes
// until its turn_end, which clears them.
func TestTurnInProgress(t *testing.T) {
	var a activity
	at := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	wake := agent.Wake{Kind: "channel", Server: "room", Channel: "#general", MessageID: "m1"}
	a.record(agent.Event{At: at, Agent: "ada", Turn: 3, Event: agent.EventTurnStart, WokenBy: []agent.Wake{wake}})
	st := AgentState{Name: "ada"}
	a.fill(&st)
	if !st.InTurn || st.Turn != 3 || !st.TurnStartedAt.Equal(at) || len(st.WokenBy) != 1 || st.WokenBy[0] != wake {
		t.Errorf("in the turn: %+v", st)
	}
	a.record(agent.Event{At: at.Add(time.Second), Agent: "ada", Turn: 3, Event: agent.EventTurnEnd, Reason: "end_turn"})
	st = AgentState{Name: "ada"}
	a.fill(&st)
	if st.InTurn || st.Turn != 0 || !st.TurnStartedAt.IsZero() || st.WokenBy != nil || st.Turns != 1 {
		t.Errorf("after the turn: %+v", st)
	}
}
