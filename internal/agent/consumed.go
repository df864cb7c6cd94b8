package agent

import (
	"math"
	"strings"
)

// Consumed reads from the store's cursors how far every one of agents (the
// configuration's, Agents[0] the primary) has consumed the inbox: floor is
// the Seq through which each has consumed every server's messages, through
// each server's own where it differs. ok is false when an agent has no
// cursor yet (it has consumed nothing), or there are no agents: then
// nothing is consumed by all.
//
// An agent's position in a server's messages is its cursor for that
// server, or its base where that is higher (see cursorName). With
// perChannel, a server's messages are routed to the primary's forks: its
// position is also at most the router's cursor for it, and at most every
// fork's cursor for one of its channels, which reads conservatively (a
// fork behind in one channel holds back the server's other channels too).
// Cursors of agents not in agents (gone from the configuration) hold
// nothing back. The host prunes by it (store.PruneQuery); a durable cursor
// is never ahead of what its reader consumed, so a crash replays nothing
// pruned.
func Consumed(cursors map[string]int64, agents []string, perChannel bool) (floor int64, through map[string]int64, ok bool) {
	if len(agents) == 0 {
		return 0, nil, false
	}
	floor = math.MaxInt64
	bases := make(map[string]int64, len(agents))
	servers := map[string]bool{}
	for _, a := range agents {
		b, has := cursors[cursorName(a)]
		if !has {
			return 0, nil, false
		}
		bases[a] = b
		floor = min(floor, b)
		for s := range serverCursors(cursors, a) {
			servers[s] = true
		}
	}
	// forks[s] is the lowest fork cursor of s's channels.
	forks := map[string]int64{}
	if perChannel {
		prefix := cursorName(agents[0] + "@")
		for name, c := range cursors {
			if s, ok := cutRoute(name); ok {
				servers[s] = true
			}
			rest, ok := strings.CutPrefix(name, prefix)
			s, _, ok2 := strings.Cut(rest, "/")
			if ok && ok2 {
				servers[s] = true
				if f, has := forks[s]; !has || c < f {
					forks[s] = c
				}
			}
		}
	}
	through = make(map[string]int64, len(servers))
	for s := range servers {
		t := int64(math.MaxInt64)
		for _, a := range agents {
			t = min(t, max(bases[a], cursors[serverCursorName(a, s)]))
		}
		if perChannel {
			if r, has := cursors[routeCursorName(s)]; has {
				t = min(t, r)
			}
			if f, has := forks[s]; has {
				t = min(t, f)
			}
		}
		through[s] = t
	}
	return floor, through, true
}
