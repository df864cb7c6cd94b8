package wire

import (
	"context"
	"errors"
	"time"
)

// What a call reuses from the calls before it, and how a write says it
// ended at its own deadline.

// getCall returns a pending call for method, from those whose answer was
// taken: its channel is empty, and nothing else refers to it. A call that
// may still be answered (its write failed as the connection closed, or it
// was abandoned) is never put back.
func (p *Peer) getCall(method string) *pendingCall {
	if pc, ok := p.calls.Get().(*pendingCall); ok {
		pc.method = method
		return pc
	}
	return &pendingCall{method: method, ch: make(chan answer, 1)}
}

func (p *Peer) putCall(pc *pendingCall) {
	pc.method = ""
	p.calls.Put(pc)
}

// maxPooledBuf bounds the request buffers kept for reuse, so that one
// large request doesn't pin its memory.
const maxPooledBuf = 16 << 10

// getBuf returns an empty buffer of at least n bytes' capacity.
func (p *Peer) getBuf(n int) *[]byte {
	if b, ok := p.bufs.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, 0, max(n, 512))
	return &b
}

func (p *Peer) putBuf(b *[]byte) {
	if cap(*b) <= maxPooledBuf {
		p.bufs.Put(b)
	}
}

// getTimer returns a timer that fires after d, from the peer's stopped
// ones: a timer is three allocations, and every call with a deadline
// needs one. The pool is the peer's, not the process's, as a timer made
// in a testing/synctest bubble can't be used outside it.
func (p *Peer) getTimer(d time.Duration) *time.Timer {
	if t, ok := p.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and keeps it for another call. Since Go 1.23 a stopped
// timer's channel holds no stale value, so the next Reset starts clean.
func (p *Peer) putTimer(t *time.Timer) {
	t.Stop()
	p.timers.Put(t)
}

// ownDeadline says a failed write ended at its own deadline, not at the
// end of the caller's ctx.
func ownDeadline(ctx context.Context, err error) bool {
	return ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
}
