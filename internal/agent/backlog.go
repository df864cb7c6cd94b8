package agent

import (
	"context"

	"github.com/mcpl-go/mcpl/store"
)

// MaxBacklog bounds what Backlog counts, so that a status refresh never
// reads a flood: past it, the count says only "more than this".
const MaxBacklog = 1000

// maxBacklogPages bounds the inbox pages Backlog reads: messages another
// server's cursor has passed, between the agent's base and the rest, are
// read and not counted.
const maxBacklogPages = 10

// Backlog counts the inbox messages agent has not consumed yet, from its
// recorded cursors: what its next read takes, and what a turn in progress
// has read but not recorded. In per-channel mode the agent's own count
// leaves out channel messages, which its forks read. It counts MaxBacklog
// at most, and reads maxBacklogPages of the inbox at most; more reports
// that there may be more than n. ok is false for an agent
// the runtime doesn't run.
func (rt *Runtime) Backlog(ctx context.Context, agent string) (n int, more, ok bool, err error) {
	rt.mu.Lock()
	_, ok = rt.byName[agent]
	rt.mu.Unlock()
	if !ok {
		return 0, false, false, nil
	}
	cursors, err := rt.opts.Store.Cursors(ctx)
	if err != nil {
		return 0, false, true, err
	}
	base := cursors[cursorName(agent)]
	q := store.InboxQuery{After: base}
	for pages := 0; ; pages++ {
		if pages == maxBacklogPages {
			return n, true, true, nil // read enough: "at least n"
		}
		page, err := rt.opts.Store.Page(ctx, q)
		if err != nil {
			return n, false, true, err
		}
		for _, m := range page {
			if m.Seq <= cursors[serverCursorName(agent, m.Server)] || (rt.opts.PerChannel && m.Channel != "") {
				continue
			}
			if n == MaxBacklog {
				return n, true, true, nil
			}
			n++
		}
		if len(page) < store.DefaultPageLimit {
			return n, false, true, nil
		}
		q.After = page[len(page)-1].Seq
	}
}
