// Package storetest is the contract every store.Store backend passes: the
// semantics store.Store documents, checked the same way for each (the
// memory store, store/sqlite, and any other).
//
// A backend's test calls Run with a function that opens a new, empty store;
// a backend whose data outlives the store value (a file, a server) also
// passes Reopen, so that Run checks that closing and reopening keeps
// everything.
//
// Besides a test for each promise of store.Store, Run checks the property
// compaction is for (ReplayAfterCompactionGivesTheSameDecisionsAsReplayOfTheWholeLog):
// over random Appends and Compacts, from fixed seeds, the newest decision
// of each channel that Replay folds to is the one the whole, uncompacted
// log folds to.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpl-go/mcpl/store"
)

// An Option adds to what Run checks.
type Option func(*config)

type config struct {
	reopen func(t *testing.T, s store.Store) store.Store
}

// Reopen gives Run a way to reopen a store's data: reopen returns a new
// store on the data of s, which the test has closed. Run then checks that a
// reopened store replays every record, message, history entry and cursor
// the closed one had, a compacted log as compacted and dropped cursors as
// dropped, and goes on numbering after them; and its compaction property
// test closes and reopens the store now and then.
func Reopen(reopen func(t *testing.T, s store.Store) store.Store) Option {
	return func(c *config) { c.reopen = reopen }
}

// Run runs the contract tests, each as a parallel subtest of t on a store
// of its own from open. open must return a new, empty store each time and
// be safe to call from parallel subtests. Run closes every store it gets
// (Close is idempotent, so a cleanup of the backend's own may close it
// too).
func Run(t *testing.T, open func(t *testing.T) store.Store, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	open2 := func(t *testing.T) store.Store {
		t.Helper()
		s := open(t)
		t.Cleanup(func() { s.Close() })
		return s
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"AppendAssignsIncreasingSeq", testAppendSeq},
		{"AppendNothing", testAppendNothing},
		{"ReplayReturnsWhatWasAppended", testReplayExact},
		{"ReplayStopsAtFnError", testReplayStops},
		{"AppendIsAllOrNone", testAllOrNone},
		{"ConcurrentAppends", testConcurrentAppends},
		{"AddMessagesDedupes", testDedupe},
		{"AddMessagesDedupesOccurrences", testDedupeOccurrences},
		{"ConcurrentAddMessagesDedupe", testConcurrentDedupe},
		{"MessagesAfter", testMessagesAfter},
		{"MessagesStopsAtFnError", testMessagesStops},
		{"EndedContextWritesNothing", testCanceled},
		{"Close", testClose},
		{"RecordAssignsIncreasingSeq", testRecordSeq},
		{"RecordNothing", testRecordNothing},
		{"HistoryFiltersByConversation", testHistoryFilters},
		{"HistoryStopsAtFnError", testHistoryStops},
		{"RecordIsAllOrNone", testRecordAllOrNone},
		{"CursorsOverwrite", testCursors},
		{"ConcurrentRecords", testConcurrentRecords},
		{"MessageKinds", testMessageKinds},
		{"RecordEndedContextWritesNothing", testRecordCanceled},
		{"RecordClose", testRecordClose},
		{"CompactKeepsKeptAndTail", testCompactKeeps},
		{"CompactNeverReusesSeqs", testCompactNumbering},
		{"CompactEndedContextOrClosedDropsNothing", testCompactCanceled},
		{"ConcurrentAppendsDuringCompacts", testCompactConcurrentAppends},
		{"PageFilters", testPageFilters},
		{"PageBounds", testPageBounds},
		{"PageEndedContextOrClosed", testPageCanceled},
		{"InboxEnd", testInboxEnd},
		{"DropCursors", testDropCursors},
		{"DropCursorsEndedContextDropsNothing", testDropCursorsCanceled},
		{"PruneInboxSelects", testPruneSelects},
		{"PruneInboxLimit", testPruneLimit},
		{"PruneInboxKeepsDedupe", testPruneKeepsDedupe},
		{"PruneInboxEndedContextOrClosedDropsNothing", testPruneCanceled},
		{"SaveStateReplaces", testSaveState},
		{"SaveStateEndedContextOrClosed", testSaveStateCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open2(t))
		})
	}
	var reopen func(t *testing.T, s store.Store) store.Store
	if cfg.reopen != nil {
		reopen = func(t *testing.T, s store.Store) store.Store {
			r := cfg.reopen(t, s)
			t.Cleanup(func() { r.Close() })
			return r
		}
	}
	t.Run("ReplayAfterCompactionGivesTheSameDecisionsAsReplayOfTheWholeLog", func(t *testing.T) {
		t.Parallel()
		for _, seed := range compactionSeeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				t.Parallel()
				testReplayAfterCompaction(t, open2(t), seed, reopen)
			})
		}
	})
	if reopen != nil {
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, s store.Store, reopen func(t *testing.T, s store.Store) store.Store)
		}{
			{"ReopenKeepsEverything", testReopen},
			{"ReopenKeepsHistoryAndCursors", testReopenHistory},
			{"ReopenKeepsCompaction", testReopenCompacted},
			{"ReopenKeepsInboxAndDroppedCursors", testReopenInbox},
			{"ReopenKeepsPruned", testReopenPruned},
			{"ReopenKeepsStates", testReopenStates},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, open2(t), reopen)
			})
		}
	}
}

// cmpOpts compare what a store gives back with what it was given: At to
// the millisecond (store.Record's promise; a backend may keep more) and in
// any location, a nil Body as an empty one.
var cmpOpts = []cmp.Option{
	cmp.Comparer(func(a, b time.Time) bool {
		if a.IsZero() || b.IsZero() {
			return a.IsZero() == b.IsZero()
		}
		d := a.Sub(b)
		return d > -time.Millisecond && d < time.Millisecond
	}),
	cmpopts.EquateEmpty(),
}

var at0 = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

// decision returns a distinct decision record, numbered i.
func decision(i int) store.Record {
	state := store.Open
	if i%2 == 1 {
		state = store.Closed
	}
	return store.Record{
		Kind:    store.KindDecision,
		Server:  fmt.Sprintf("server-%d", i%3),
		Channel: fmt.Sprintf("channel-%d", i),
		State:   state,
		Source:  fmt.Sprintf("source-%d", i),
		At:      at0.Add(time.Duration(i) * time.Second),
	}
}

func message(server, channel, id string, i int) store.Message {
	var tags []string // every other message has tags, so none and some both round-trip
	if i%2 == 1 {
		tags = []string{"chat:mention", "chat:addressed", fmt.Sprintf("room:n=%d", i)}
	}
	return store.Message{
		Server:    server,
		Channel:   channel,
		MessageID: id,
		ThreadID:  "thread-" + id,
		Tags:      tags,
		Directed:  i%3 == 0, // so both round-trip, apart from the tags
		Body:      json.RawMessage(fmt.Sprintf(`{"id":%q,"n":%d}`, id, i)),
		At:        at0.Add(time.Duration(i) * time.Millisecond),
	}
}

func mustAppend(t *testing.T, s store.Store, recs ...store.Record) []store.Record {
	t.Helper()
	out, err := s.Append(t.Context(), recs...)
	if err != nil {
		t.Fatalf("Append(%d records): %v", len(recs), err)
	}
	if len(out) != len(recs) {
		t.Fatalf("Append(%d records) returned %d", len(recs), len(out))
	}
	return out
}

func mustAdd(t *testing.T, s store.Store, msgs []store.Message) []bool {
	t.Helper()
	added, err := s.AddMessages(t.Context(), msgs)
	if err != nil {
		t.Fatalf("AddMessages(%d messages): %v", len(msgs), err)
	}
	if len(added) != len(msgs) {
		t.Fatalf("AddMessages(%d messages) reported %d", len(msgs), len(added))
	}
	return added
}

func replay(t *testing.T, s store.Store) []store.Record {
	t.Helper()
	var got []store.Record
	if err := s.Replay(t.Context(), func(r store.Record) error {
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return got
}

func messages(t *testing.T, s store.Store, after int64) []store.Message {
	t.Helper()
	var got []store.Message
	if err := s.Messages(t.Context(), after, func(m store.Message) error {
		got = append(got, m)
		return nil
	}); err != nil {
		t.Fatalf("Messages(after %d): %v", after, err)
	}
	return got
}

func checkIncreasing(t *testing.T, what string, seqs []int64) {
	t.Helper()
	for i, seq := range seqs {
		if seq <= 0 || i > 0 && seq <= seqs[i-1] {
			t.Fatalf("%s: Seqs %v are not positive and strictly increasing (at %d)", what, seqs, i)
		}
	}
}

func recSeqs(recs []store.Record) []int64 {
	seqs := make([]int64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
	}
	return seqs
}

func msgSeqs(msgs []store.Message) []int64 {
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seqs[i] = m.Seq
	}
	return seqs
}

// Append returns the records with Seq set, increasing across calls, and
// leaves the caller's records alone.
func testAppendSeq(t *testing.T, s store.Store) {
	in := []store.Record{decision(1), decision(2), decision(3), decision(4)}
	out := mustAppend(t, s, in[0])
	out = append(out, mustAppend(t, s, in[1:]...)...)
	checkIncreasing(t, "Append", recSeqs(out))
	for i := range in {
		if in[i].Seq != 0 {
			t.Errorf("Append set Seq %d in the caller's record %d", in[i].Seq, i)
		}
		want := in[i]
		want.Seq = out[i].Seq
		if diff := cmp.Diff(want, out[i], cmpOpts...); diff != "" {
			t.Errorf("record %d returned by Append differs from the one given (-given +returned):\n%s", i, diff)
		}
	}
}

// Append with no records writes nothing and is no error.
func testAppendNothing(t *testing.T, s store.Store) {
	out, err := s.Append(t.Context())
	if err != nil || len(out) != 0 {
		t.Fatalf("Append() = %v, %v; want no records, nil", out, err)
	}
	if got := replay(t, s); len(got) != 0 {
		t.Fatalf("Replay after Append() gave %d records", len(got))
	}
	added, err := s.AddMessages(t.Context(), nil)
	if err != nil || len(added) != 0 {
		t.Fatalf("AddMessages(nil) = %v, %v; want none, nil", added, err)
	}
}

// Replay gives back exactly what was appended, in order, whatever the
// strings hold and whatever the time's location.
func testReplayExact(t *testing.T, s store.Store) {
	if got := replay(t, s); len(got) != 0 {
		t.Fatalf("a new store replays %d records", len(got))
	}
	paris := time.FixedZone("CET", 3600)
	in := []store.Record{
		decision(1),
		{Kind: store.KindDeclined, Server: "srv", Channel: "ch", MessageID: "m-1", Acknowledgment: "declined: busy", At: at0.In(paris)},
		{Kind: store.KindDecision, Server: "sérveur ☃", Channel: "chan\x00nel\n'\"", State: store.Closed, Source: strings.Repeat("long ", 2000), At: at0},
		{Kind: store.KindDeclined, Server: "srv", Channel: "ch2"}, // zero At, empty strings
		{Kind: store.KindDecision, Server: "srv", Channel: "ch3", State: store.Open, At: time.Date(2262, 1, 1, 0, 0, 0, 1, time.UTC)},
		{Kind: store.KindDecision, Server: "srv", Channel: "ch4", State: store.Open, At: time.Date(1700, 1, 1, 0, 0, 0, 999, time.UTC)},
		{Kind: store.KindLazy, Server: "srv", Channel: "dm:bob", At: at0},
		{Kind: store.KindLazyGone, Server: "srv", Channel: "dm:bob", At: at0},
	}
	var want []store.Record
	want = append(want, mustAppend(t, s, in[:2]...)...)
	want = append(want, mustAppend(t, s, in[2])...)
	want = append(want, mustAppend(t, s, in[3:]...)...)
	got := replay(t, s)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("Replay differs from what Append returned (-appended +replayed):\n%s", diff)
	}
	// And again: replaying does not consume.
	if got := replay(t, s); len(got) != len(want) {
		t.Fatalf("a second Replay gave %d records, want %d", len(got), len(want))
	}
}

// An error from Replay's fn stops it and is returned.
func testReplayStops(t *testing.T, s store.Store) {
	mustAppend(t, s, decision(1), decision(2), decision(3))
	errStop := errors.New("stop here")
	calls := 0
	err := s.Replay(t.Context(), func(store.Record) error {
		calls++
		if calls == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Replay returned %v, want fn's error %v", err, errStop)
	}
	if calls != 2 {
		t.Fatalf("Replay called fn %d times after it returned an error on the 2nd", calls)
	}
}

// A call with an invalid record fails whole, wrapping store.ErrInvalid,
// and the log goes on after it.
func testAllOrNone(t *testing.T, s store.Store) {
	first := mustAppend(t, s, decision(1))
	badKind := decision(2)
	badKind.Kind = "opened"
	badState := decision(3)
	badState.State = "half-open"
	for _, bad := range []store.Record{badKind, badState} {
		out, err := s.Append(t.Context(), decision(4), bad, decision(5))
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Append with kind %q state %q: err = %v, want one wrapping store.ErrInvalid", bad.Kind, bad.State, err)
		}
		if out != nil {
			t.Fatalf("a failed Append returned records: %v", out)
		}
	}
	if got := replay(t, s); len(got) != 1 || got[0].Seq != first[0].Seq {
		t.Fatalf("after failed Appends the log holds %v, want only Seq %d", recSeqs(got), first[0].Seq)
	}
	next := mustAppend(t, s, decision(6))
	if next[0].Seq <= first[0].Seq {
		t.Fatalf("Seq after failed Appends is %d, not above %d", next[0].Seq, first[0].Seq)
	}
	got := replay(t, s)
	if diff := cmp.Diff(append(first, next...), got, cmpOpts...); diff != "" {
		t.Fatalf("log after failed Appends (-want +got):\n%s", diff)
	}
}

// callRecords is what goroutine g appends in its call k, in the tests of
// concurrent Appends: one to three decisions, each Source distinct.
func callRecords(g, k int) []store.Record {
	recs := make([]store.Record, 1+k%3)
	for i := range recs {
		recs[i] = decision(g*1000 + k*10 + i)
		recs[i].Source = fmt.Sprintf("g%d/c%d/r%d", g, k, i)
	}
	return recs
}

// Concurrent Appends all land, each with Seqs of its own, each call's in
// its order; Replay gives them all in Seq order.
func testConcurrentAppends(t *testing.T, s store.Store) {
	const goroutines, calls = 8, 25
	var (
		mu  sync.Mutex
		all = map[string]int64{} // Source -> Seq
		wg  sync.WaitGroup
	)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for k := range calls {
				out, err := s.Append(t.Context(), callRecords(g, k)...)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d call %d: %w", g, k, err)
					return
				}
				for i := 1; i < len(out); i++ {
					if out[i].Seq <= out[i-1].Seq {
						errs <- fmt.Errorf("goroutine %d call %d: Seqs %v not increasing", g, k, recSeqs(out))
						return
					}
				}
				mu.Lock()
				for _, r := range out {
					all[r.Source] = r.Seq
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
	for src, seq := range all {
		if other, ok := seen[seq]; ok {
			t.Fatalf("Seq %d returned for both %s and %s", seq, other, src)
		}
		seen[seq] = src
	}
	got := replay(t, s)
	checkIncreasing(t, "Replay", recSeqs(got))
	if len(got) != len(all) {
		t.Fatalf("Replay gave %d records, Append returned %d", len(got), len(all))
	}
	for _, r := range got {
		if all[r.Source] != r.Seq {
			t.Fatalf("Replay gave %s at Seq %d, Append returned Seq %d", r.Source, r.Seq, all[r.Source])
		}
	}
}

// A message already in the inbox, or earlier in the same call, is not
// added again, and the inbox keeps the first copy.
// testDedupeOccurrences: coalesced occurrences of one message (RFC-006
// §3.1) are messages of their own by their EventID, each kept once, and
// pruning keeps each one's key.
func testDedupeOccurrences(t *testing.T, s store.Store) {
	create := message("s", "c", "M", 1)
	edit := message("s", "c", "M", 2)
	edit.EventID = "edit"
	editAgain := message("s", "c", "M", 3)
	editAgain.EventID = "edit"
	other := message("s", "c", "M", 4)
	other.EventID = "other"
	msgs := []store.Message{create, edit, editAgain, other}
	if got := mustAdd(t, s, msgs); !cmp.Equal(got, []bool{true, true, false, true}) {
		t.Fatalf("AddMessages(M, M/edit, M/edit, M/other) reported %v, want [true true false true]", got)
	}
	want := []store.Message{msgs[0], msgs[1], msgs[3]}
	if diff := cmp.Diff(want, messages(t, s, 0), cmpOpts...); diff != "" {
		t.Fatalf("inbox (-want +got):\n%s", diff)
	}
	if _, err := s.PruneInbox(context.Background(), store.PruneQuery{Before: time.Now().Add(time.Hour), Floor: msgs[3].Seq}); err != nil {
		t.Fatal(err)
	}
	again := []store.Message{message("s", "c", "M", 5), edit, message("s", "c", "M", 6)}
	again[2].EventID = "new"
	if got := mustAdd(t, s, again); !cmp.Equal(got, []bool{false, false, true}) {
		t.Fatalf("after pruning, AddMessages(M, M/edit, M/new) reported %v, want [false false true]", got)
	}
}

func testDedupe(t *testing.T, s store.Store) {
	a := message("s", "c", "a", 1)
	b := message("s", "c", "b", 2)
	aAgain := message("s", "c", "a", 3) // another body: the first copy stays
	first := []store.Message{a, b, aAgain}
	if got := mustAdd(t, s, first); !cmp.Equal(got, []bool{true, true, false}) {
		t.Fatalf("AddMessages(a, b, a) reported %v, want [true true false]", got)
	}
	if first[0].Seq <= 0 || first[1].Seq <= first[0].Seq {
		t.Fatalf("added messages got Seqs %d, %d: want positive, increasing", first[0].Seq, first[1].Seq)
	}
	if first[2].Seq != 0 {
		t.Fatalf("a message not added got Seq %d", first[2].Seq)
	}
	// Across calls; the same id on another channel or server is another
	// message.
	second := []store.Message{
		message("s", "c", "b", 4),
		message("s", "c", "c", 5),
		message("s", "other", "a", 6),
		message("other", "c", "a", 7),
	}
	if got := mustAdd(t, s, second); !cmp.Equal(got, []bool{false, true, true, true}) {
		t.Fatalf("AddMessages(b, c, other channel's a, other server's a) reported %v, want [false true true true]", got)
	}
	checkIncreasing(t, "AddMessages", []int64{first[0].Seq, first[1].Seq, second[1].Seq, second[2].Seq, second[3].Seq})
	want := []store.Message{first[0], first[1], second[1], second[2], second[3]}
	if diff := cmp.Diff(want, messages(t, s, 0), cmpOpts...); diff != "" {
		t.Fatalf("inbox (-want +got):\n%s", diff)
	}
}

// Concurrent calls adding the same messages add each exactly once.
func testConcurrentDedupe(t *testing.T, s store.Store) {
	const goroutines, ids = 8, 20
	var (
		mu    sync.Mutex
		added = map[string]int{}
		wg    sync.WaitGroup
	)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for k := 0; k < ids; k += 5 {
				msgs := make([]store.Message, 5)
				for i := range msgs {
					id := fmt.Sprintf("m%d", (k+i+g*5)%ids) // each goroutine in its own order
					msgs[i] = message("s", "c", id, g)
				}
				got, err := s.AddMessages(t.Context(), msgs)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", g, err)
					return
				}
				mu.Lock()
				for i, ok := range got {
					if ok {
						added[msgs[i].MessageID]++
					}
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
	for i := range ids {
		if n := added[fmt.Sprintf("m%d", i)]; n != 1 {
			t.Errorf("message m%d reported added %d times, want once", i, n)
		}
	}
	got := messages(t, s, 0)
	checkIncreasing(t, "Messages", msgSeqs(got))
	if len(got) != ids {
		t.Fatalf("inbox holds %d messages, want %d", len(got), ids)
	}
}

// Messages gives the messages above after, in order.
func testMessagesAfter(t *testing.T, s store.Store) {
	msgs := make([]store.Message, 5)
	for i := range msgs {
		msgs[i] = message("s", "c", fmt.Sprint(i), i)
	}
	mustAdd(t, s, msgs[:2])
	mustAdd(t, s, msgs[2:])
	for _, tc := range []struct {
		after int64
		want  []store.Message
	}{
		{-1, msgs},
		{0, msgs},
		{msgs[1].Seq, msgs[2:]},
		{msgs[3].Seq, msgs[4:]},
		{msgs[4].Seq, nil},
		{msgs[4].Seq + 100, nil},
	} {
		if diff := cmp.Diff(tc.want, messages(t, s, tc.after), cmpOpts...); diff != "" {
			t.Errorf("Messages(after %d) (-want +got):\n%s", tc.after, diff)
		}
	}
}

// An error from Messages' fn stops it and is returned.
func testMessagesStops(t *testing.T, s store.Store) {
	mustAdd(t, s, []store.Message{message("s", "c", "1", 1), message("s", "c", "2", 2), message("s", "c", "3", 3)})
	errStop := errors.New("stop here")
	calls := 0
	err := s.Messages(t.Context(), 0, func(store.Message) error {
		calls++
		if calls == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 2 {
		t.Fatalf("Messages returned %v after %d calls of fn, want fn's error %v after 2", err, calls, errStop)
	}
}

// A call whose context has ended writes nothing and returns its error.
func testCanceled(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Append(ctx, decision(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with an ended context: err = %v, want context.Canceled", err)
	}
	msgs := []store.Message{message("s", "c", "1", 1)}
	if _, err := s.AddMessages(ctx, msgs); !errors.Is(err, context.Canceled) {
		t.Fatalf("AddMessages with an ended context: err = %v, want context.Canceled", err)
	}
	if msgs[0].Seq != 0 {
		t.Fatalf("AddMessages with an ended context set Seq %d", msgs[0].Seq)
	}
	if got := replay(t, s); len(got) != 0 {
		t.Fatalf("log holds %d records after a canceled Append", len(got))
	}
	if got := messages(t, s, 0); len(got) != 0 {
		t.Fatalf("inbox holds %d messages after a canceled AddMessages", len(got))
	}
}

// After Close every method fails with store.ErrClosed, and Close again is
// no error.
func testClose(t *testing.T, s store.Store) {
	mustAppend(t, s, decision(1))
	mustAdd(t, s, []store.Message{message("s", "c", "1", 1)})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := t.Context()
	if _, err := s.Append(ctx, decision(2)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append after Close: %v, want store.ErrClosed", err)
	}
	if _, err := s.AddMessages(ctx, []store.Message{message("s", "c", "2", 2)}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("AddMessages after Close: %v, want store.ErrClosed", err)
	}
	called := false
	if err := s.Replay(ctx, func(store.Record) error { called = true; return nil }); !errors.Is(err, store.ErrClosed) || called {
		t.Errorf("Replay after Close: %v (fn called: %v), want store.ErrClosed", err, called)
	}
	if err := s.Messages(ctx, 0, func(store.Message) error { called = true; return nil }); !errors.Is(err, store.ErrClosed) || called {
		t.Errorf("Messages after Close: %v (fn called: %v), want store.ErrClosed", err, called)
	}
}

// A store reopened on the same data replays it all, numbers on after it,
// and still knows which messages it has.
func testReopen(t *testing.T, s store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	recs := mustAppend(t, s, decision(1), decision(2))
	recs = append(recs, mustAppend(t, s, store.Record{Kind: store.KindDeclined, Server: "s", Channel: "c", MessageID: "inv", Acknowledgment: "no", At: at0})...)
	msgs := []store.Message{message("s", "c", "1", 1), message("s", "c", "2", 2)}
	mustAdd(t, s, msgs)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := reopen(t, s)
	if diff := cmp.Diff(recs, replay(t, r), cmpOpts...); diff != "" {
		t.Fatalf("reopened store's log (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(msgs, messages(t, r, 0), cmpOpts...); diff != "" {
		t.Fatalf("reopened store's inbox (-before +after):\n%s", diff)
	}
	next := mustAppend(t, r, decision(3))
	if next[0].Seq <= recs[len(recs)-1].Seq {
		t.Fatalf("reopened store appended at Seq %d, not above %d", next[0].Seq, recs[len(recs)-1].Seq)
	}
	more := []store.Message{message("s", "c", "2", 3), message("s", "c", "3", 4)}
	if got := mustAdd(t, r, more); !cmp.Equal(got, []bool{false, true}) {
		t.Fatalf("reopened store's AddMessages(old, new) reported %v, want [false true]", got)
	}
	if more[1].Seq <= msgs[1].Seq {
		t.Fatalf("reopened store added a message at Seq %d, not above %d", more[1].Seq, msgs[1].Seq)
	}
}
