package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/store"
)

// The prune tests' clock is the messages' own At: message(…, i) is
// accepted at at0 + i ms, and a PruneQuery's Before is a time on that
// clock, so nothing here reads the wall clock.

func mustPrune(t *testing.T, s store.Store, q store.PruneQuery) int {
	t.Helper()
	n, err := s.PruneInbox(t.Context(), q)
	if err != nil {
		t.Fatalf("PruneInbox(%+v): %v", q, err)
	}
	return n
}

// allMessages is the whole inbox, in Seq order.
func allMessages(t *testing.T, s store.Store) []store.Message {
	t.Helper()
	return messages(t, s, 0)
}

// pruneInbox adds 20 messages, i = 0..19 accepted at at0 + i ms,
// alternating between servers s1 and s2.
func pruneInbox(t *testing.T, s store.Store) []store.Message {
	t.Helper()
	var all []store.Message
	for i := range 20 {
		srv := "s1"
		if i%2 == 1 {
			srv = "s2"
		}
		all = append(all, message(srv, "general", fmt.Sprint(i), i))
	}
	mustAdd(t, s, all)
	checkIncreasing(t, "AddMessages", msgSeqs(all))
	return all
}

// PruneInbox drops the messages accepted before Before whose Seq is at
// most their server's bound (Through, else Floor), and only those, and
// says how many; Page, Messages and InboxEnd no longer see them.
func testPruneSelects(t *testing.T, s store.Store) {
	all := pruneInbox(t, s)
	before := at0.Add(15 * time.Millisecond) // messages 0..14 are old enough
	// s1 is consumed through message 10 (by Floor), s2 through message 5.
	q := store.PruneQuery{Before: before, Floor: all[10].Seq, Through: map[string]int64{"s2": all[5].Seq}}
	gone := func(i int) bool {
		m := all[i]
		bound := all[10].Seq
		if m.Server == "s2" {
			bound = all[5].Seq
		}
		return m.At.Before(before) && m.Seq <= bound
	}
	var want []store.Message
	dropped := 0
	for i := range all {
		if gone(i) {
			dropped++
		} else {
			want = append(want, all[i])
		}
	}
	if n := mustPrune(t, s, q); n != dropped {
		t.Errorf("PruneInbox dropped %d messages, want %d", n, dropped)
	}
	if diff := cmp.Diff(want, allMessages(t, s), cmpOpts...); diff != "" {
		t.Errorf("inbox after PruneInbox (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(filter(want, func(m store.Message) bool { return m.Server == "s2" }), page(t, s, store.InboxQuery{Server: "s2"}), cmpOpts...); diff != "" {
		t.Errorf("Page(s2) after PruneInbox (-want +got):\n%s", diff)
	}
	if end := inboxEnd(t, s); end != all[len(all)-1].Seq {
		t.Errorf("InboxEnd after PruneInbox = %d, want %d", end, all[len(all)-1].Seq)
	}
	// The same query again drops nothing more.
	if n := mustPrune(t, s, q); n != 0 {
		t.Errorf("PruneInbox again dropped %d messages, want 0", n)
	}
	// A zero Before drops nothing, whatever the bounds.
	if n := mustPrune(t, s, store.PruneQuery{Floor: all[19].Seq}); n != 0 {
		t.Errorf("PruneInbox with no Before dropped %d messages, want 0", n)
	}
	// Everything consumed and old: the inbox empties, and Seqs go on
	// above every one given.
	if n := mustPrune(t, s, store.PruneQuery{Before: at0.Add(time.Hour), Floor: all[19].Seq}); n != len(want) {
		t.Errorf("PruneInbox of everything dropped %d messages, want %d", n, len(want))
	}
	if end := inboxEnd(t, s); end != 0 {
		t.Errorf("InboxEnd of a pruned-empty inbox = %d, want 0", end)
	}
	m := message("s1", "general", "new", 99)
	msgs := []store.Message{m}
	mustAdd(t, s, msgs)
	if msgs[0].Seq <= all[19].Seq {
		t.Errorf("a message added after pruning got Seq %d, not above %d", msgs[0].Seq, all[19].Seq)
	}
}

// Limit bounds what one call drops, oldest Seq first.
func testPruneLimit(t *testing.T, s store.Store) {
	all := pruneInbox(t, s)
	q := store.PruneQuery{Before: at0.Add(time.Hour), Floor: all[19].Seq, Limit: 7}
	if n := mustPrune(t, s, q); n != 7 {
		t.Fatalf("PruneInbox with Limit 7 dropped %d messages", n)
	}
	if diff := cmp.Diff(all[7:], allMessages(t, s), cmpOpts...); diff != "" {
		t.Errorf("inbox after PruneInbox with Limit 7 (-want +got):\n%s", diff)
	}
}

// A pruned message's key still dedupes: the same server, channel and
// message id sent again is not added, until KeysBefore forgets the key.
func testPruneKeepsDedupe(t *testing.T, s store.Store) {
	all := pruneInbox(t, s)
	if n := mustPrune(t, s, store.PruneQuery{Before: at0.Add(10 * time.Millisecond), Floor: all[19].Seq}); n != 10 {
		t.Fatalf("PruneInbox dropped %d messages, want 10", n)
	}
	again := []store.Message{message("s1", "general", "0", 0), message("s2", "general", "1", 1), message("s1", "general", "fresh", 50)}
	added := mustAdd(t, s, again)
	if diff := cmp.Diff([]bool{false, false, true}, added); diff != "" {
		t.Errorf("AddMessages of two pruned messages and a new one: added (-want +got):\n%s", diff)
	}
	// A message of the same id on another channel is another message.
	if added := mustAdd(t, s, []store.Message{message("s1", "random", "0", 0)}); !added[0] {
		t.Errorf("a pruned message's id on another channel was not added")
	}
	// Forget the keys of messages accepted before message 5: 0..4 come
	// in again, 5..9 still not.
	if n := mustPrune(t, s, store.PruneQuery{KeysBefore: at0.Add(5 * time.Millisecond)}); n != 0 {
		t.Errorf("PruneInbox forgetting keys dropped %d messages, want 0", n)
	}
	added = mustAdd(t, s, []store.Message{message("s1", "general", "4", 4), message("s2", "general", "5", 5)})
	if diff := cmp.Diff([]bool{true, false}, added); diff != "" {
		t.Errorf("AddMessages after keys before message 5 were forgotten: added (-want +got):\n%s", diff)
	}
}

// An ended ctx or a closed store drops nothing.
func testPruneCanceled(t *testing.T, s store.Store) {
	all := pruneInbox(t, s)
	q := store.PruneQuery{Before: at0.Add(time.Hour), Floor: all[19].Seq}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n, err := s.PruneInbox(ctx, q); err == nil || n != 0 {
		t.Errorf("PruneInbox with an ended ctx = %d, %v; want 0 and an error", n, err)
	}
	if got := allMessages(t, s); len(got) != len(all) {
		t.Errorf("after PruneInbox with an ended ctx the inbox has %d messages, want %d", len(got), len(all))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.PruneInbox(t.Context(), q); err == nil {
		t.Errorf("PruneInbox on a closed store succeeded")
	}
}

// A reopened store keeps what was pruned pruned, and its keys.
func testReopenPruned(t *testing.T, s store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	all := pruneInbox(t, s)
	if n := mustPrune(t, s, store.PruneQuery{Before: at0.Add(10 * time.Millisecond), Floor: all[19].Seq}); n != 10 {
		t.Fatalf("PruneInbox dropped %d messages, want 10", n)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := reopen(t, s)
	if diff := cmp.Diff(all[10:], allMessages(t, r), cmpOpts...); diff != "" {
		t.Errorf("reopened store's inbox (-want +got):\n%s", diff)
	}
	if added := mustAdd(t, r, []store.Message{message("s1", "general", "0", 0)}); added[0] {
		t.Errorf("a reopened store added again a message it had pruned")
	}
}
