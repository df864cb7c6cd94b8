package agent

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mcpl-go/mcpl/store"
)

// The router reads the inbox once, in order, and routes wake-ups: it
// never holds a message, and never moves a position past one it could not
// route. Per server it keeps how far it has routed (routed): each runner
// reads a server's messages up to there, by its own cursor. Per channel,
// it also makes each channel's fork when the first message the fork would
// be shown arrives, recording the fork's cursor first; a fork that can't
// be made holds its server's routing at that message, which is tried
// again after retryAfter, so it is shown later, never lost. Per channel,
// the router's positions are durable too ("route/<server>"), so that a
// restart does not route again what it routed before (and make a fork at
// an old message). It also retires the forks that sat idle for ForkIdle:
// only the router makes and ends forks, so the two never race.

// retryAfter is how long the router waits before routing again a server
// it stopped at (a fork it couldn't make, a store it couldn't read).
const retryAfter = 2 * time.Second

// heldAt is where a server's routing stopped, and when it is tried again
// by itself.
type heldAt struct {
	seq   int64
	until time.Time
}

type router struct {
	rt     *Runtime
	signal chan struct{}

	// pos is the inbox position read; under rt.mu, routed is each
	// server's routed position (absent: floor) and floor the position
	// every server is routed to.
	pos    int64
	floor  int64
	routed map[string]int64
	// held are the servers whose routing stopped at a message (pos may
	// be past it): from held[s].seq on, s is routed again by itself.
	held map[string]heldAt
	// recorded is the route cursors as the store has them (per channel).
	recorded map[string]int64
	timer    *time.Timer
}

func newRouter(rt *Runtime, cursors map[string]int64) *router {
	ro := &router{rt: rt, signal: make(chan struct{}, 1), routed: map[string]int64{}, held: map[string]heldAt{}, recorded: map[string]int64{}}
	if !rt.opts.PerChannel {
		// Shared: route again everything an agent has not consumed (the
		// runners judge each message as they read it).
		ro.floor = -1
		for _, r := range rt.agents {
			ro.floor = minPos(ro.floor, r.base)
		}
		ro.pos = ro.floor
		return ro
	}
	// Per channel: from where the router stopped, by server (the
	// primary's cursors, before route cursors were kept).
	p := rt.agents[0]
	ro.floor = p.base
	for name, c := range cursors {
		if s, ok := cutRoute(name); ok {
			ro.routed[s] = c
			ro.recorded[s] = c
		}
	}
	for s := range p.cursors {
		if _, ok := ro.routed[s]; !ok {
			ro.routed[s] = p.cursor(s)
		}
	}
	ro.pos = ro.floor
	for _, c := range ro.routed {
		ro.pos = min(ro.pos, c)
	}
	return ro
}

func minPos(a, b int64) int64 {
	if a < 0 {
		return b
	}
	return min(a, b)
}

func (ro *router) poke() {
	select {
	case ro.signal <- struct{}{}:
	default:
	}
}

// routedUpTo is how far server's messages are routed.
func (ro *router) routedUpTo(server string) int64 {
	ro.rt.mu.Lock()
	defer ro.rt.mu.Unlock()
	if p, ok := ro.routed[server]; ok {
		return max(p, ro.floor)
	}
	return ro.floor
}

// run is the router's goroutine.
func (ro *router) run() {
	rt := ro.rt
	defer rt.wg.Done()
	ro.timer = time.NewTimer(time.Hour)
	ro.timer.Stop()
	defer ro.timer.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-rt.stopping:
			return
		case <-ro.signal:
		case <-ro.timer.C:
		}
		next := ro.pass()
		if rt.opts.PerChannel {
			next = earliest(next, ro.retire())
		}
		if !next.IsZero() {
			ro.timer.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

// pass routes what is new, and the servers held, and wakes the runners;
// it returns when to pass again by itself (zero: when poked).
func (ro *router) pass() time.Time {
	rt := ro.rt
	var next time.Time
	woken := map[*runner]bool{}
	// Every server held is routed again from where it stopped, up to pos.
	for _, srv := range slices.Sorted(maps.Keys(ro.held)) {
		at, err := ro.routeFrom(store.InboxQuery{Server: srv, After: ro.held[srv].seq - 1, Through: ro.pos}, woken)
		switch {
		case err != nil:
			next = earliest(next, time.Now().Add(retryAfter))
		case at.seq != 0:
			ro.held[srv] = at
			next = earliest(next, at.until)
		default:
			delete(ro.held, srv)
			ro.setRouted(srv, ro.pos)
		}
	}
	// Then what is new.
	for rt.ctx.Err() == nil {
		page, err := rt.opts.Store.Page(rt.ctx, store.InboxQuery{After: ro.pos})
		if err != nil {
			if rt.ctx.Err() == nil {
				rt.log.Error("agents could not read the inbox; they read it again shortly", "error", err.Error())
				next = earliest(next, time.Now().Add(retryAfter))
			}
			break
		}
		for _, m := range page {
			if _, held := ro.held[m.Server]; held {
				continue
			}
			if until, ok := ro.route(m, woken); !ok {
				ro.held[m.Server] = heldAt{m.Seq, until}
				next = earliest(next, until)
				continue
			}
			ro.setRouted(m.Server, m.Seq)
		}
		if len(page) > 0 {
			ro.pos = page[len(page)-1].Seq
		}
		if len(page) < store.DefaultPageLimit {
			break
		}
	}
	ro.rt.mu.Lock()
	if len(ro.held) == 0 {
		ro.floor = max(ro.floor, ro.pos)
	}
	ro.rt.mu.Unlock()
	ro.record()
	// The agents read every server; the forks woken read their channel.
	for _, r := range rt.agents {
		woken[r] = true
	}
	for r := range woken {
		r.poke()
	}
	rt.mu.Lock()
	for _, f := range rt.forks {
		if f.waiting() {
			f.poke()
		}
	}
	rt.mu.Unlock()
	return next
}

// routeFrom routes server q.Server's messages q selects, in pages, and
// returns where it stopped (a zero seq: it routed them all).
func (ro *router) routeFrom(q store.InboxQuery, woken map[*runner]bool) (heldAt, error) {
	for {
		page, err := ro.rt.opts.Store.Page(ro.rt.ctx, q)
		if err != nil {
			return heldAt{}, err
		}
		for _, m := range page {
			if until, ok := ro.route(m, woken); !ok {
				return heldAt{m.Seq, until}, nil
			}
			ro.setRouted(m.Server, m.Seq)
		}
		if len(page) < store.DefaultPageLimit {
			return heldAt{}, nil
		}
		q.After = page[len(page)-1].Seq
	}
}

func (ro *router) setRouted(server string, seq int64) {
	ro.rt.mu.Lock()
	defer ro.rt.mu.Unlock()
	if seq > ro.routed[server] {
		ro.routed[server] = seq
	}
}

// route routes m; ok is false when it must wait until then: per channel,
// whether the fork would be shown it can't be judged yet, or its
// channel's fork could not be made (tried again after retryAfter).
func (ro *router) route(m store.Message, woken map[*runner]bool) (until time.Time, ok bool) {
	rt := ro.rt
	if !rt.opts.PerChannel || m.Channel == "" {
		return time.Time{}, true
	}
	if m.Seq <= ro.routedUpTo(m.Server) {
		return time.Time{}, true // routed before this start
	}
	k := forkKey{m.Server, m.Channel}
	rt.mu.Lock()
	f := rt.forks[k]
	rt.mu.Unlock()
	if f == nil {
		v := rt.judge(m)
		if v.wait {
			return v.until, false
		}
		if shown, _ := v.shows(m); !shown {
			return time.Time{}, true
		}
		if f = ro.fork(k, m); f == nil {
			return time.Now().Add(retryAfter), false
		}
	}
	woken[f] = true
	return time.Time{}, true
}

// fork makes the fork of channel k, whose first message is m, and starts
// it: its cursor is recorded first, so that the router's passing m can't
// leave it behind at the next start. nil when it can't be made (logged):
// the router stops at m and tries again.
func (ro *router) fork(k forkKey, m store.Message) *runner {
	rt := ro.rt
	name := forkName(rt.agents[0].name, k)
	c := m.Seq - 1
	ctx, cancel := context.WithTimeout(rt.ctx, storeWait)
	defer cancel()
	if _, err := rt.opts.Store.Record(ctx, nil, map[string]int64{cursorName(name): c}); err != nil {
		rt.log.Error("a conversation fork could not record its starting place, so it was not made yet; its channel's message is shown once it is", "fork", name, "error", err.Error())
		return nil
	}
	p := rt.agents[0].spec
	p.Name = name
	f, err := rt.newRunner(rt.ctx, p, name, k, c, nil)
	if err != nil {
		rt.log.Error("a conversation fork could not start, so it was not made yet; its channel's message is shown once it is", "fork", name, "error", err.Error())
		return nil
	}
	rt.mu.Lock()
	rt.byName[name], rt.forks[k] = f, f
	delete(rt.ended, name)
	closed := rt.closed
	rt.mu.Unlock()
	if closed {
		f.finish() // never run: what it is told is recorded
		return f
	}
	rt.run(f)
	return f
}

// record makes the router's positions durable, per channel, where they
// moved.
func (ro *router) record() {
	rt := ro.rt
	if !rt.opts.PerChannel {
		return
	}
	moved := map[string]int64{}
	rt.mu.Lock()
	for s, p := range ro.routed {
		if p > ro.recorded[s] {
			moved[routeCursorName(s)] = p
		}
	}
	rt.mu.Unlock()
	if len(moved) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rt.ctx), storeWait)
	defer cancel()
	if _, err := rt.opts.Store.Record(ctx, nil, moved); err != nil {
		rt.log.Warn("the router's positions could not be recorded; after a restart it routes those messages again", "error", err.Error())
		return
	}
	for name, p := range moved {
		s, _ := cutRoute(name)
		ro.recorded[s] = p
	}
}

// retire ends the forks idle for ForkIdle with nothing to read, and
// returns when the next one would be due.
func (ro *router) retire() time.Time {
	rt := ro.rt
	now := time.Now()
	var next time.Time
	rt.mu.Lock()
	forks := make([]*runner, 0, len(rt.forks))
	for _, f := range rt.forks {
		forks = append(forks, f)
	}
	rt.mu.Unlock()
	for _, f := range forks {
		due, idle := f.idleSince()
		if !idle {
			continue
		}
		due = due.Add(rt.opts.ForkIdle)
		if now.Before(due) {
			next = earliest(next, due)
			continue
		}
		if f.cursorNow() < ro.routedUpTo(f.home.server) && ro.pending(f) {
			continue // woken: it reads first
		}
		ro.end(f)
	}
	return next
}

// pending reports whether f's channel has messages past its cursor.
func (ro *router) pending(f *runner) bool {
	ch := f.home.channel
	page, err := ro.rt.opts.Store.Page(ro.rt.ctx, store.InboxQuery{Server: f.home.server, Channel: &ch, After: f.cursorNow(), Through: ro.routedUpTo(f.home.server), Limit: 1})
	return err != nil || len(page) > 0
}

// end retires fork f: its loop stops, its cursor is dropped (so a
// restart does not make it again), and it is remembered as ended for the
// notice rules until a new fork of its channel is made.
func (ro *router) end(f *runner) {
	rt := ro.rt
	ctx, cancel := context.WithTimeout(rt.ctx, storeWait)
	defer cancel()
	if err := rt.opts.Store.DropCursors(ctx, cursorName(f.name)); err != nil && !errors.Is(err, context.Canceled) {
		rt.log.Warn("an idle conversation fork could not drop its cursor, so it goes on for now", "fork", f.name, "error", err.Error())
		return
	}
	rt.mu.Lock()
	delete(rt.forks, f.home)
	delete(rt.byName, f.name)
	rd := f.reader()
	rd.Ended = true
	if len(rt.ended) >= maxEnded {
		for name := range rt.ended {
			delete(rt.ended, name)
			break
		}
	}
	rt.ended[f.name] = rd
	rt.mu.Unlock()
	f.stop()
	rt.log.Info("an idle conversation fork ended; its channel's next message starts a new one", "fork", f.name, "idle", rt.opts.ForkIdle.String())
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case b.Before(a):
		return b
	}
	return a
}
