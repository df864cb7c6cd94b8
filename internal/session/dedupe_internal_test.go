package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/protocol"
)

// The dedupe set is bounded in bytes as well as by count: ids at the
// length limit push the oldest out long before dedupeKeep of them.
func TestDedupeBoundedInBytes(t *testing.T) {
	var d dedupe
	id := func(i int) string { return fmt.Sprintf("%0*d", MaxEventIDBytes, i) }
	res := protocol.PushEventResult{Accepted: true}
	const n = 10_000
	for i := range n {
		d.put(id(i), res)
	}
	if d.bytes > dedupeBytes {
		t.Errorf("the set holds %d bytes, over its bound of %d", d.bytes, dedupeBytes)
	}
	if want := dedupeBytes / MaxEventIDBytes; len(d.order) != want || len(d.seen) != want {
		t.Errorf("the set keeps %d ids (%d in its map), want %d", len(d.order), len(d.seen), want)
	}
	if _, ok := d.get(id(n - 1)); !ok {
		t.Error("the newest id was forgotten")
	}
	if _, ok := d.get(id(0)); ok {
		t.Error("the oldest id is still remembered")
	}
	// Short ids: the count bounds it.
	var c dedupe
	for i := range n {
		c.put(fmt.Sprint(i), res)
	}
	if len(c.order) != dedupeKeep {
		t.Errorf("%d short ids kept, want %d", len(c.order), dedupeKeep)
	}
	// Putting an id again replaces it, counted once.
	c.put("9999", protocol.PushEventResult{Reason: strings.Repeat("r", 10)})
	if len(c.order) != dedupeKeep {
		t.Errorf("a repeated put changed the count to %d", len(c.order))
	}
}
