package transport

import (
	"sync"
	"time"
)

// readDeadline is a read deadline kept as a channel, for a wait a file's
// own deadline does not reach (a pipe end's Read, a process's wait for its
// exit): the channel passed returns is closed once the deadline has
// passed, and replaced when it is set again.
type readDeadline struct {
	mu     sync.Mutex
	ch     chan struct{} // closed when the deadline has passed
	timer  *time.Timer
	closed bool // ch is closed
}

func (d *readDeadline) passed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	return d.ch
}

func (d *readDeadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.ch == nil || d.closed {
		d.ch, d.closed = make(chan struct{}), false
	}
	if t.IsZero() {
		return
	}
	wait := time.Until(t)
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
