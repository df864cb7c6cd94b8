package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/store"
)

func TestNewRefuses(t *testing.T) {
	for _, o := range []Options{
		{},
		{Store: store.NewMemory(), MaxBatch: -1},
		{Store: store.NewMemory(), MaxBatchBytes: -1},
	} {
		if in, err := New(o); err == nil {
			in.Close()
			t.Errorf("New(%+v) = nil error, want one", o)
		}
	}
}

// One goroutine Accepts 500 messages, one a call, without waiting for
// results between calls, as a server pipelining requests on one connection
// has them accepted, while the store takes each call only when the test
// lets it go. The Seqs follow the Accept order exactly, in the callers'
// slices and in the store, however the calls fall.
func TestOrderPipelined(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGate(t, s)
		in := open(t, Options{Store: g})
		stop := g.serve()
		want := seqIDs("m", 500)
		batches := make([][]store.Message, len(want))
		res := make([]<-chan Result, len(want))
		for i, id := range want {
			batches[i] = msgs(id)
			res[i] = in.Accept(batches[i])
		}
		got := make([]Result, len(res))
		for i, ch := range res {
			got[i] = result(t, ch)
		}
		calls := stop()
		if written := slices.Concat(calls...); !slices.Equal(written, want) {
			t.Fatalf("the calls wrote %v, want %v in order", calls, want)
		}
		t.Logf("%d messages in %d calls", len(want), len(calls))
		var prev int64
		for i := range want {
			r := got[i]
			if r.Err != nil || !slices.Equal(r.Added, []bool{true}) {
				t.Fatalf("Accept %d: %+v, want added", i, r)
			}
			if seq := batches[i][0].Seq; seq <= prev {
				t.Fatalf("Accept %d got Seq %d after %d: not in call order", i, seq, prev)
			}
			prev = batches[i][0].Seq
		}
		inbox, seqs := inboxIDs(t, s)
		if !slices.Equal(inbox, want) {
			t.Errorf("the inbox in Seq order is %v, want %v", inbox, want)
		}
		for i := range seqs {
			if seqs[i] != batches[i][0].Seq {
				t.Fatalf("the inbox has %s at Seq %d, its Accept was told %d", want[i], seqs[i], batches[i][0].Seq)
			}
		}
	})
}

// 16 goroutines each Accept their own sequence, one message a call, while
// the store commits as it goes: each goroutine's messages keep its order.
func TestOrderConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGate(t, s)
		in := open(t, Options{Store: g})
		stop := g.serve()
		const producers, each = 16, 40
		var wg sync.WaitGroup
		sent := make([][][]store.Message, producers)
		for p := range producers {
			wg.Go(func() {
				res := make([]<-chan Result, each)
				for i, id := range seqIDs(fmt.Sprintf("p%02d-", p), each) {
					b := msgs(id)
					sent[p] = append(sent[p], b)
					res[i] = in.Accept(b)
				}
				for i, ch := range res {
					if r := <-ch; r.Err != nil || !r.Added[0] {
						t.Errorf("producer %d, Accept %d: %+v", p, i, r)
					}
				}
			})
		}
		wg.Wait()
		calls := stop()
		for p := range producers {
			for i := 1; i < each; i++ {
				if a, b := sent[p][i-1][0].Seq, sent[p][i][0].Seq; a >= b {
					t.Errorf("producer %d: Accept %d got Seq %d, Accept %d Seq %d", p, i-1, a, i, b)
				}
			}
		}
		got, _ := inboxIDs(t, s)
		if len(got) != producers*each {
			t.Fatalf("the inbox has %d messages, want %d", len(got), producers*each)
		}
		next := make([]int, producers)
		for _, id := range got {
			var p, i int
			fmt.Sscanf(id, "p%02d-%03d", &p, &i)
			if i != next[p] {
				t.Fatalf("the inbox has %s where producer %d's message %d comes next", id, p, next[p])
			}
			next[p]++
		}
		t.Logf("%d messages in %d commits", producers*each, len(calls))
	})
}

// Accepts queued while one AddMessages is in flight are written in one
// following call, and OnCommit is called once a commit with its highest
// Seq.
func TestGroupCommit(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGate(t, s)
		var c commits
		in := open(t, Options{Store: g, OnCommit: c.on})
		first := msgs("a")
		r0 := in.Accept(first)
		if got := g.take(t); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("first call: %v", got)
		}
		// In flight: queue 20 Accepts, one of three messages.
		var queued [][]store.Message
		var res []<-chan Result
		var want []string
		for i := range 20 {
			b := msgs(fmt.Sprintf("b%02d", i))
			if i == 7 {
				b = msgs("b07", "b07x", "b07y")
			}
			queued = append(queued, b)
			res = append(res, in.Accept(b))
			want = append(want, ids(b)...)
		}
		g.pass()
		if r := result(t, r0); r.Err != nil || first[0].Seq == 0 {
			t.Fatalf("first Accept: %+v, Seq %d", r, first[0].Seq)
		}
		if got := g.take(t); !slices.Equal(got, want) {
			t.Fatalf("second call wrote %v, want every queued Accept's messages, in order: %v", got, want)
		}
		g.pass()
		var last int64
		for i, ch := range res {
			r := result(t, ch)
			if r.Err != nil || len(r.Added) != len(queued[i]) || slices.Contains(r.Added, false) {
				t.Fatalf("Accept %d: %+v", i, r)
			}
			for _, m := range queued[i] {
				if m.Seq <= last {
					t.Fatalf("%s: Seq %d after %d", m.MessageID, m.Seq, last)
				}
				last = m.Seq
			}
		}
		in.Close() // OnCommit has run for both commits
		if got, want := c.all(), []int64{first[0].Seq, last}; !slices.Equal(got, want) {
			t.Errorf("OnCommit got %v, want %v: one a commit, with its highest Seq", got, want)
		}
	})
}

// The store's dedupe holds across the Accepts of one commit, as if each
// were a call of its own in order, and against what the inbox holds; a
// commit that adds nothing calls no OnCommit. OnDuplicates hears each
// commit's messages not added, in commit order, once a commit.
func TestDedupe(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		if _, err := s.AddMessages(t.Context(), msgs("x")); err != nil {
			t.Fatal(err)
		}
		g := newGate(t, s)
		var c commits
		var dupMu sync.Mutex
		var dups []string // a commit's ids, space-separated
		onDups := func(d []Duplicate) {
			var ids []string
			for _, x := range d {
				ids = append(ids, x.Server+"/"+x.MessageID)
			}
			dupMu.Lock()
			dups = append(dups, strings.Join(ids, " "))
			dupMu.Unlock()
		}
		in := open(t, Options{Store: g, OnCommit: c.on, OnDuplicates: onDups})
		r0 := in.Accept(msgs("first"))
		g.take(t)
		a, b, cc := msgs("x", "y", "y"), msgs("y", "z"), msgs("z", "w")
		b[0].Channel = "other" // another channel: a different message
		ra, rb, rc := in.Accept(a), in.Accept(b), in.Accept(cc)
		g.pass()
		result(t, r0)
		g.take(t)
		g.pass()
		for _, tc := range []struct {
			name string
			ch   <-chan Result
			msgs []store.Message
			want []bool
		}{
			{"a", ra, a, []bool{false, true, false}},
			{"b", rb, b, []bool{true, true}},
			{"c", rc, cc, []bool{false, true}},
		} {
			r := result(t, tc.ch)
			if r.Err != nil || !slices.Equal(r.Added, tc.want) {
				t.Errorf("Accept %s: %+v, want Added %v", tc.name, r, tc.want)
			}
			for i, m := range tc.msgs {
				if (m.Seq != 0) != tc.want[i] {
					t.Errorf("Accept %s, message %d (%s): Seq %d, added %v", tc.name, i, m.MessageID, m.Seq, tc.want[i])
				}
			}
		}
		// Against the inbox, in a commit of its own.
		rd := in.Accept(msgs("w", "y"))
		g.take(t)
		g.pass()
		if r := result(t, rd); r.Err != nil || !slices.Equal(r.Added, []bool{false, false}) {
			t.Errorf("Accept of messages already there: %+v", r)
		}
		got, _ := inboxIDs(t, s)
		if want := []string{"x", "first", "y", "y", "z", "w"}; !slices.Equal(got, want) {
			t.Errorf("inbox %v, want %v", got, want)
		}
		in.Close()
		if got := c.all(); len(got) != 2 {
			t.Errorf("OnCommit got %v, want two calls (the last commit added nothing)", got)
		}
		dupMu.Lock()
		defer dupMu.Unlock()
		if want := []string{"srv/x srv/y srv/z", "srv/w srv/y"}; !slices.Equal(dups, want) {
			t.Errorf("OnDuplicates got %q, want %q (none for the first commit, which added all)", dups, want)
		}
	})
}

// A commit the store fails fails every Accept of it with the store's
// error, adds nothing, and the owner goes on with the next commit. The
// first failure is logged, the next ones not until one succeeds.
func TestStoreFails(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGate(t, s)
		rec := logtest.New()
		var c commits
		in := open(t, Options{Store: g, OnCommit: c.on, Logger: rec.Logger()})
		r0 := in.Accept(msgs("a"))
		g.take(t)
		b1, b2 := msgs("b1"), msgs("b2", "b3")
		rb1, rb2 := in.Accept(b1), in.Accept(b2)
		g.pass()
		result(t, r0)
		boom := errors.New("disk on fire")
		g.take(t)
		g.fail(boom)
		for _, ch := range []<-chan Result{rb1, rb2} {
			r := result(t, ch)
			if !errors.Is(r.Err, boom) || r.Added != nil {
				t.Errorf("Accept in the failed commit: %+v, want Err wrapping %v", r, boom)
			}
		}
		if b1[0].Seq != 0 || b2[0].Seq != 0 {
			t.Errorf("failed messages got Seqs %d, %d", b1[0].Seq, b2[0].Seq)
		}
		rc := in.Accept(msgs("c"))
		g.take(t)
		g.fail(boom)
		if r := result(t, rc); !errors.Is(r.Err, boom) {
			t.Errorf("second failed commit: %+v", r)
		}
		// The next commit goes through; the failed messages can be
		// accepted again.
		rd := in.Accept(msgs("b1", "d"))
		g.take(t)
		g.pass()
		if r := result(t, rd); r.Err != nil || !slices.Equal(r.Added, []bool{true, true}) {
			t.Errorf("commit after the failures: %+v", r)
		}
		if got, _ := inboxIDs(t, s); !slices.Equal(got, []string{"a", "b1", "d"}) {
			t.Errorf("inbox %v, want a, b1, d: nothing of the failed commits", got)
		}
		in.Close()
		if got := len(c.all()); got != 2 {
			t.Errorf("%d OnCommits, want 2 (failed commits wake nobody)", got)
		}
		var lines []string
		for _, r := range rec.All() {
			lines = append(lines, r.Level.String()+" "+r.Message)
		}
		want := []string{
			"DEBUG inbound messages could not be stored: their callers were told none was accepted; later failures are not logged until a commit succeeds",
			"DEBUG inbound messages are stored again",
		}
		if diff := cmp.Diff(want, lines); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}
		if got := rec.All()[1].Attr("failed_commits"); got != "2" {
			t.Errorf("failed_commits = %q, want 2", got)
		}
	})
}

// refusing is a store that refuses, with store.ErrInvalid, any call with
// a message whose id starts "bad", as a backend refuses content it can't
// hold.
type refusing struct{ store.Store }

func (r refusing) AddMessages(ctx context.Context, msgs []store.Message) ([]bool, error) {
	for i, m := range msgs {
		if strings.HasPrefix(m.MessageID, "bad") {
			return nil, fmt.Errorf("message %d: %w: a NUL in its id", i+1, store.ErrInvalid)
		}
	}
	return r.Store.AddMessages(ctx, msgs)
}

// A commit the store refuses with ErrInvalid is split until the refused
// Accepts fail alone; the others are added, in Accept order, with one
// OnCommit.
func TestInvalidFailsItsAcceptAlone(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGate(t, refusing{s})
		var c commits
		in := open(t, Options{Store: g, OnCommit: c.on})
		first := msgs("a")
		r0 := in.Accept(first)
		g.take(t)
		var res []<-chan Result
		var sent [][]store.Message
		for _, b := range [][]string{{"b"}, {"c", "bad1"}, {"d"}, {"e"}, {"f"}, {"bad2"}, {"g"}} {
			m := msgs(b...)
			sent = append(sent, m)
			res = append(res, in.Accept(m))
		}
		g.pass()
		result(t, r0)
		stop := g.serve()
		for i, ch := range res {
			r := result(t, ch)
			bad := strings.HasPrefix(sent[i][len(sent[i])-1].MessageID, "bad")
			switch {
			case bad && !errors.Is(r.Err, store.ErrInvalid):
				t.Errorf("Accept %d (%v): %+v, want ErrInvalid", i, ids(sent[i]), r)
			case !bad && (r.Err != nil || !r.Added[0]):
				t.Errorf("Accept %d (%v): %+v, want added", i, ids(sent[i]), r)
			}
		}
		calls := stop()
		if got, _ := inboxIDs(t, s); !slices.Equal(got, []string{"a", "b", "d", "e", "f", "g"}) {
			t.Errorf("inbox %v", got)
		}
		in.Close()
		if got, want := c.all(), []int64{first[0].Seq, sent[6][0].Seq}; !slices.Equal(got, want) {
			t.Errorf("OnCommit got %v, want %v", got, want)
		}
		// Halves of halves: 11 calls, 6 of which commit.
		want := [][]string{{"b", "c", "bad1", "d", "e", "f", "bad2", "g"},
			{"b", "c", "bad1", "d"}, {"b"}, {"c", "bad1", "d"}, {"c", "bad1"}, {"d"},
			{"e", "f", "bad2", "g"}, {"e", "f"}, {"bad2", "g"}, {"bad2"}, {"g"}}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("calls after the first (-want +got):\n%s", diff)
		}
	})
}

// A store closed under the Inbox fails each Accept with its own error,
// not the Inbox's ErrClosed; the Inbox still closes.
func TestStoreClosedUnderIt(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		in := open(t, Options{Store: s, Logger: slog.New(slog.DiscardHandler)})
		if r := result(t, in.Accept(msgs("a"))); r.Err != nil {
			t.Fatal(r.Err)
		}
		s.Close()
		for range 2 {
			r := result(t, in.Accept(msgs("b")))
			if !errors.Is(r.Err, store.ErrClosed) || errors.Is(r.Err, ErrClosed) {
				t.Errorf("Accept on a closed store: %+v, want the store's ErrClosed", r)
			}
		}
		in.Close()
	})
}

// Close commits what is queued, even while a commit is in flight; an
// Accept once Close has begun fails with ErrClosed at once; Close twice is
// fine. On the memory store, in a synctest bubble, to know Close has
// begun.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := store.NewMemory()
		g := newGate(t, s)
		in, err := New(Options{Store: g})
		if err != nil {
			t.Fatal(err)
		}
		r0 := in.Accept(msgs("a"))
		g.take(t)
		r1, r2 := in.Accept(msgs("b")), in.Accept(msgs("c", "d"))
		closed := make(chan struct{})
		go func() {
			in.Close()
			close(closed)
		}()
		synctest.Wait() // Close is waiting for the owner, which waits for the store
		select {
		case r := <-in.Accept(msgs("late")):
			if !errors.Is(r.Err, ErrClosed) || r.Added != nil {
				t.Errorf("Accept during Close: %+v, want ErrClosed", r)
			}
		default:
			t.Error("Accept during Close did not fail at once")
		}
		g.pass()
		if got := g.take(t); !slices.Equal(got, []string{"b", "c", "d"}) {
			t.Errorf("Close committed %v, want b, c, d", got)
		}
		g.pass()
		<-closed
		for _, ch := range []<-chan Result{r0, r1, r2} {
			select {
			case r := <-ch:
				if r.Err != nil {
					t.Errorf("queued Accept: %v", r.Err)
				}
			default:
				t.Error("a queued Accept had no Result once Close returned")
			}
		}
		in.Close()
		if r := <-in.Accept(nil); !errors.Is(r.Err, ErrClosed) {
			t.Errorf("Accept after Close: %+v", r)
		}
		if got, _ := inboxIDs(t, s); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
			t.Errorf("inbox %v", got)
		}
	})
}

// On a real file: Close commits what is queued before it returns.
func TestCloseCommits(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		in := open(t, Options{Store: s})
		var res []<-chan Result
		for _, id := range seqIDs("m", 50) {
			res = append(res, in.Accept(msgs(id)))
		}
		in.Close()
		in.Close()
		for i, ch := range res {
			select {
			case r := <-ch:
				if r.Err != nil {
					t.Fatalf("Accept %d: %v", i, r.Err)
				}
			default:
				t.Fatalf("Accept %d had no Result once Close returned", i)
			}
		}
		if got, _ := inboxIDs(t, s); !slices.Equal(got, seqIDs("m", 50)) {
			t.Errorf("inbox %v", got)
		}
		if r := result(t, in.Accept(msgs("late"))); !errors.Is(r.Err, ErrClosed) {
			t.Errorf("Accept after Close: %+v", r)
		}
	})
}

func TestAcceptNothing(t *testing.T) {
	in := open(t, Options{Store: store.NewMemory()})
	select {
	case r := <-in.Accept(nil):
		if r.Err != nil || r.Added == nil || len(r.Added) != 0 {
			t.Errorf("Accept(nil): %+v", r)
		}
	default:
		t.Error("Accept(nil) had no Result at once")
	}
}

// MaxBatch and MaxBatchBytes split commits at whole Accepts; an Accept
// past a bound on its own is a commit of its own.
func TestBounds(t *testing.T) {
	// A message's bytes: server "s", channel "c", a 3-byte id, and its
	// body.
	sized := func(id string, n int) store.Message {
		return store.Message{Server: "s", Channel: "c", MessageID: id, Body: []byte(strings.Repeat("x", n-5))}
	}
	for _, tc := range []struct {
		name    string
		opts    Options
		accepts [][]store.Message
		want    [][]string // the calls after the first, which holds "a00"
	}{
		{
			name: "MaxBatch",
			opts: Options{MaxBatch: 3},
			accepts: [][]store.Message{
				msgs("s01"), msgs("s02"), msgs("s03"), msgs("s04"), msgs("s05"), msgs("s06"), msgs("s07"),
				msgs("g01", "g02", "g03", "g04", "g05"), msgs("t01"), msgs("t02", "t03"), msgs("t04"),
			},
			want: [][]string{{"s01", "s02", "s03"}, {"s04", "s05", "s06"}, {"s07"}, {"g01", "g02", "g03", "g04", "g05"}, {"t01", "t02", "t03"}, {"t04"}},
		},
		{
			name: "MaxBatchBytes",
			opts: Options{MaxBatchBytes: 1000},
			accepts: [][]store.Message{
				{sized("s01", 300)}, {sized("s02", 300)}, {sized("s03", 400)}, // 1000: at the bound, not past it
				{sized("s04", 300)}, {sized("s05", 300)}, {sized("big", 1500)},
				{sized("s06", 300)}, {sized("s07", 300), sized("s08", 300)}, {sized("s09", 300)},
				{sized("s10", 1001)},
			},
			want: [][]string{{"s01", "s02", "s03"}, {"s04", "s05"}, {"big"}, {"s06", "s07", "s08"}, {"s09"}, {"s10"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, s store.Store) {
				g := newGate(t, s)
				tc.opts.Store = g
				in := open(t, tc.opts)
				r0 := in.Accept(msgs("a00"))
				g.take(t)
				var res []<-chan Result
				for _, a := range tc.accepts {
					res = append(res, in.Accept(slices.Clone(a)))
				}
				g.pass()
				result(t, r0)
				var got [][]string
				for range tc.want {
					got = append(got, g.take(t))
					g.pass()
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
				for i, ch := range res {
					if r := result(t, ch); r.Err != nil {
						t.Errorf("Accept %d: %v", i, r.Err)
					}
				}
			})
		})
	}
}
