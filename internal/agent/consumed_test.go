package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConsumed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cursors    map[string]int64
		agents     []string
		perChannel bool
		floor      int64
		through    map[string]int64
		ok         bool
	}{
		{name: "no agents", cursors: map[string]int64{"agent/ada": 5}},
		{name: "an agent with no cursor yet", cursors: map[string]int64{"agent/ada": 5}, agents: []string{"ada", "bob"}},
		{
			name:    "shared: the lowest of each agent's per-server position, base where higher",
			cursors: map[string]int64{"agent/ada": 10, "agent/ada/chat": 40, "agent/bob": 20, "agent/bob/chat": 30, "agent/bob/mail": 25, "agent/gone": 1, "agent/gone/chat": 1},
			agents:  []string{"ada", "bob"},
			floor:   10, through: map[string]int64{"chat": 30, "mail": 10}, ok: true,
		},
		{
			name: "per channel: the router's cursor and the forks' hold back",
			cursors: map[string]int64{"agent/ada": 10, "agent/ada/chat": 50, "route/chat": 45, "agent/ada@chat/a": 42, "agent/ada@chat/b": 48,
				"route/mail": 12, "agent/ada@mail/x": 11},
			agents: []string{"ada"}, perChannel: true,
			floor: 10, through: map[string]int64{"chat": 42, "mail": 10}, ok: true, // mail: ada's base
		},
	} {
		floor, through, ok := Consumed(tc.cursors, tc.agents, tc.perChannel)
		if floor != tc.floor || ok != tc.ok || !cmp.Equal(through, tc.through) {
			t.Errorf("%s: Consumed = %d, %v, %v; want %d, %v, %v", tc.name, floor, through, ok, tc.floor, tc.through, tc.ok)
		}
	}
}
