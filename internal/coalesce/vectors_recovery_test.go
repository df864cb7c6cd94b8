package coalesce

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
)

// restart stands for a host restart: the table's state goes through JSON
// (its durable form), is imported into a new table and recovered; the
// rows (the store's content) survive. Without history, the subjects are
// lost and only the receipts survive.
func (h *harness) restart(mode RecoveryMode, withHistory bool, opts Options) Recovery {
	h.t.Helper()
	b, err := json.Marshal(h.tab.Export())
	if err != nil {
		h.t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		h.t.Fatal(err)
	}
	if !withHistory {
		st.Subjects = nil
	}
	tab, err := Import(st, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.tab = tab
	rec := tab.Recover(mode)
	for _, s := range rec.Sealed {
		if r := h.live[rowKey(s.Subject.Binding, s.EventID)]; r == nil || r.kind != rowContent {
			h.t.Fatalf("sealed %q, which is not a content row", s.EventID)
		} else {
			r.replaceable = false
		}
	}
	for _, d := range rec.Fallbacks {
		h.decide(d, "")
	}
	return rec
}

// RFC-006 §14 recovery and capacity: 7, 31, 34c, 40, 47, 48.
func TestVectorsRecovery(t *testing.T) {
	t.Run("vector-7", func(t *testing.T) {
		h := newHarness(t, Options{})
		first := h.push("a", cInitial, "FIRST")
		rec := h.restart(RecoverConservative, true, Options{})
		if d := cmp.Diff([]Sealed{{Subject: doc, EventID: "a"}}, rec.Sealed); d != "" || len(rec.Fallbacks) != 0 {
			t.Errorf("recovery %+v %s", rec, d)
		}
		res := h.push("b", cPlain, "SECOND")
		outcome(t, res, protocol.CoalesceAppended)
		if len(res.Removed) != 0 {
			t.Errorf("the sealed occurrence was removed: %+v", res.Removed)
		}
		if again := h.push("a", cInitial, "FIRST"); !again.Duplicate || again.Reply != first.Reply {
			t.Errorf("retry after restart %+v", again)
		}
		order(t, h.assemble(nil), "FIRST", "SECOND")
	})

	t.Run("vector-31", func(t *testing.T) {
		for _, read := range []bool{true, false} {
			t.Run(fmt.Sprintf("read=%v", read), func(t *testing.T) {
				h := newHarness(t, Options{})
				h.push("a", cInitial, "FIRST")
				if read {
					h.assemble(nil)
				}
				h.restart(RecoverConservative, false, Options{})
				res := h.push("z", cRetract, "DELETED")
				outcome(t, res, protocol.CoalesceNoted)
				includes(t, h.assemble(nil), "FIRST", "DELETED")
			})
		}
	})

	t.Run("vector-34c", func(t *testing.T) {
		h := newHarness(t, Options{MaxSubjects: 2})
		h.push("x1", `{"key":"x1","initial":true}`, "FILL_1")
		h.push("x2", `{"key":"x2","initial":true}`, "FILL_2")
		chat := h.incoming("chat", "a", cInitial, "FIRST")
		outcome(t, chat, protocol.CoalesceAppended)
		if !chat.Degraded || chat.Deliver != DeliverOrdinary {
			t.Errorf("create at capacity %+v", chat)
		}
		del := h.push("untracked", `{"key":"untracked","retract":true}`, "CAPACITY_NOTICE")
		outcome(t, del, protocol.CoalesceNoted)
		pure := h.push("untracked2", `{"key":"untracked","retract":true}`, "")
		outcome(t, pure, protocol.CoalesceConsumed)
		def := h.push("n", `{"key":"deferred-new","deferred":true}`, "CAPACITY_FALLBACK")
		outcome(t, def, protocol.CoalesceAppended)
		if !def.Degraded || def.Deliver != DeliverOrdinary {
			t.Errorf("notice at capacity %+v", def)
		}
		includes(t, h.assemble(nil), "FIRST", "CAPACITY_NOTICE", "CAPACITY_FALLBACK")
		if len(h.renders) != 0 || len(h.tab.Subjects("editor")) != 2 {
			t.Errorf("%d renders, subjects %v", len(h.renders), h.tab.Subjects("editor"))
		}
		// A retry of a degraded occurrence is still recognised.
		if again := h.incoming("chat", "a", cInitial, "FIRST"); !again.Duplicate || again.Reply != chat.Reply {
			t.Errorf("retry of a degraded occurrence %+v", again)
		}
	})

	// Below the hard case: idle subjects (nothing unconsumed) give way to
	// new ones, oldest idle first, and only their history is lost.
	t.Run("vector-34c/idle-subjects-give-way", func(t *testing.T) {
		h := newHarness(t, Options{MaxSubjects: 2})
		h.push("x1", `{"key":"x1","initial":true}`, "FILL_1")
		h.push("x2", `{"key":"x2","initial":true}`, "FILL_2")
		h.assemble(nil) // both idle now, x1 first
		res := h.push("a", cInitial, "FIRST")
		outcome(t, res, protocol.CoalesceFirst)
		x1 := Subject{Binding: "editor", Scope: ScopeFeatureSet, ScopeID: "doc", Key: "x1"}
		if res.Degraded || res.Evicted == nil || *res.Evicted != x1 {
			t.Errorf("admission %+v", res)
		}
		// x1 is untracked now: its retraction is noted, as unknown.
		outcome(t, h.push("z", `{"key":"x1","retract":true}`, "GONE"), protocol.CoalesceNoted)
	})

	t.Run("vector-40/restart", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		h.restart(RecoverConservative, true, Options{})
		outcome(t, h.push("b", cPlain, "SECOND"), protocol.CoalesceAppended)
		order(t, h.assemble(nil), "FIRST", "SECOND")
	})

	t.Run("vector-40/restart-preserving", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		rec := h.restart(RecoverPreserving, true, Options{})
		if len(rec.Sealed)+len(rec.Fallbacks) != 0 {
			t.Errorf("preserving recovery %+v", rec)
		}
		outcome(t, h.push("b", cPlain, "SECOND"), protocol.CoalesceReplaced)
		req := h.assemble(nil)
		if d := cmp.Diff([]string{"SECOND"}, req); d != "" {
			t.Error(d)
		}
	})

	t.Run("vector-40/kill-pending-deferred", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", `{"key":"K","deferred":true,"data":{"private":"PRIVATE_RECOVERY"}}`, "RECOVERED_FALLBACK")
		rec := h.restart(RecoverConservative, true, Options{})
		if len(rec.Fallbacks) != 1 || rec.Fallbacks[0].EventID != "n1" || rec.Fallbacks[0].Cause != CauseRecovered || rec.Fallbacks[0].Occupant {
			t.Errorf("recovery %+v", rec)
		}
		req := h.assemble(nil)
		if count(req, "RECOVERED_FALLBACK") != 1 || len(h.renders) != 0 {
			t.Errorf("request %q, %d renders", req, len(h.renders))
		}
		excludes(t, h.allRequests(), "PRIVATE_RECOVERY")
	})

	t.Run("vector-40/kill-pending-deferred-preserving", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", `{"key":"K","deferred":true,"data":{"private":"PRIVATE_RECOVERY"}}`, "RECOVERED_FALLBACK")
		h.restart(RecoverPreserving, true, Options{})
		req := h.assemble(rendered("RECOVERED_RENDER"))
		if count(req, "RECOVERED_RENDER") != 1 || count(req, "RECOVERED_FALLBACK") != 0 || len(h.renders) != 1 {
			t.Errorf("request %q, %d renders", req, len(h.renders))
		}
		if string(h.renders[0].Params.Notices[0].Data) != `{"private":"PRIVATE_RECOVERY"}` {
			t.Errorf("data after restart %s", h.renders[0].Params.Notices[0].Data)
		}
	})

	t.Run("vector-40/kill-rendering-deferred", func(t *testing.T) {
		for _, mode := range []RecoveryMode{RecoverConservative, RecoverPreserving} {
			t.Run(fmt.Sprint(mode), func(t *testing.T) {
				h := newHarness(t, Options{})
				h.push("n1", `{"key":"K","deferred":true,"data":{"private":"PRIVATE_INTERRUPTED"}}`, "INTERRUPTED_FALLBACK")
				r := h.start(doc)
				rec := h.restart(mode, true, Options{})
				if len(rec.Fallbacks) != 1 || rec.Fallbacks[0].RenderID != r.ID {
					t.Fatalf("recovery %+v", rec)
				}
				if d := h.tab.Finish(r.ID, Rendered); !d.Discarded {
					t.Errorf("the interrupted render's result %+v", d)
				}
				req := h.assemble(nil)
				if len(h.renders) != 1 || count(req, "INTERRUPTED_FALLBACK") != 1 {
					t.Errorf("request %q, %d renders", req, len(h.renders))
				}
				excludes(t, h.allRequests(), "PRIVATE_INTERRUPTED")
				// A second restart does not fall back again.
				if rec := h.restart(mode, true, Options{}); len(rec.Fallbacks) != 0 {
					t.Errorf("second recovery %+v", rec)
				}
			})
		}
	})

	t.Run("vector-47", func(t *testing.T) {
		h := newHarness(t, Options{})
		first := h.push("a", cInitial, "FIRST")
		h.restart(RecoverConservative, true, Options{})
		h.now = h.now.Add(30 * time.Minute)
		if again := h.push("a", cInitial, "FIRST"); !again.Duplicate || again.Reply != first.Reply {
			t.Errorf("retry %+v", again)
		}
		if count(h.assemble(nil), "FIRST") != 1 {
			t.Errorf("requests %q", h.requests)
		}
	})

	t.Run("vector-48", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.window = 7200000
		first := h.push("a", cInitial, "FIRST")
		h.assemble(nil) // read, so only the window keeps its receipt
		h.window = 3600000
		h.restart(RecoverConservative, true, Options{})
		h.now = h.now.Add(90 * time.Minute)
		if h.tab.Expire(h.now) != 0 {
			t.Error("Expire dropped a receipt inside its window")
		}
		if again := h.push("a", cInitial, "FIRST"); !again.Duplicate || again.Reply != first.Reply {
			t.Errorf("retry at 90 minutes %+v", again)
		}
		if count(h.assemble(nil), "FIRST") != 1 {
			t.Errorf("requests %q", h.requests)
		}
	})
}

// Windows: measured from first admission, never below an hour, honoured
// as advertised at admission, outlived while the occurrence is held.
func TestReceiptWindow(t *testing.T) {
	start := time.UnixMilli(1_800_000_000_000)
	for _, tc := range []struct {
		name     string
		windowMs int64
		read     bool
		after    time.Duration
		dup      bool
	}{
		{"default window, just inside", 0, true, time.Hour - time.Millisecond, true},
		{"default window, at its last millisecond", 0, true, time.Hour, true},
		{"default window, after it", 0, true, time.Hour + time.Millisecond, false},
		{"a shorter window counts as the default", 1000, true, 59 * time.Minute, true},
		{"two hours, at 119 minutes", 7200000, true, 119 * time.Minute, true},
		{"two hours, after", 7200000, true, 2*time.Hour + time.Millisecond, false},
		{"unread occupant outlives its window", 0, false, 5 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.now = start
			h.window = tc.windowMs
			first := h.push("a", cInitial, "FIRST")
			if tc.read {
				h.assemble(nil)
			}
			h.now = start.Add(tc.after)
			h.window = 0
			if got, ok := h.tab.Receipt(h.now, "editor", "a"); ok != tc.dup || (ok && got != first.Reply) {
				t.Fatalf("Receipt = %+v %v, want %v", got, ok, tc.dup)
			}
			expired := h.tab.Expire(h.now)
			if (expired == 1) == tc.dup {
				t.Errorf("Expire dropped %d", expired)
			}
			spec, _ := Parse(json.RawMessage(cPlain), LanePush, "a", h.adv)
			res, err := h.tab.Admit(h.now, Admission{Binding: "editor", Lane: LanePush, FeatureSet: "doc", EventID: "a", Spec: spec})
			if err != nil || res.Duplicate != tc.dup {
				t.Errorf("retry: %+v %v, want duplicate %v", res, err, tc.dup)
			}
		})
	}
}
