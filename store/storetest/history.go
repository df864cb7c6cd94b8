package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/store"
)

// The contract of Record, History and Cursors, and of Message.Kind and
// FeatureSet: the tests Run adds to its list.

// entry returns a distinct entry of conversation, numbered i.
func entry(conversation string, i int) store.Entry {
	return store.Entry{
		Conversation: conversation,
		Body:         json.RawMessage(fmt.Sprintf(`{"role":"user","n":%d}`, i)),
		At:           at0.Add(time.Duration(i) * time.Second),
	}
}

func mustRecord(t *testing.T, s store.Store, entries []store.Entry, cursors map[string]int64) []store.Entry {
	t.Helper()
	out, err := s.Record(t.Context(), entries, cursors)
	if err != nil {
		t.Fatalf("Record(%d entries, %d cursors): %v", len(entries), len(cursors), err)
	}
	if len(out) != len(entries) {
		t.Fatalf("Record(%d entries) returned %d", len(entries), len(out))
	}
	return out
}

func history(t *testing.T, s store.Store, conversation string) []store.Entry {
	t.Helper()
	var got []store.Entry
	if err := s.History(t.Context(), conversation, func(e store.Entry) error {
		got = append(got, e)
		return nil
	}); err != nil {
		t.Fatalf("History(%q): %v", conversation, err)
	}
	return got
}

func cursors(t *testing.T, s store.Store) map[string]int64 {
	t.Helper()
	got, err := s.Cursors(t.Context())
	if err != nil {
		t.Fatalf("Cursors: %v", err)
	}
	return got
}

func entrySeqs(entries []store.Entry) []int64 {
	seqs := make([]int64, len(entries))
	for i, e := range entries {
		seqs[i] = e.Seq
	}
	return seqs
}

// Record returns the entries with Seq set, increasing across calls and
// conversations, and leaves the caller's entries alone.
func testRecordSeq(t *testing.T, s store.Store) {
	in := []store.Entry{entry("a", 1), entry("b", 2), entry("a", 3), entry("agent@ch", 4), entry("b", 5)}
	out := mustRecord(t, s, in[:1], nil)
	out = append(out, mustRecord(t, s, in[1:4], map[string]int64{"a": 1})...)
	out = append(out, mustRecord(t, s, in[4:], nil)...)
	checkIncreasing(t, "Record", entrySeqs(out))
	for i := range in {
		if in[i].Seq != 0 {
			t.Errorf("Record set Seq %d in the caller's entry %d", in[i].Seq, i)
		}
		want := in[i]
		want.Seq = out[i].Seq
		if diff := cmp.Diff(want, out[i], cmpOpts...); diff != "" {
			t.Errorf("entry %d returned by Record differs from the one given (-given +returned):\n%s", i, diff)
		}
	}
}

// Record with nothing writes nothing and is no error; a new store has no
// history and no cursors.
func testRecordNothing(t *testing.T, s store.Store) {
	if got := cursors(t, s); len(got) != 0 {
		t.Fatalf("a new store has cursors %v", got)
	}
	if got := history(t, s, "a"); len(got) != 0 {
		t.Fatalf("a new store has a history of %d entries", len(got))
	}
	out, err := s.Record(t.Context(), nil, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("Record(nil, nil) = %v, %v; want no entries, nil", out, err)
	}
	out, err = s.Record(t.Context(), []store.Entry{}, map[string]int64{})
	if err != nil || len(out) != 0 {
		t.Fatalf("Record(none, none) = %v, %v; want no entries, nil", out, err)
	}
	if got := cursors(t, s); len(got) != 0 {
		t.Fatalf("cursors after an empty Record: %v", got)
	}
}

// History gives back exactly one conversation's entries, in Seq order,
// whatever their bodies and times.
func testHistoryFilters(t *testing.T, s store.Store) {
	paris := time.FixedZone("CET", 3600)
	var (
		want = map[string][]store.Entry{}
		all  []store.Entry
	)
	calls := [][]store.Entry{
		{entry("a", 1), entry("b", 2)},
		{{Conversation: "a", Body: json.RawMessage(`"sérveur ☃ \u0000 '\""`), At: at0.In(paris)}},
		{{Conversation: "b"}}, // no body, zero At
		{{Conversation: "a@chan\x00nel", Body: json.RawMessage(`"` + strings.Repeat("long ", 20000) + `"`), At: at0}},
		{entry("a", 5), entry("b", 6), entry("a", 7)},
	}
	for _, c := range calls {
		for _, e := range mustRecord(t, s, c, nil) {
			want[e.Conversation] = append(want[e.Conversation], e)
			all = append(all, e)
		}
	}
	checkIncreasing(t, "Record", entrySeqs(all))
	for _, conv := range []string{"a", "b", "a@chan\x00nel", "c", "a@"} {
		got := history(t, s, conv)
		if diff := cmp.Diff(want[conv], got, cmpOpts...); diff != "" {
			t.Errorf("History(%q) (-recorded +got):\n%s", conv, diff)
		}
	}
	// Reading does not consume.
	if got := history(t, s, "a"); len(got) != len(want["a"]) {
		t.Fatalf("a second History(a) gave %d entries, want %d", len(got), len(want["a"]))
	}
}

// An error from History's fn stops it and is returned.
func testHistoryStops(t *testing.T, s store.Store) {
	mustRecord(t, s, []store.Entry{entry("a", 1), entry("a", 2), entry("a", 3)}, nil)
	errStop := errors.New("stop here")
	calls := 0
	err := s.History(t.Context(), "a", func(store.Entry) error {
		calls++
		if calls == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 2 {
		t.Fatalf("History returned %v after %d calls of fn, want fn's error %v after 2", err, calls, errStop)
	}
}

// A Record with an entry that names no conversation, or a cursor with no
// name or a negative position, fails whole, wrapping store.ErrInvalid, and
// the history goes on after it.
func testRecordAllOrNone(t *testing.T, s store.Store) {
	first := mustRecord(t, s, []store.Entry{entry("a", 1)}, map[string]int64{"a": 1})
	for _, tc := range []struct {
		name    string
		entries []store.Entry
		cursors map[string]int64
	}{
		{"an entry with no conversation", []store.Entry{entry("a", 2), {Body: json.RawMessage(`{}`)}, entry("b", 3)}, map[string]int64{"a": 5}},
		{"a cursor with no name", []store.Entry{entry("a", 2)}, map[string]int64{"a": 5, "": 6}},
		{"a negative cursor", []store.Entry{entry("a", 2)}, map[string]int64{"b": 4, "a": -1}},
		{"only a bad cursor", nil, map[string]int64{"a": -5}},
	} {
		out, err := s.Record(t.Context(), tc.entries, tc.cursors)
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Record with %s: err = %v, want one wrapping store.ErrInvalid", tc.name, err)
		}
		if out != nil {
			t.Fatalf("a failed Record returned entries: %v", out)
		}
		for i := range tc.entries {
			if tc.entries[i].Seq != 0 {
				t.Fatalf("a failed Record set Seq %d in the caller's entry %d", tc.entries[i].Seq, i)
			}
		}
	}
	if got := history(t, s, "a"); len(got) != 1 || got[0].Seq != first[0].Seq {
		t.Fatalf("after failed Records the history of a holds %v, want only Seq %d", entrySeqs(got), first[0].Seq)
	}
	if got := history(t, s, "b"); len(got) != 0 {
		t.Fatalf("after failed Records the history of b holds %v", entrySeqs(got))
	}
	if got, want := cursors(t, s), map[string]int64{"a": 1}; !cmp.Equal(got, want) {
		t.Fatalf("after failed Records the cursors are %v, want %v", got, want)
	}
	next := mustRecord(t, s, []store.Entry{entry("b", 4)}, nil)
	if next[0].Seq <= first[0].Seq {
		t.Fatalf("Seq after failed Records is %d, not above %d", next[0].Seq, first[0].Seq)
	}
}

// Record sets the cursors it names and leaves the others; a later Record
// overwrites, back as well as forward; Cursors gives a map of the
// caller's own.
func testCursors(t *testing.T, s store.Store) {
	mustRecord(t, s, nil, map[string]int64{"agent": 5, "agent@ch": 7, "zero": 0})
	mustRecord(t, s, []store.Entry{entry("agent", 1)}, map[string]int64{"agent": 9})
	mustRecord(t, s, []store.Entry{entry("agent@ch", 2)}, map[string]int64{"agent@ch": 3, "other": 1 << 40})
	want := map[string]int64{"agent": 9, "agent@ch": 3, "zero": 0, "other": 1 << 40}
	got := cursors(t, s)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Cursors (-want +got):\n%s", diff)
	}
	got["agent"] = 100
	delete(got, "zero")
	if diff := cmp.Diff(want, cursors(t, s)); diff != "" {
		t.Fatalf("changing the map Cursors returned changed the store (-want +got):\n%s", diff)
	}
}

// Concurrent Records all land, each entry at a Seq of its own, each call's
// in its order; History gives each conversation's in Seq order, and every
// cursor holds its goroutine's last.
func testConcurrentRecords(t *testing.T, s store.Store) {
	const goroutines, calls, conversations = 8, 25, 3
	var (
		mu  sync.Mutex
		all = map[string]int64{} // body -> Seq
		wg  sync.WaitGroup
	)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for k := range calls {
				entries := make([]store.Entry, 1+k%3)
				for i := range entries {
					entries[i] = store.Entry{
						Conversation: fmt.Sprintf("conv-%d", (g+i)%conversations),
						Body:         json.RawMessage(fmt.Sprintf(`"g%d/c%d/e%d"`, g, k, i)),
						At:           at0,
					}
				}
				out, err := s.Record(t.Context(), entries, map[string]int64{fmt.Sprintf("g%d", g): int64(k)})
				if err != nil {
					errs <- fmt.Errorf("goroutine %d call %d: %w", g, k, err)
					return
				}
				for i := 1; i < len(out); i++ {
					if out[i].Seq <= out[i-1].Seq {
						errs <- fmt.Errorf("goroutine %d call %d: Seqs %v not increasing", g, k, entrySeqs(out))
						return
					}
				}
				mu.Lock()
				for _, e := range out {
					all[string(e.Body)] = e.Seq
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for body, seq := range all {
		if other, ok := seen[seq]; ok {
			t.Fatalf("Seq %d returned for both %s and %s", seq, other, body)
		}
		seen[seq] = body
	}
	n := 0
	for c := range conversations {
		conv := fmt.Sprintf("conv-%d", c)
		got := history(t, s, conv)
		checkIncreasing(t, "History("+conv+")", entrySeqs(got))
		for _, e := range got {
			if e.Conversation != conv {
				t.Fatalf("History(%s) gave an entry of %q", conv, e.Conversation)
			}
			if all[string(e.Body)] != e.Seq {
				t.Fatalf("History(%s) gave %s at Seq %d, Record returned Seq %d", conv, e.Body, e.Seq, all[string(e.Body)])
			}
		}
		n += len(got)
	}
	if n != len(all) {
		t.Fatalf("the histories hold %d entries, Record returned %d", n, len(all))
	}
	want := map[string]int64{}
	for g := range goroutines {
		want[fmt.Sprintf("g%d", g)] = calls - 1
	}
	if diff := cmp.Diff(want, cursors(t, s)); diff != "" {
		t.Fatalf("Cursors (-want +got):\n%s", diff)
	}
}

// pushEvent returns a push event as the inbox keeps it.
func pushEvent(server, eventID, featureSet string, i int) store.Message {
	m := message(server, "", eventID, i)
	m.ThreadID = ""
	m.Kind, m.FeatureSet = store.KindPushEvent, featureSet
	return m
}

// Kind and FeatureSet round-trip; a push event is deduplicated by server
// and event id like a channel message by server, channel and message id,
// and a channel message with the same id is another message.
func testMessageKinds(t *testing.T, s store.Store) {
	first := []store.Message{
		pushEvent("s", "ev-1", "mcpl.calendar", 1),
		message("s", "c", "ev-1", 2),
		pushEvent("s", "ev-2", "", 3),
		pushEvent("other", "ev-1", "mcpl.calendar", 4),
	}
	if got := mustAdd(t, s, first); !cmp.Equal(got, []bool{true, true, true, true}) {
		t.Fatalf("AddMessages(push ev-1, channel message ev-1, push ev-2, other server's ev-1) reported %v, want all added", got)
	}
	second := []store.Message{pushEvent("s", "ev-1", "mcpl.other", 5), pushEvent("s", "ev-3", "mcpl.calendar", 6)}
	if got := mustAdd(t, s, second); !cmp.Equal(got, []bool{false, true}) {
		t.Fatalf("AddMessages(push ev-1 again, push ev-3) reported %v, want [false true]", got)
	}
	want := slices.Concat(first, second[1:])
	if diff := cmp.Diff(want, messages(t, s, 0), cmpOpts...); diff != "" {
		t.Fatalf("inbox (-want +got):\n%s", diff)
	}
}

// Record with an ended context writes nothing and returns its error.
func testRecordCanceled(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Record(ctx, []store.Entry{entry("a", 1)}, map[string]int64{"a": 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Record with an ended context: err = %v, want context.Canceled", err)
	}
	if got := history(t, s, "a"); len(got) != 0 {
		t.Fatalf("history holds %d entries after a canceled Record", len(got))
	}
	if got := cursors(t, s); len(got) != 0 {
		t.Fatalf("cursors %v after a canceled Record", got)
	}
}

// After Close, Record, History and Cursors fail with store.ErrClosed.
func testRecordClose(t *testing.T, s store.Store) {
	mustRecord(t, s, []store.Entry{entry("a", 1)}, map[string]int64{"a": 1})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	if _, err := s.Record(ctx, []store.Entry{entry("a", 2)}, nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Record after Close: %v, want store.ErrClosed", err)
	}
	if _, err := s.Record(ctx, nil, map[string]int64{"a": 2}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Record of a cursor alone after Close: %v, want store.ErrClosed", err)
	}
	called := false
	if err := s.History(ctx, "a", func(store.Entry) error { called = true; return nil }); !errors.Is(err, store.ErrClosed) || called {
		t.Errorf("History after Close: %v (fn called: %v), want store.ErrClosed", err, called)
	}
	if got, err := s.Cursors(ctx); !errors.Is(err, store.ErrClosed) || got != nil {
		t.Errorf("Cursors after Close: %v, %v; want nil, store.ErrClosed", got, err)
	}
}

// A store reopened on the same data keeps the histories, the cursors and
// the messages' kinds, and numbers entries on after the old ones.
func testReopenHistory(t *testing.T, s store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	a := mustRecord(t, s, []store.Entry{entry("a", 1), entry("b", 2)}, map[string]int64{"a": 3, "b": 4})
	a = append(a, mustRecord(t, s, []store.Entry{entry("a", 3)}, map[string]int64{"a": 5})...)
	msgs := []store.Message{pushEvent("s", "ev-1", "mcpl.calendar", 1), message("s", "c", "1", 2)}
	mustAdd(t, s, msgs)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := reopen(t, s)
	if diff := cmp.Diff([]store.Entry{a[0], a[2]}, history(t, r, "a"), cmpOpts...); diff != "" {
		t.Fatalf("reopened store's history of a (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(a[1:2], history(t, r, "b"), cmpOpts...); diff != "" {
		t.Fatalf("reopened store's history of b (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"a": 5, "b": 4}, cursors(t, r)); diff != "" {
		t.Fatalf("reopened store's cursors (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(msgs, messages(t, r, 0), cmpOpts...); diff != "" {
		t.Fatalf("reopened store's inbox (-before +after):\n%s", diff)
	}
	if got := mustAdd(t, r, []store.Message{pushEvent("s", "ev-1", "mcpl.calendar", 3)}); got[0] {
		t.Fatal("reopened store added a push event it had")
	}
	next := mustRecord(t, r, []store.Entry{entry("b", 4)}, map[string]int64{"b": 6})
	if next[0].Seq <= a[len(a)-1].Seq {
		t.Fatalf("reopened store recorded at Seq %d, not above %d", next[0].Seq, a[len(a)-1].Seq)
	}
	if diff := cmp.Diff(map[string]int64{"a": 5, "b": 6}, cursors(t, r)); diff != "" {
		t.Fatalf("reopened store's cursors after a Record (-want +got):\n%s", diff)
	}
}
