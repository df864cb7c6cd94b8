package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/store"
)

// The contract of Compact: the tests Run adds to its list, and the
// property that replay after compaction folds to the same decisions as
// replay of the whole log.

func mustCompact(t *testing.T, s store.Store, through int64, keep ...int64) int {
	t.Helper()
	dropped, err := s.Compact(t.Context(), through, keep)
	if err != nil {
		t.Fatalf("Compact(through %d, keep %v): %v", through, keep, err)
	}
	return dropped
}

// pick returns recs[i] for each i, in that order.
func pick(recs []store.Record, is ...int) []store.Record {
	out := make([]store.Record, len(is))
	for k, i := range is {
		out[k] = recs[i]
	}
	return out
}

// Compact drops what is at most through and not kept, and nothing else:
// the kept records and the tail replay as they were, with their Seqs. A
// Seq in keep that names no record, or one above through, changes
// nothing; so does a through below every Seq.
func testCompactKeeps(t *testing.T, s store.Store) {
	if n := mustCompact(t, s, 10); n != 0 {
		t.Fatalf("Compact of an empty log dropped %d records", n)
	}
	var recs []store.Record
	for i := range 10 {
		recs = append(recs, mustAppend(t, s, decision(i))...)
	}
	recs = append(recs, mustAppend(t, s, store.Record{Kind: store.KindDeclined, Server: "s", Channel: "c", MessageID: "inv", Acknowledgment: "no", At: at0})...)
	for _, through := range []int64{0, -1, recs[0].Seq - 1} {
		if n := mustCompact(t, s, through, recs[0].Seq); n != 0 {
			t.Fatalf("Compact(through %d) dropped %d records, want none", through, n)
		}
	}
	if diff := cmp.Diff(recs, replay(t, s), cmpOpts...); diff != "" {
		t.Fatalf("log after Compacts that drop nothing (-appended +replayed):\n%s", diff)
	}

	// Through record 6; keep 1 and 4, a Seq that names nothing, and 8
	// (above through: it stays anyway, as the tail).
	n := mustCompact(t, s, recs[6].Seq, recs[4].Seq, recs[1].Seq, recs[10].Seq+1000, recs[8].Seq, recs[1].Seq)
	if n != 5 {
		t.Errorf("Compact dropped %d records, want 5 (0, 2, 3, 5, 6)", n)
	}
	want := pick(recs, 1, 4, 7, 8, 9, 10)
	if diff := cmp.Diff(want, replay(t, s), cmpOpts...); diff != "" {
		t.Fatalf("log after Compact (-want +replayed):\n%s", diff)
	}
	// Again: what went is gone, what was kept stays if kept again.
	if n := mustCompact(t, s, recs[6].Seq, recs[4].Seq, recs[1].Seq); n != 0 {
		t.Errorf("the same Compact again dropped %d records, want none", n)
	}
	// Now through the end, keeping 4 and 9: the kept may be anywhere.
	if n := mustCompact(t, s, recs[10].Seq, recs[9].Seq, recs[4].Seq); n != 4 {
		t.Errorf("Compact through the end dropped %d records, want 4 (1, 7, 8, 10)", n)
	}
	want = pick(recs, 4, 9)
	if diff := cmp.Diff(want, replay(t, s), cmpOpts...); diff != "" {
		t.Fatalf("log after Compact through the end (-want +replayed):\n%s", diff)
	}
	next := mustAppend(t, s, decision(11))
	if next[0].Seq <= recs[10].Seq {
		t.Fatalf("Append after Compact gave Seq %d, not above the highest given, %d", next[0].Seq, recs[10].Seq)
	}
	if diff := cmp.Diff(append(want, next...), replay(t, s), cmpOpts...); diff != "" {
		t.Fatalf("log after Compact and Append (-want +replayed):\n%s", diff)
	}
}

// A Compact that drops every record, the newest too, leaves an empty log,
// and Append numbers on after the highest Seq ever given: a Seq is never
// reused.
func testCompactNumbering(t *testing.T, s store.Store) {
	recs := mustAppend(t, s, decision(1), decision(2), decision(3))
	if n := mustCompact(t, s, recs[2].Seq); n != 3 {
		t.Fatalf("Compact of every record dropped %d, want 3", n)
	}
	if got := replay(t, s); len(got) != 0 {
		t.Fatalf("log after compacting it all holds %v", recSeqs(got))
	}
	next := mustAppend(t, s, decision(4), decision(5))
	checkIncreasing(t, "Append after compacting it all", append(recSeqs(recs), recSeqs(next)...))
	// Through far past the end: the same as through the end.
	if n := mustCompact(t, s, next[1].Seq+1_000_000, next[0].Seq); n != 1 {
		t.Fatalf("Compact through past the end dropped %d, want 1", n)
	}
	last := mustAppend(t, s, decision(6))
	if last[0].Seq <= next[1].Seq {
		t.Fatalf("Append gave Seq %d, not above the highest given, %d", last[0].Seq, next[1].Seq)
	}
	if diff := cmp.Diff([]store.Record{next[0], last[0]}, replay(t, s), cmpOpts...); diff != "" {
		t.Fatalf("log (-want +replayed):\n%s", diff)
	}
}

// A Compact with an ended context, or on a closed store, drops nothing and
// says why.
func testCompactCanceled(t *testing.T, s store.Store) {
	recs := mustAppend(t, s, decision(1), decision(2), decision(3))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n, err := s.Compact(ctx, recs[2].Seq, nil); !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("Compact with an ended context = %d, %v; want 0, context.Canceled", n, err)
	}
	if diff := cmp.Diff(recs, replay(t, s), cmpOpts...); diff != "" {
		t.Fatalf("log after a canceled Compact (-appended +replayed):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, through := range []int64{recs[2].Seq, 0} {
		if n, err := s.Compact(t.Context(), through, nil); !errors.Is(err, store.ErrClosed) || n != 0 {
			t.Errorf("Compact(through %d) after Close = %d, %v; want 0, store.ErrClosed", through, n, err)
		}
	}
}

// Appends running while Compacts do lose nothing that Append returned:
// every record is in the log unless a Compact that ran had it at most its
// through and not in its keep, and Seqs never repeat.
func testCompactConcurrentAppends(t *testing.T, s store.Store) {
	const appenders, calls, compacts = 4, 30, 10
	type compaction struct {
		through int64
		keep    map[int64]bool
	}
	var (
		mu       sync.Mutex
		returned = map[int64]store.Record{}
		highest  int64
		done     []compaction // in the order they ran: one goroutine makes them
		dropped  int
		wg       sync.WaitGroup
	)
	errs := make(chan error, appenders+1)
	for g := range appenders {
		wg.Go(func() {
			for k := range calls {
				out, err := s.Append(t.Context(), callRecords(g, k)...)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d call %d: %w", g, k, err)
					return
				}
				mu.Lock()
				for _, r := range out {
					if _, ok := returned[r.Seq]; ok {
						mu.Unlock()
						errs <- fmt.Errorf("Seq %d returned twice", r.Seq)
						return
					}
					returned[r.Seq] = r
					highest = max(highest, r.Seq)
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for k := range compacts {
			// Through the highest Seq returned so far, keeping every
			// third record returned so far: records still in flight
			// below it go, as the contract says.
			mu.Lock()
			c := compaction{through: highest, keep: map[int64]bool{}}
			var keep []int64
			for seq := range returned {
				if seq%3 == 0 {
					c.keep[seq] = true
					keep = append(keep, seq)
				}
			}
			mu.Unlock()
			n, err := s.Compact(t.Context(), c.through, keep)
			if err != nil {
				errs <- fmt.Errorf("Compact %d: %w", k, err)
				return
			}
			mu.Lock()
			done = append(done, c)
			dropped += n
			mu.Unlock()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want []store.Record
	for _, r := range returned {
		if !slices.ContainsFunc(done, func(c compaction) bool { return r.Seq <= c.through && !c.keep[r.Seq] }) {
			want = append(want, r)
		}
	}
	slices.SortFunc(want, func(a, b store.Record) int { return int(a.Seq - b.Seq) })
	got := replay(t, s)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("log after concurrent Appends and Compacts (-want +replayed):\n%s", diff)
	}
	if dropped != len(returned)-len(got) {
		t.Fatalf("the Compacts reported %d records dropped; the log lost %d of the %d appended", dropped, len(returned)-len(got), len(returned))
	}
}

// A store reopened after a Compact replays the compacted log and numbers
// on after the highest Seq ever given, the dropped newest too.
func testReopenCompacted(t *testing.T, s store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	recs := mustAppend(t, s, decision(1), decision(2), decision(3), decision(4))
	if n := mustCompact(t, s, recs[3].Seq, recs[1].Seq); n != 3 {
		t.Fatalf("Compact dropped %d records, want 3", n)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := reopen(t, s)
	if diff := cmp.Diff(recs[1:2], replay(t, r), cmpOpts...); diff != "" {
		t.Fatalf("reopened store's log (-compacted +after):\n%s", diff)
	}
	next := mustAppend(t, r, decision(5))
	if next[0].Seq <= recs[3].Seq {
		t.Fatalf("reopened store appended at Seq %d, not above the highest given, %d", next[0].Seq, recs[3].Seq)
	}
}

// DecisionKey is what the channel layer folds the log by.
type DecisionKey struct{ Server, Channel string }

// FoldDecisions is the newest decision record of each (server, channel),
// as the channel layer rebuilds its state from Replay: a compaction that
// keeps NewestDecisions must leave a log that folds to the same.
func FoldDecisions(recs []store.Record) map[DecisionKey]store.Record {
	out := map[DecisionKey]store.Record{}
	for _, r := range recs {
		if r.Kind == store.KindDecision {
			out[DecisionKey{r.Server, r.Channel}] = r
		}
	}
	return out
}

// NewestDecisions is the Seqs of FoldDecisions(recs), increasing: the
// keep a Compact is given, as the channel layer gives it.
func NewestDecisions(recs []store.Record) []int64 {
	var keep []int64
	for _, r := range FoldDecisions(recs) {
		keep = append(keep, r.Seq)
	}
	slices.Sort(keep)
	return keep
}

// sameRecord is cmp.Equal(a, b, cmpOpts...) for records, without the
// reflection.
func sameRecord(a, b store.Record) bool {
	at := a.At.IsZero() == b.At.IsZero()
	if at && !a.At.IsZero() {
		d := a.At.Sub(b.At)
		at = d > -time.Millisecond && d < time.Millisecond
	}
	a.At, b.At = time.Time{}, time.Time{}
	return at && a == b
}

// compactionSeeds seed the property test's runs, each on a store of its
// own. They are fixed, so a run is the same every time; a failure names
// its seed.
var compactionSeeds = []uint64{1, 2, 3, 20260314}

// testReplayAfterCompaction checks the property compaction is for: after
// any sequence of Appends (decisions of a few servers and channels, with
// random states and sources, and declines) and Compacts (through the
// highest Seq appended, or now and then an older one, keeping the newest
// decision of each channel as the fold so far knows it, and now and then
// Seqs that name nothing), the fold of Replay equals the fold of the
// whole log, kept here, uncompacted. It also checks the log is exactly
// what the Compacts should have left, that each Compact reports what it
// dropped, and that Seqs only increase. With reopen, it closes and
// reopens the store now and then.
func testReplayAfterCompaction(t *testing.T, s store.Store, seed uint64, reopen func(t *testing.T, s store.Store) store.Store) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	servers := []string{"s0", "s1", "sérveur"}
	channels := []string{"general", "random", "dev", "#ops", "dm/ada"}
	sources := []string{"agent-tool", "server-bootstrap", "subscription-policy", "opened-by-delivery", "housekeeping"}
	var (
		whole []store.Record // every record appended, never compacted
		live  []store.Record // what the log should hold
		last  int64          // the highest Seq given
	)
	const steps = 120
	for step := range steps {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, step %d: %s", seed, step, fmt.Sprintf(format, args...))
		}
		switch p := rng.IntN(100); {
		case p < 70 || len(whole) == 0:
			recs := make([]store.Record, 1+rng.IntN(4))
			for i := range recs {
				r := store.Record{
					Kind:    store.KindDecision,
					Server:  servers[rng.IntN(len(servers))],
					Channel: channels[rng.IntN(len(channels))],
					State:   []store.State{store.Open, store.Closed}[rng.IntN(2)],
					Source:  sources[rng.IntN(len(sources))],
					At:      at0.Add(time.Duration(step) * time.Second),
				}
				if rng.IntN(5) == 0 {
					r.Kind, r.State, r.Source = store.KindDeclined, "", ""
					r.MessageID, r.Acknowledgment = fmt.Sprintf("inv-%d", step), "declined"
				}
				recs[i] = r
			}
			out, err := s.Append(t.Context(), recs...)
			if err != nil {
				fail("Append(%d records): %v", len(recs), err)
			}
			for _, r := range out {
				if r.Seq <= last {
					fail("Append gave Seq %d, not above the highest given, %d", r.Seq, last)
				}
				last = r.Seq
			}
			whole = append(whole, out...)
			live = append(live, out...)
		case p < 95 || reopen == nil:
			through := last
			if rng.IntN(4) == 0 {
				through = whole[rng.IntN(len(whole))].Seq
			}
			keep := NewestDecisions(whole)
			if rng.IntN(3) == 0 {
				// Seqs that name nothing: a dropped one, one above the
				// end, 0.
				keep = append(keep, whole[rng.IntN(len(whole))].Seq, last+1+rng.Int64N(10), 0)
			}
			rng.Shuffle(len(keep), func(i, j int) { keep[i], keep[j] = keep[j], keep[i] })
			kept := map[int64]bool{}
			for _, seq := range keep {
				kept[seq] = true
			}
			n, err := s.Compact(t.Context(), through, keep)
			if err != nil {
				fail("Compact(through %d, keeping %d): %v", through, len(keep), err)
			}
			before := len(live)
			live = slices.DeleteFunc(live, func(r store.Record) bool { return r.Seq <= through && !kept[r.Seq] })
			if n != before-len(live) {
				fail("Compact(through %d, keeping %d) reported %d records dropped, want %d", through, len(keep), n, before-len(live))
			}
		default:
			if err := s.Close(); err != nil {
				fail("Close: %v", err)
			}
			s = reopen(t, s)
		}
		// sameRecord first: cmp is slow, and its diff wanted only on a
		// failure.
		got := replay(t, s)
		if want, folded := FoldDecisions(whole), FoldDecisions(got); !maps.EqualFunc(want, folded, sameRecord) {
			fail("the decisions replay folds to differ from the whole log's (-whole +replayed):\n%s", cmp.Diff(want, folded, cmpOpts...))
		}
		if !slices.EqualFunc(live, got, sameRecord) {
			fail("the log differs from what the Compacts should have left (-want +replayed):\n%s", cmp.Diff(live, got, cmpOpts...))
		}
	}
}
