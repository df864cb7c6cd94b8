package host

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/inbox"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/internal/metrics"
)

// duplicates makes the inbox's deduplication visible (issue 27): a
// message or push event whose server and id are in the inbox already is
// kept once and not delivered again, which is right for a retry, and
// silently wrong for a server that numbers its messages from 1 on every
// run: from its second run on, the agents never hear it. Each one is
// counted (mcpl_inbox_duplicates_total{server}) and logged at info, at
// most a line per server a window (lograte.Window): the first commit
// that has some logs at once, what follows within the window is summed
// into one line at its end, and Close logs what is still summed. A line
// names the server, how many and the ids of the first and the last (in
// the order they came), which is what an operator needs to see that the
// server reuses its ids.
type duplicates struct {
	log     *slog.Logger
	metrics *metrics.Metrics
	window  time.Duration

	mu      sync.Mutex
	servers map[string]*dupWindow // a window open for the server
	closed  bool
	timers  sync.WaitGroup
}

// dupWindow is what one server's open window has summed since its last
// line.
type dupWindow struct {
	n           int
	first, last string
	timer       *time.Timer
}

func newDuplicates(log *slog.Logger, m *metrics.Metrics) *duplicates {
	return &duplicates{log: log, metrics: m, window: lograte.Window, servers: map[string]*dupWindow{}}
}

// seen takes one commit's duplicates (inbox.Options.OnDuplicates): it is
// called on the inbox's goroutine, and waits for its lock and, for a
// window's first line, for the log's write; what follows in the window is
// only counted.
func (d *duplicates) seen(dups []inbox.Duplicate) {
	for len(dups) > 0 {
		// One server's run of them at a time, in commit order.
		server := dups[0].Server
		n := 1
		for n < len(dups) && dups[n].Server == server {
			n++
		}
		d.add(server, dups[:n])
		dups = dups[n:]
	}
}

func (d *duplicates) add(server string, dups []inbox.Duplicate) {
	d.metrics.InboxDuplicates(server, len(dups))
	first, last := dups[0].MessageID, dups[len(dups)-1].MessageID
	d.mu.Lock()
	if w := d.servers[server]; w != nil || d.closed {
		if w != nil {
			if w.n == 0 {
				w.first = first
			}
			w.n += len(dups)
			w.last = last
		}
		d.mu.Unlock()
		return
	}
	// No line for this server within the window: this one is logged now,
	// and the window sums what follows.
	w := &dupWindow{}
	d.servers[server] = w
	d.timers.Add(1)
	w.timer = time.AfterFunc(d.window, func() {
		defer d.timers.Done()
		d.windowEnd(server, w)
	})
	d.mu.Unlock()
	d.line(server, len(dups), first, last)
}

// windowEnd logs what server's window summed; when it summed nothing, the
// window closes, and the next duplicate is logged at once.
func (d *duplicates) windowEnd(server string, w *dupWindow) {
	d.mu.Lock()
	if d.servers[server] != w {
		d.mu.Unlock()
		return
	}
	n, first, last := w.n, w.first, w.last
	if n == 0 || d.closed {
		delete(d.servers, server)
	} else {
		w.n = 0
		d.timers.Add(1)
		w.timer = time.AfterFunc(d.window, func() {
			defer d.timers.Done()
			d.windowEnd(server, w)
		})
	}
	d.mu.Unlock()
	if n > 0 {
		d.line(server, n, first, last)
	}
}

// close logs what every window still sums, and waits for a line being
// logged; duplicates after it are counted, not logged.
func (d *duplicates) close() {
	d.mu.Lock()
	d.closed = true
	type pending struct {
		server      string
		n           int
		first, last string
	}
	var out []pending
	for server, w := range d.servers {
		if w.timer.Stop() {
			d.timers.Done()
		}
		if w.n > 0 {
			out = append(out, pending{server, w.n, w.first, w.last})
		}
		delete(d.servers, server)
	}
	d.mu.Unlock()
	for _, p := range out {
		d.line(p.server, p.n, p.first, p.last)
	}
	d.timers.Wait()
}

// line logs n duplicates of server, the first and last ids named.
func (d *duplicates) line(server string, n int, first, last string) {
	d.log.Info(DuplicatesText(server, n, first, last),
		"server", server, "count", n, "first_id", first, "last_id", last)
}

// DuplicatesText is the log line for n messages of server found in the
// inbox already, first and last their first and last ids.
func DuplicatesText(server string, n int, first, last string) string {
	const why = "a server that numbers its messages from 1 on every run needs ids unique across runs"
	if n == 1 {
		return fmt.Sprintf("1 message from %s was already in the inbox (id %s) and was not delivered again: %s", server, first, why)
	}
	return fmt.Sprintf("%s messages from %s were already in the inbox (ids %s … %s) and were not delivered again: %s",
		lograte.Thousands(n), server, first, last, why)
}
