package coalesce

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The table under random interleavings of every operation a host makes
// (admissions of every mode on a few subjects of two bindings, retries,
// assemblies with every render outcome, partial consumption, renders
// started and completed out of order and late, fallbacks, lapses,
// evictions, restarts in both recovery modes, receipt expiry), checked
// after every step against the invariants:
//
//   - a subject has at most one unconsumed replaceable occurrence, and it
//     is the one the table holds as its occupant;
//   - a subject's history, while tracked, never returns to none from
//     some or unknown;
//   - every batch placeholder delivered is a batch the table holds, until
//     the batch is materialized, removed or lapsed: accepted work is not
//     silently lost;
//   - a retry within its window gets its original result and no effect.
//
// The harness checks the rest as it applies each effect: nothing a model
// read is removed, a batch materializes at most once, a cancelled batch
// never materializes, a discarded completion materializes nothing.
//
// The same seed gives the same run: the whole trace is compared.
func TestRandomInterleavings(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 20
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			a := runRandom(t, seed, 250)
			b := runRandom(t, seed, 250)
			if d := cmp.Diff(a, b); d != "" {
				t.Fatalf("the same seed ran differently:\n%s", d)
			}
		})
	}
}

type sent struct {
	s   send
	res Result
}

func runRandom(t *testing.T, seed uint64, steps int) []string {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	opts := Options{MaxSubjects: 3 + rng.IntN(3)}
	h := newHarness(t, opts)
	var trace []string
	var admitted []sent
	history := map[Subject]History{}
	next := 0
	for step := range steps {
		h.now = h.now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		op := rng.IntN(100)
		var line string
		switch {
		case op < 45:
			s := randomSend(rng, &next)
			res := h.admit(s)
			admitted = append(admitted, sent{s, res})
			line = fmt.Sprintf("admit %s %s %s → %+v", s.binding, s.id, s.coalesce, res.Reply)
		case op < 50 && len(admitted) > 0:
			o := admitted[rng.IntN(len(admitted))]
			res := h.admit(o.s)
			if !res.Duplicate || res.Reply != o.res.Reply {
				t.Fatalf("step %d: retry of %s got %+v, want the duplicate of %+v", step, o.s.id, res, o.res.Reply)
			}
			line = "retry " + o.s.id
		case op < 60:
			plan := []*renderPlan{rendered("R" + fmt.Sprint(step)), {out: RenderEmpty}, {out: RenderFailed}, {out: RenderLapsed}}[rng.IntN(4)]
			line = fmt.Sprintf("assemble %v", h.assemble(plan))
		case op < 66:
			var live []*row
			for _, r := range h.rows {
				if !r.removed && r.kind == rowContent && !r.consumed {
					live = append(live, r)
				}
			}
			if len(live) > 0 {
				r := live[rng.IntN(len(live))]
				r.consumed, r.replaceable = true, false
				h.tab.Consume(r.binding, r.id)
				line = "consume " + r.id
			}
		case op < 74:
			if bs := allBatches(h); len(bs) > 0 {
				b := bs[rng.IntN(len(bs))]
				if r, ok := h.tab.StartRender(b.Subject); ok {
					h.renders = append(h.renders, r)
					line = fmt.Sprintf("start %d %s", r.ID, b.EventID)
				}
			}
		case op < 84:
			var open []uint64
			for _, b := range allBatches(h) {
				if b.RenderID != 0 {
					open = append(open, b.RenderID)
				}
			}
			if len(h.renders) > 0 {
				// Mostly an open render; sometimes any, late or cancelled.
				r := h.renders[rng.IntN(len(h.renders))]
				if len(open) > 0 && rng.IntN(4) != 0 {
					r.ID = open[rng.IntN(len(open))]
				}
				out := []RenderOutcome{Rendered, RenderEmpty, RenderFailed, RenderLapsed}[rng.IntN(4)]
				d := h.tab.Finish(r.ID, out)
				h.decide(d, fmt.Sprintf("R%d", r.ID))
				line = fmt.Sprintf("finish %d %v → %v %v", r.ID, out, d.Materialize, d.Cause)
			}
		case op < 88:
			if bs := allBatches(h); len(bs) > 0 {
				b := bs[rng.IntN(len(bs))]
				if rng.IntN(2) == 0 {
					if d, ok := h.tab.Fallback(b.Subject); ok {
						h.decide(d, "")
						line = "fallback " + d.EventID
					}
				} else if d, ok := h.tab.Lapse(b.Subject); ok {
					h.decide(d, "")
					line = "lapse " + d.EventID
				}
			}
		case op < 92:
			var all []Subject
			for _, b := range []string{"A", "B"} {
				all = append(all, h.tab.Subjects(b)...)
			}
			if len(all) > 0 {
				ev, _ := h.tab.Evict(all[rng.IntN(len(all))])
				if r := h.live[rowKey(ev.Subject.Binding, ev.Sealed)]; ev.Sealed != "" {
					r.replaceable, r.tracked = false, false
				}
				for _, d := range ev.Fallbacks {
					h.decide(d, "")
				}
				line = "evict " + ev.Subject.String()
			}
		case op < 96:
			mode := RecoveryMode(rng.IntN(2))
			h.restart(mode, true, opts)
			line = "restart " + mode.String()
		default:
			line = fmt.Sprintf("expire %d", h.tab.Expire(h.now))
		}
		checkInvariants(t, h, step, history)
		if line != "" {
			trace = append(trace, line)
		}
	}
	// Drain: every batch left falls back or is finished, once.
	for _, b := range allBatches(h) {
		if b.RenderID != 0 {
			h.decide(h.tab.Finish(b.RenderID, RenderFailed), "")
		} else if d, ok := h.tab.Fallback(b.Subject); ok {
			h.decide(d, "")
		}
	}
	checkInvariants(t, h, steps, history)
	for _, r := range h.rows {
		if !r.removed && r.kind == rowPlaceholder {
			t.Fatalf("placeholder %q left after the drain", r.id)
		}
	}
	st, _ := json.Marshal(h.tab.Export())
	return append(trace, string(st))
}

func allBatches(h *harness) []BatchInfo {
	return append(h.tab.Batches("A"), h.tab.Batches("B")...)
}

func randomSend(rng *rand.Rand, next *int) send {
	*next++
	s := send{binding: []string{"A", "B"}[rng.IntN(2)], id: fmt.Sprintf("e%d", *next), text: fmt.Sprintf("T%d", *next)}
	key := []string{"k1", "k2", "k3"}[rng.IntN(3)]
	scope := rng.IntN(3)
	switch scope {
	case 0:
		s.fs = "doc"
	case 1:
		s.fs = "notes"
	}
	mode := rng.IntN(3) // plain, deferred, retract
	if scope == 2 && rng.IntN(2) == 0 {
		s.lane, s.channel = LaneIncoming, "chat"
		mode = []int{0, 2}[rng.IntN(2)] // channels/incoming has no deferred
	}
	initial := mode != 2 && rng.IntN(3) == 0
	c := map[string]any{"key": key}
	if scope == 2 && s.lane != LaneIncoming {
		c["channelId"] = "chat"
	}
	switch mode {
	case 1:
		c["deferred"] = true
		if rng.IntN(2) == 0 {
			c["data"] = map[string]int{"n": *next}
		}
	case 2:
		c["retract"] = true
		if rng.IntN(3) == 0 {
			s.text = ""
		}
	}
	if initial {
		c["initial"] = true
	}
	b, _ := json.Marshal(c)
	s.coalesce = string(b)
	return s
}

func checkInvariants(t *testing.T, h *harness, step int, history map[Subject]History) {
	t.Helper()
	replaceable := map[Subject][]string{}
	placeholders := map[string]bool{}
	for _, r := range h.rows {
		if r.removed {
			continue
		}
		if r.replaceable && !r.consumed {
			replaceable[r.subject] = append(replaceable[r.subject], r.id)
		}
		if r.kind == rowPlaceholder {
			placeholders[rowKey(r.binding, r.id)] = true
		}
	}
	tracked := map[Subject]bool{}
	batches := map[string]bool{}
	for _, key := range append(h.tab.Subjects("A"), h.tab.Subjects("B")...) {
		s, _ := h.tab.Inspect(key)
		tracked[s.Subject] = true
		var want []string
		if s.Occupant != "" {
			want = []string{s.Occupant}
		}
		if got := replaceable[s.Subject]; !slices.Equal(got, want) {
			t.Fatalf("step %d: %v has replaceable unread %v, the table's occupant %v", step, s.Subject, got, want)
		}
		if prev, ok := history[s.Subject]; ok && prev != HistoryNone && s.History == HistoryNone {
			t.Fatalf("step %d: %v history went from %v to none", step, s.Subject, prev)
		}
		history[s.Subject] = s.History
		for _, b := range []*BatchState{s.Rendering, s.Pending} {
			if b != nil {
				batches[rowKey(s.Subject.Binding, b.EventID)] = true
			}
		}
	}
	for s, ids := range replaceable {
		if !tracked[s] {
			t.Fatalf("step %d: untracked %v has replaceable rows %v", step, s, ids)
		}
	}
	for s := range history {
		if !tracked[s] {
			delete(history, s) // untracked: unknown, and may restart at none from initial
		}
	}
	if !maps.Equal(placeholders, batches) {
		t.Fatalf("step %d: placeholders %v, the table's batches %v", step, placeholders, batches)
	}
}
