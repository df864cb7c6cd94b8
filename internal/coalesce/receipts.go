package coalesce

import (
	"time"

	"github.com/mcpl-go/mcpl/protocol"
)

// Receipts (RFC-006 §3.1). Every admitted coalesced occurrence leaves a
// receipt keyed by (binding, eventId) holding its original result; a
// retry within the window advertised when the occurrence was admitted
// (never less than the default hour, and measured from that first
// admission, its last millisecond included) gets that result back and
// has no effect. A later, shorter
// advertisement does not shorten it (vector 48): the receipt keeps its
// own expiry. Receipts are part of State, so they survive restarts.
//
// A receipt also outlives its window while its occurrence is still held
// (an unread occupant, a batch placeholder): an eventId in use is never
// taken as a new occurrence, so the table never knows two occurrences by
// one id.
//
// Memory: one receipt per admitted occurrence for its window; the caller
// calls Expire now and then.

type receiptKey struct {
	binding string
	eventID string
}

type receipt struct {
	result   protocol.CoalesceResult
	admitted int64 // Unix milliseconds
	expires  int64
}

func (t *Table) live(binding, eventID string) bool {
	b := t.bindings[binding]
	if b == nil {
		return false
	}
	_, ok := b.live[eventID]
	return ok
}

// receipt returns the original result of a retry, if it is one.
func (t *Table) receipt(now time.Time, binding, eventID string) (protocol.CoalesceResult, bool) {
	r, ok := t.receipts[receiptKey{binding, eventID}]
	if !ok || (now.UnixMilli() > r.expires && !t.live(binding, eventID)) {
		return protocol.CoalesceResult{}, false
	}
	return r.result, true
}

// Receipt returns the original result of binding's occurrence eventID if
// a retry of it at now is still recognised: what Admit would answer,
// without admitting anything.
func (t *Table) Receipt(now time.Time, binding, eventID string) (protocol.CoalesceResult, bool) {
	return t.receipt(now, binding, eventID)
}

// Expire forgets the receipts whose window ended by now (and whose
// occurrence the table no longer holds), and returns how many.
func (t *Table) Expire(now time.Time) int {
	at := now.UnixMilli()
	n := 0
	for k, r := range t.receipts {
		if at > r.expires && !t.live(k.binding, k.eventID) {
			delete(t.receipts, k)
			n++
		}
	}
	if n > 0 {
		t.version++
	}
	return n
}
