package agent

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

// runner is one agent or fork: its conversation, its cursors in the
// inbox, and the notices it hasn't read yet. It pulls what is there for
// it from the inbox when it is idle and woken; the runtime holds nothing
// for it but a wake-up.
type runner struct {
	rt   *Runtime
	spec Spec
	name string  // the conversation's name: the agent's, or the fork's
	home forkKey // a fork's channel; zero for an agent
	fork bool

	signal chan struct{}
	// ctx ends when the runner does: with the runtime, or when its fork
	// retires.
	ctx    context.Context
	cancel context.CancelFunc

	mu          sync.Mutex
	notices     []string
	noticesLeft int       // notices left out since the last read (MaxNotices)
	done        bool      // its loop has ended: notices go to the runtime's late queue
	busy        bool      // in a turn, or reading
	last        time.Time // when it was last busy
	held        bool      // a message it read waits (its channel is not registered yet)
	at          int64     // a fork's cursor, as the router reads it

	// The loop's own, not shared:
	//
	// base is the position an agent's cursors start at for a server it
	// has none for; cursors its position in each server's messages. A
	// fork's position is base alone (its channel's messages).
	base    int64
	cursors map[string]int64
	history []model.Message // the conversation's newest part, as recorded
	dropped int             // its older messages, not held (remember)
	turns   int64           // turns recorded so far
	timer   *time.Timer     // wakes it when a held message may go
	// botRuns counts, by channel, the turns in a row bots alone woke it
	// (bots.go).
	botRuns map[forkKey]int
	// turnStart and turnEnd are when its last turn ran (wake.go's held
	// count); waitsUntil is when a debounce that is running ends.
	turnStart, turnEnd, waitsUntil time.Time
	// unsettledSince is when the reads began to miss a replacement, in a
	// row (settling); zero while they don't.
	unsettledSince time.Time
}

func (rt *Runtime) newRunner(ctx context.Context, s Spec, name string, home forkKey, base int64, cursors map[string]int64) (*runner, error) {
	if cursors == nil {
		cursors = map[string]int64{}
	}
	r := &runner{rt: rt, spec: s, name: name, home: home, fork: home != forkKey{}, signal: make(chan struct{}, 1), base: base, cursors: cursors, at: base, last: time.Now()}
	r.ctx, r.cancel = context.WithCancel(ctx)
	if err := r.load(ctx); err != nil {
		r.cancel()
		return nil, err
	}
	return r, nil
}

func (r *runner) reader() Reader {
	rd := Reader{Name: r.name, Allowed: r.spec.Allowed}
	if r.fork {
		rd.Home, rd.HomeServer = r.home.channel, r.home.server
	} else {
		rd.Forked = r.rt.opts.PerChannel
	}
	return rd
}

func (r *runner) poke() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// stop ends a fork's loop (it retired).
func (r *runner) stop() { r.cancel() }

// cursor is r's position in server's messages: everything at or below
// an agent's base is consumed, whatever its server.
func (r *runner) cursor(server string) int64 {
	if r.fork {
		return r.base
	}
	return max(r.cursors[server], r.base)
}

// idleSince reports when a fork was last busy, and whether it is idle
// now.
func (r *runner) idleSince() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, !r.busy && len(r.notices) == 0
}

// cursorNow is a fork's cursor, as the router reads it.
func (r *runner) cursorNow() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at
}

// waiting reports whether a message r read waits.
func (r *runner) waiting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// notice gives the runner a notice to read; it doesn't wake it to think.
// Once its loop has ended (the host is stopping, or the fork retired),
// the notice goes to the runtime's late queue, which records it for the
// next start: never on the caller's goroutine.
func (r *runner) notice(text string) {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		r.rt.late.add(r, []string{text})
		return
	}
	if len(r.notices) == MaxNotices {
		// The oldest go, counted: what one read holds stays bounded.
		r.notices = r.notices[1:]
		r.noticesLeft++
	}
	r.notices = append(r.notices, text)
	r.mu.Unlock()
	r.poke()
}

// finish ends the runner's loop: the notices it hasn't read are recorded,
// from the late queue.
func (r *runner) finish() {
	r.mu.Lock()
	r.done = true
	pending := r.notices
	r.notices = nil
	r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.rt.late.add(r, pending)
}

func (r *runner) takeNotices() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.notices
	if r.noticesLeft > 0 {
		n = append([]string{textNoticesLeftOut(r.noticesLeft)}, n...)
		r.noticesLeft = 0
	}
	r.notices = nil
	return n
}

// MaxNotices bounds the notices a runner holds unread; of more, the
// oldest are left out and counted.
const MaxNotices = 1000

func (r *runner) setBusy(on bool) {
	r.mu.Lock()
	r.busy = on
	r.last = time.Now()
	r.mu.Unlock()
	if !on && r.fork {
		// Idle from now: the router arms its retirement (a pass that
		// ran while the fork was busy armed nothing for it).
		r.rt.router.poke()
	}
}

func (r *runner) loop(ctx context.Context) {
	defer r.finish()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.rt.stopping:
			return
		case <-r.signal:
		}
		if time.Now().Before(r.waitsUntil) {
			// A debounce is running: what came meanwhile can only put
			// the turn off, not bring it on (wake.go), so it is read
			// once, when the timer fires, not at every poke.
			continue
		}
		r.waitsUntil = time.Time{}
		for r.ctx.Err() == nil && !r.rt.isStopping() {
			r.setBusy(true)
			sel, err := r.pull()
			if err != nil {
				if r.ctx.Err() == nil {
					r.rt.log.Error("an agent could not read the inbox; it reads it again shortly", "agent", r.name, "error", err.Error())
					r.wakeAt(time.Now().Add(retryAfter))
				}
				break
			}
			if r.settling(sel) {
				break
			}
			if due := r.due(sel); !due.IsZero() {
				// Debounce: the turn waits for quiet, or its bound.
				r.waitsUntil = earliest(due, sel.retry)
				r.wakeAt(r.waitsUntil)
				break
			}
			if !sel.retry.IsZero() {
				r.wakeAt(sel.retry)
			}
			notices := r.takeNotices()
			if sel.empty() && len(notices) == 0 {
				break
			}
			if until, ok := r.holds(sel, notices); ok {
				// Nothing wakes it, and a coalesced event read may still
				// change: kept for the next turn (coalesced.go).
				r.wakeAt(earliest(until, sel.retry))
				break
			}
			r.handle(ctx, sel, notices)
		}
		r.setBusy(false)
	}
}

// settleFor bounds how long a runner puts off what it read for reads
// that missed a replacement (selection.unsettled).
const settleFor = 250 * time.Millisecond

// settling reports whether the runner puts off what it read in sel, a
// read that took out a replaced occurrence but missed its replacement:
// the host withdraws the one before the router routes the other, and a
// read in between would start a turn without the subject, or plan its
// debounce without the subject's quiet. It reads again when the router,
// having routed the replacement, pokes it; for settleFor at most, so
// that a subject replaced faster than a read can't put a turn off.
func (r *runner) settling(sel *selection) bool {
	if !sel.unsettled {
		r.unsettledSince = time.Time{}
		return false
	}
	if r.unsettledSince.IsZero() {
		r.unsettledSince = time.Now()
	}
	until := r.unsettledSince.Add(settleFor)
	if !time.Now().Before(until) {
		return false
	}
	r.wakeAt(until)
	return true
}

// wakeAt pokes the runner at t.
func (r *runner) wakeAt(t time.Time) {
	if r.timer == nil {
		r.timer = time.AfterFunc(time.Until(t), r.poke)
		return
	}
	r.timer.Reset(time.Until(t))
}

// pull reads what is there for r from its cursors up to what the router
// has routed, a page at a time, and selects what a turn shows of it
// (budget.go). A message whose channel isn't registered yet stops its
// server's reading there, and r is woken when it may go. An agent's base
// moves up to where everything before is consumed, so that a pull reads
// only what is new, not the inbox from the agent's start.
func (r *runner) pull() (*selection, error) {
	rt := r.rt
	sel := newSelection(r)
	q := store.InboxQuery{After: r.base}
	if r.fork {
		ch := r.home.channel
		q = store.InboxQuery{Server: r.home.server, Channel: &ch, After: r.base, Through: rt.router.routedUpTo(r.home.server)}
	}
	held := map[string]bool{}
	var wake time.Time
	scanned, stop := q.After, int64(math.MaxInt64)
	for {
		page, err := rt.opts.Store.Page(r.ctx, q)
		if err != nil {
			return nil, err
		}
		for _, m := range page {
			scanned = m.Seq
			if m.Seq <= r.cursor(m.Server) {
				continue
			}
			if held[m.Server] || m.Seq > rt.router.routedUpTo(m.Server) {
				stop = min(stop, m.Seq)
				continue
			}
			v := verdict{}
			if r.needsJudging(m) {
				v = rt.judge(m)
			}
			if v.wait {
				held[m.Server] = true
				stop = min(stop, m.Seq)
				wake = earliest(wake, v.until)
				continue
			}
			sel.read(m, v)
		}
		if len(page) < store.DefaultPageLimit {
			break
		}
		q.After = page[len(page)-1].Seq
	}
	if !r.fork {
		sel.base = min(scanned, stop-1)
	}
	sel.unsettled = sel.by > scanned || sel.by >= stop
	r.mu.Lock()
	r.held = len(held) > 0
	r.mu.Unlock()
	sel.retry = wake
	sel.finish()
	return sel, nil
}

// needsJudging reports whether whether r is shown m depends on m's
// channel: a channel message r reads for itself (not one it passes as
// its fork's).
func (r *runner) needsJudging(m store.Message) bool {
	return m.Channel != "" && (r.fork || !r.rt.opts.PerChannel)
}

// handle shows the agent what of sel is for it, with the notices, and
// runs a turn if any of it wakes the agent; else it records the notices
// and the positions consumed.
func (r *runner) handle(ctx context.Context, sel *selection, notices []string) {
	// What a request, or a record between turns, will include of the
	// coalesced events read is decided now, and consumed (coalesced.go).
	r.assemble(ctx, sel)
	if len(sel.items) == 0 || !r.woken(sel.items) {
		// Nothing wakes it: the notices, and what it is shown, go in
		// between turns, with no model call (bots.go).
		t := r.newTurn(ctx, sel)
		t.index = r.turns
		t.treated(sel)
		t.addNotices(notices)
		t.flushNotices()
		t.showItems(sel, nil)
		t.record("")
		return
	}
	t := r.newTurn(ctx, sel)
	t.run(sel, notices)
}

// lateNotices records the notices that come for a runner whose loop has
// ended (the host is stopping, a fork retired), one store call a runner,
// on a goroutine of its own that runs while there is something to record:
// never on the goroutine that gave the notice (the channel registry's
// owner must not wait for the store). Once the runtime is closed, a
// notice is recorded on the caller's goroutine: nothing else is left to
// hold up.
type lateNotices struct {
	mu      sync.Mutex
	queue   []lateNotice
	running bool
	closed  bool
	idle    sync.Cond
}

type lateNotice struct {
	r     *runner
	texts []string
}

func newLateNotices() *lateNotices {
	l := &lateNotices{}
	l.idle.L = &l.mu
	return l
}

func (l *lateNotices) add(r *runner, texts []string) {
	if len(texts) == 0 {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		r.recordLate(texts)
		return
	}
	l.queue = append(l.queue, lateNotice{r, texts})
	start := !l.running
	l.running = true
	l.mu.Unlock()
	if start {
		go l.run()
	}
}

// run records what is queued until nothing is.
func (l *lateNotices) run() {
	for {
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		if len(q) == 0 {
			l.running = false
			l.idle.Broadcast()
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		by := map[*runner][]string{}
		var order []*runner
		for _, n := range q {
			if _, ok := by[n.r]; !ok {
				order = append(order, n.r)
			}
			by[n.r] = append(by[n.r], n.texts...)
		}
		for _, r := range order {
			r.recordLate(by[r])
		}
	}
}

// close waits for what is queued to be recorded; later notices are
// recorded as they come.
func (l *lateNotices) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for l.running {
		l.idle.Wait()
	}
}

// recordLate records notices after the loop ended: they are read at the
// start of the agent's next turn, after a restart.
func (r *runner) recordLate(texts []string) {
	t := r.newTurn(context.Background(), nil)
	t.index = r.turns
	t.addNotices(texts)
	t.flushNotices()
	t.record("")
}

// storeWait bounds a store call the runtime makes on its own (a fork's
// cursor, the router's positions, a turn's record).
const storeWait = 10 * time.Second
