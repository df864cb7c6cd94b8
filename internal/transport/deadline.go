package transport

import (
	"sync"
	"time"
)

// readDeadline is a read deadline kept as a channel, for a wait a file's
// own deadline does not reach (a pipe end's Read, a process's wait for its
// exit): the channel passed returns is closed once the deadline has
// passed. Setting it allocates nothing until someone asks for the channel,
// so a stream whose deadline is set on every call pays for it only when a
// wait needs it.
type readDeadline struct {
	mu     sync.Mutex
	at     time.Time     // zero for none
	ch     chan struct{} // handed out by passed; nil until asked for
	timer  *time.Timer   // closes ch at at
	closed bool          // ch is closed
}

// passed returns a channel closed once the deadline has passed.
func (d *readDeadline) passed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
		d.arm()
	}
	return d.ch
}

// set moves the deadline to t (zero for none). A channel already handed
// out and still open follows it; a closed one is let go.
func (d *readDeadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = t
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.closed {
		d.ch, d.closed = nil, false
	}
	if d.ch != nil {
		d.arm()
	}
}

// arm closes d.ch at d.at, now if that has passed. d.mu is held.
func (d *readDeadline) arm() {
	if d.at.IsZero() {
		return
	}
	wait := time.Until(d.at)
	if wait <= 0 {
		close(d.ch)
		d.closed = true
		return
	}
	ch := d.ch
	d.timer = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.ch == ch && !d.closed {
			close(ch)
			d.closed = true
		}
	})
}
