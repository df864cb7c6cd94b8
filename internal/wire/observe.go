package wire

import (
	"errors"
	"time"
)

// Observer hears how each request on a connection ended. Its methods are
// called on the connection's goroutines, once per request, and must
// return quickly. method is as the message named it: a peer can send any
// string there, so an observer that keys on it bounds what it keeps.
type Observer interface {
	// Called: a call this side made ended after d. outcome is "ok" or the
	// failure's Outcome ("not-sent", "no-response", "error-response",
	// "bad-response").
	Called(method, outcome string, d time.Duration)
	// Answered: this side answered the other side's request, d after it
	// was read (its wait in the queue included). outcome is "ok",
	// "error" (a refusal included), or "unanswered" (the handler sent no
	// answer: ErrNoReply).
	Answered(method, outcome string, d time.Duration)
}

// outcomeOf names a call's end for Observer.Called.
func outcomeOf(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Outcome.String()
	}
	return "error"
}

// Queued returns how many of the other side's messages wait for the
// handler now.
func (p *Peer) Queued() int {
	p.inbox.mu.Lock()
	defer p.inbox.mu.Unlock()
	return len(p.inbox.items)
}
