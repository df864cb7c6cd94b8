package coalesce

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
)

const ts = "2026-01-01T00:00:00Z"

func rendered(text string) *renderPlan { return &renderPlan{out: Rendered, text: text} }

// RFC-006 §14, deferred (16–25, 27a–27j) and the shared render baseline
// (49), at the core: StartRender where the host would send push/render,
// Finish where its completion (or timeout) comes back.
func TestVectorsDeferred(t *testing.T) {
	t.Run("vector-16", func(t *testing.T) {
		h := newHarness(t, Options{})
		outcome(t, h.push("n1", cDeferred, "FALLBACK"), protocol.CoalesceFirst)
		for _, prior := range []string{"n1", "n2"} {
			id := map[string]string{"n1": "n2", "n2": "n3"}[prior]
			res := h.push(id, cDeferred, "FALLBACK")
			outcome(t, res, protocol.CoalesceReplaced)
			if res.Reply.PriorEventID != prior || res.Deliver != DeliverBatch {
				t.Errorf("%s: %+v", id, res)
			}
		}
		req := h.assemble(rendered("RENDERED"))
		if len(h.renders) != 1 {
			t.Fatalf("%d renders", len(h.renders))
		}
		want := protocol.PushRenderParams{FeatureSet: "doc", Key: "K", EventID: "n3", Dropped: 0,
			Notices: []protocol.Notice{{EventID: "n1", Timestamp: ts}, {EventID: "n2", Timestamp: ts}, {EventID: "n3", Timestamp: ts}}}
		if d := cmp.Diff(want, h.renders[0].Params); d != "" {
			t.Error(d)
		}
		if count(req, "RENDERED") != 1 {
			t.Errorf("request %q", req)
		}
		excludes(t, h.allRequests(), "FALLBACK")
	})

	t.Run("vector-17", func(t *testing.T) {
		h := newHarness(t, Options{})
		for i := range 100 {
			h.push(fmt.Sprintf("n%d", i), fmt.Sprintf(`{"key":"K","deferred":true,"data":{"private": "PRIVATE_%d"}}`, i), "FALLBACK")
		}
		h.assemble(rendered("RENDERED"))
		p := h.renders[0].Params
		if len(p.Notices) != 64 || p.Dropped != 36 || len(p.Notices)+p.Dropped != 100 {
			t.Fatalf("%d notices, %d dropped", len(p.Notices), p.Dropped)
		}
		for i, n := range p.Notices {
			want := protocol.Notice{EventID: fmt.Sprintf("n%d", i+36), Timestamp: ts,
				Data: json.RawMessage(fmt.Sprintf(`{"private":"PRIVATE_%d"}`, i+36))} // the value sent, compact
			if d := cmp.Diff(want, n); d != "" {
				t.Fatalf("notice %d: %s", i, d)
			}
		}
		excludes(t, h.allRequests(), "PRIVATE_")
	})

	t.Run("vector-18", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		first := h.assemble(rendered("RENDERED"))
		second := h.assemble(nil) // no render may be asked for
		if len(h.renders) != 1 || count(second, "RENDERED") != 1 || !cmp.Equal(first, second) {
			t.Errorf("renders %d, requests %q then %q", len(h.renders), first, second)
		}
	})

	t.Run("vector-19", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		h.assemble(rendered("RENDER_ONE"))
		outcome(t, h.push("n2", cDeferred, "FALLBACK_TWO"), protocol.CoalesceFirst)
		req := h.assemble(rendered("RENDER_TWO"))
		if len(h.renders) != 2 {
			t.Errorf("%d renders", len(h.renders))
		}
		order(t, req, "RENDER_ONE", "RENDER_TWO")
	})

	t.Run("vector-20", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		h.assemble(&renderPlan{out: RenderEmpty})
		h.assemble(nil)
		if len(h.renders) != 1 {
			t.Errorf("%d renders", len(h.renders))
		}
		excludes(t, h.allRequests(), "RENDERED", "FALLBACK")
		if st, _ := h.tab.Inspect(doc); st.Pending != nil || st.Rendering != nil || st.Occupant != "" {
			t.Errorf("batch not closed: %+v", st)
		}
	})

	t.Run("vector-21/rpc-error", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		includes(t, h.assemble(&renderPlan{out: RenderFailed}), "FALLBACK")
	})

	t.Run("vector-21/timeout", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		r := h.start(doc)
		d := h.finish(r.ID, RenderFailed, "") // the host's timeout
		if d.Materialize != MaterializeFallback || d.Cause != CauseFailed {
			t.Errorf("timeout decided %+v", d)
		}
		includes(t, h.assemble(nil), "FALLBACK")
		if late := h.finish(r.ID, Rendered, "TOO_LATE"); !late.Discarded || late.Cause != CauseLate {
			t.Errorf("late result %+v", late)
		}
		excludes(t, h.context(), "TOO_LATE")
	})

	t.Run("vector-21/disconnected", func(t *testing.T) {
		h := newHarness(t, Options{})
		admitted := h.push("n1", cDeferred, "FALLBACK")
		d, ok := h.tab.Fallback(doc) // the server is gone at assembly
		if !ok || d.Materialize != MaterializeFallback || d.Cause != CauseUnrendered {
			t.Fatalf("fallback %+v %v", d, ok)
		}
		h.decide(d, "")
		if again := h.push("n1", cDeferred, "FALLBACK"); !again.Duplicate || again.Reply != admitted.Reply {
			t.Errorf("retry after reconnect %+v", again)
		}
		if req := h.assemble(nil); count(req, "FALLBACK") != 1 || len(h.renders) != 0 {
			t.Errorf("request %q, %d renders", req, len(h.renders))
		}
	})

	t.Run("vector-22", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK_ONE")
		r1 := h.start(doc)
		outcome(t, h.push("n2", cDeferred, "FALLBACK_TWO"), protocol.CoalesceFirst)
		if r1.Params.EventID != "n1" || len(r1.Params.Notices) != 1 {
			t.Errorf("first render %+v", r1.Params)
		}
		if _, ok := h.tab.StartRender(doc); ok {
			t.Error("a second render of the subject started while the first is open")
		}
		h.finish(r1.ID, Rendered, "RENDER_ONE")
		req := h.assemble(rendered("RENDER_TWO"))
		if len(h.renders) != 2 {
			t.Fatalf("%d renders", len(h.renders))
		}
		if d := cmp.Diff([]protocol.Notice{{EventID: "n2", Timestamp: ts}}, h.renders[1].Params.Notices); d != "" {
			t.Error(d)
		}
		includes(t, req, "RENDER_ONE", "RENDER_TWO")
	})

	t.Run("vector-23", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		r := h.start(doc)
		if d := h.finish(r.ID, RenderFailed, ""); !d.Occupant {
			t.Errorf("fallback not the unread occupant: %+v", d)
		}
		if late := h.finish(r.ID, Rendered, "TOO_LATE"); !late.Discarded {
			t.Errorf("late result %+v", late)
		}
		includes(t, h.assemble(nil), "FALLBACK")
		excludes(t, h.allRequests(), "TOO_LATE")
	})

	t.Run("vector-23/supporting-after-consumption", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		r := h.start(doc)
		h.finish(r.ID, RenderFailed, "")
		h.assemble(nil)
		if late := h.finish(r.ID, Rendered, "TOO_LATE"); !late.Discarded {
			t.Errorf("late result %+v", late)
		}
		includes(t, h.assemble(nil), "FALLBACK")
		excludes(t, h.allRequests(), "TOO_LATE")
	})

	t.Run("vector-24/during-render", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", `{"key":"K","deferred":true,"channelId":"chat"}`, "FALLBACK")
		r := h.start(Subject{Binding: "editor", Scope: ScopeChannel, ScopeID: "chat", Key: "K"})
		if r.Params.ChannelID != "chat" || r.Params.FeatureSet != "doc" {
			t.Errorf("channel-scoped params %+v", r.Params)
		}
		d := h.finish(r.ID, RenderLapsed, "REVOKED_RENDER")
		if d.Materialize != MaterializeNothing || d.Cause != CauseLapsed {
			t.Errorf("lapsed decided %+v", d)
		}
		excludes(t, h.context(), "FALLBACK", "REVOKED_RENDER")
	})

	t.Run("vector-24/before-assembly", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		d, ok := h.tab.Lapse(doc)
		if !ok || d.Materialize != MaterializeNothing || d.EventID != "n1" {
			t.Fatalf("lapse %+v %v", d, ok)
		}
		h.decide(d, "")
		h.assemble(nil)
		if len(h.renders) != 0 {
			t.Errorf("%d renders", len(h.renders))
		}
		excludes(t, h.allRequests(), "FALLBACK")
	})

	// Shared consumption: one render serves every context, and the
	// first consumption by any seals it for all.
	t.Run("vector-25", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		r := h.start(doc)
		if _, ok := h.tab.StartRender(doc); ok {
			t.Error("a second context started a second render")
		}
		h.finish(r.ID, Rendered, "RENDERED")
		if n := h.tab.Consume("editor", "n1"); n != 1 {
			t.Errorf("consumed %d", n)
		}
		if n := h.tab.Consume("editor", "n1"); n != 0 {
			t.Errorf("the second context consumed again: %d", n)
		}
		if _, ok := h.tab.StartRender(doc); ok || len(h.renders) != 1 {
			t.Error("rendered again")
		}
	})

	t.Run("vector-27a", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDefInit, "FALLBACK")
		r := h.start(doc)
		res := h.push("z", cRetract, "DELETED")
		outcome(t, res, protocol.CoalesceRetracted)
		if len(res.Removed) != 1 || res.Removed[0].Reason != RemovedCancelled || res.Removed[0].RenderID != r.ID {
			t.Errorf("retraction removed %+v", res.Removed)
		}
		if d := h.finish(r.ID, Rendered, "LATE_RENDER"); !d.Discarded || d.Cause != CauseCancelled {
			t.Errorf("late result %+v", d)
		}
		h.assemble(nil)
		excludes(t, h.allRequests(), "LATE_RENDER", "FALLBACK", "DELETED")
	})

	t.Run("vector-27b", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDefInit, "FALLBACK")
		r := h.start(doc)
		outcome(t, h.push("z", cRetract, "DELETED"), protocol.CoalesceRetracted)
		if d := h.finish(r.ID, RenderFailed, ""); !d.Discarded || d.Materialize != MaterializeNothing {
			t.Errorf("timeout %+v", d)
		}
		h.assemble(nil)
		excludes(t, h.allRequests(), "LATE_RENDER", "FALLBACK", "DELETED")
	})

	for _, v := range []struct {
		name string
		out  RenderOutcome
	}{{"vector-27c", Rendered}, {"vector-27d", RenderFailed}} {
		t.Run(v.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.push("n1", cDefInit, "FALLBACK")
			r := h.start(doc)
			res := h.push("p", cPlain, "PLAIN_NEW")
			outcome(t, res, protocol.CoalesceReplaced)
			if res.Reply.PriorEventID != "n1" || res.Removed[0].Reason != RemovedCancelled {
				t.Errorf("plain effects %+v", res)
			}
			if d := h.finish(r.ID, v.out, "LATE_RENDER"); !d.Discarded {
				t.Errorf("completion %+v", d)
			}
			includes(t, h.assemble(nil), "PLAIN_NEW")
			excludes(t, h.allRequests(), "LATE_RENDER", "FALLBACK", "DELETED")
		})
	}

	t.Run("vector-27e/before-consumption", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDefInit, "FALLBACK")
		r := h.start(doc)
		h.finish(r.ID, Rendered, "RENDERED") // materialized, not consumed
		res := h.push("z", cRetract, "DELETED")
		outcome(t, res, protocol.CoalesceRetracted)
		if len(res.Removed) != 1 || res.Removed[0].EventID != "n1" || res.Removed[0].Reason != RemovedWithdrawn {
			t.Errorf("retraction removed %+v", res.Removed)
		}
		h.assemble(nil)
		excludes(t, h.allRequests(), "RENDERED", "FALLBACK", "DELETED")
	})

	t.Run("vector-27e/after-consumption", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDefInit, "FALLBACK")
		h.assemble(rendered("RENDERED"))
		res := h.push("z", cRetract, "DELETED")
		outcome(t, res, protocol.CoalesceNoted)
		if len(res.Removed) != 0 || res.Reply.PriorEventID != "n1" {
			t.Errorf("retraction %+v", res)
		}
		includes(t, h.assemble(nil), "RENDERED", "DELETED")
	})

	t.Run("vector-27f", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDefInit, "FALLBACK_ONE")
		r := h.start(doc)
		outcome(t, h.push("n2", cDeferred, "FALLBACK_TWO"), protocol.CoalesceFirst)
		res := h.push("z", cRetract, "DELETED")
		outcome(t, res, protocol.CoalesceRetracted)
		if len(res.Removed) != 2 || res.Removed[0].Reason != RemovedCancelled || res.Removed[1].EventID != "n2" {
			t.Errorf("retraction removed %+v", res.Removed)
		}
		if d := h.finish(r.ID, Rendered, "LATE_RENDER"); !d.Discarded {
			t.Errorf("late result %+v", d)
		}
		h.assemble(nil)
		if len(h.renders) != 1 {
			t.Errorf("%d renders", len(h.renders))
		}
		excludes(t, h.allRequests(), "LATE_RENDER", "FALLBACK_ONE", "FALLBACK_TWO", "DELETED")
	})

	for _, v := range []struct {
		name string
		out  RenderOutcome
	}{{"vector-27g", Rendered}, {"vector-27h", RenderFailed}} {
		t.Run(v.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.push("n1", cDefInit, "FALLBACK_ONE")
			r := h.start(doc)
			h.push("n2", cDeferred, "FALLBACK_TWO")
			res := h.push("p", cPlain, "PLAIN_NEW")
			outcome(t, res, protocol.CoalesceReplaced)
			if res.Reply.PriorEventID != "n2" || len(res.Removed) != 2 {
				t.Errorf("plain effects %+v", res)
			}
			if d := h.finish(r.ID, v.out, "LATE_RENDER"); !d.Discarded {
				t.Errorf("completion %+v", d)
			}
			includes(t, h.assemble(nil), "PLAIN_NEW")
			if len(h.renders) != 1 {
				t.Errorf("%d renders", len(h.renders))
			}
			excludes(t, h.allRequests(), "LATE_RENDER", "FALLBACK_ONE", "FALLBACK_TWO", "DELETED")
		})
	}

	t.Run("vector-27i", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		res := h.push("n1", cDeferred, "FALLBACK")
		outcome(t, res, protocol.CoalesceReplaced)
		if res.Reply.PriorEventID != "a" || !res.Narrow || res.Removed[0].Reason != RemovedReplaced {
			t.Errorf("notice effects %+v", res)
		}
		includes(t, h.assemble(rendered("RENDERED")), "RENDERED")
		excludes(t, h.allRequests(), "FIRST", "FALLBACK")
	})

	t.Run("vector-27i/consumed-first", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		h.assemble(nil)
		outcome(t, h.push("n1", cDeferred, "FALLBACK"), protocol.CoalesceFirst)
		order(t, h.assemble(rendered("RENDERED")), "FIRST", "RENDERED")
	})

	t.Run("vector-27j", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK_ONE")
		r := h.start(doc)
		h.push("n2", cDeferred, "FALLBACK_TWO")
		h.push("p", cPlain, "PLAIN_NEW")
		res := h.push("n3", cDeferred, "FALLBACK_THREE")
		outcome(t, res, protocol.CoalesceReplaced)
		if res.Reply.PriorEventID != "p" {
			t.Errorf("n3 effects %+v", res)
		}
		if d := h.finish(r.ID, Rendered, "LATE_RENDER"); !d.Discarded {
			t.Errorf("late result %+v", d)
		}
		if st, _ := h.tab.Inspect(doc); st.Pending == nil || st.Pending.EventID != "n3" {
			t.Fatalf("n3's batch lost: %+v", st)
		}
		req := h.assemble(rendered("RENDER_THREE"))
		if len(h.renders) != 2 || h.renders[1].Params.EventID != "n3" || len(h.renders[1].Params.Notices) != 1 {
			t.Errorf("renders %+v", h.renders)
		}
		includes(t, req, "RENDER_THREE")
		excludes(t, h.allRequests(), "LATE_RENDER", "FALLBACK_ONE", "FALLBACK_TWO", "PLAIN_NEW")
	})

	// A consumed baseline stays history, and the next delta appends after
	// it.
	t.Run("vector-49", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDeferred, "FALLBACK")
		h.assemble(rendered("BASELINE_ONE"))
		outcome(t, h.push("n2", cDeferred, "FALLBACK"), protocol.CoalesceFirst)
		order(t, h.assemble(rendered("DELTA_TWO")), "BASELINE_ONE", "DELTA_TWO")
	})

	// The same with the baseline still unread where the next notice
	// arrives: the notice does not displace it, and when the next delta
	// materializes the baseline is sealed as ordinary, not dropped.
	t.Run("vector-49/baseline-unread", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("n1", cDefInit, "FALLBACK")
		r := h.start(doc)
		h.finish(r.ID, Rendered, "BASELINE_ONE")
		res := h.push("n2", cDeferred, "FALLBACK")
		outcome(t, res, protocol.CoalesceFirst)
		if len(res.Removed) != 0 {
			t.Errorf("the notice removed %+v", res.Removed)
		}
		r2 := h.start(doc)
		d := h.finish(r2.ID, Rendered, "DELTA_TWO")
		if d := cmp.Diff([]string{"n1"}, d.Sealed); d != "" {
			t.Error(d)
		}
		order(t, h.assemble(nil), "BASELINE_ONE", "DELTA_TWO")
		if st, _ := h.tab.Inspect(doc); st.History != HistorySome {
			t.Errorf("history %v, want some: the sealed baseline counts as consumed", st.History)
		}
	})
}

// Completing a render the table never started, or twice, materializes
// nothing; Fallback and Lapse need a pending batch.
func TestRenderEdges(t *testing.T) {
	h := newHarness(t, Options{})
	if d := h.tab.Finish(99, Rendered); !d.Discarded || d.Cause != CauseUnknown {
		t.Errorf("unknown render %+v", d)
	}
	if _, ok := h.tab.StartRender(doc); ok {
		t.Error("render without a batch")
	}
	if _, ok := h.tab.Fallback(doc); ok {
		t.Error("fallback without a batch")
	}
	if _, ok := h.tab.Lapse(doc); ok {
		t.Error("lapse without a batch")
	}
	h.push("n1", cDeferred, "FALLBACK")
	r := h.start(doc)
	if _, ok := h.tab.Fallback(doc); ok {
		t.Error("Fallback of a rendering batch")
	}
	if got := h.tab.Batches("editor"); len(got) != 1 || got[0].RenderID != r.ID || got[0].EventID != "n1" {
		t.Errorf("batches %+v", got)
	}
	h.finish(r.ID, RenderEmpty, "")
	if d := h.tab.Finish(r.ID, Rendered); !d.Discarded || d.Cause != CauseLate {
		t.Errorf("second completion %+v", d)
	}
	// Closed renders are remembered within their bound only, and are then
	// still discarded.
	small := newHarness(t, Options{ClosedRenders: 1})
	small.push("n1", cDeferred, "F")
	r1 := small.start(doc)
	small.finish(r1.ID, RenderEmpty, "")
	small.push("n2", cDeferred, "F")
	r2 := small.start(doc)
	small.finish(r2.ID, RenderEmpty, "")
	if d := small.tab.Finish(r1.ID, Rendered); !d.Discarded || d.Cause != CauseUnknown {
		t.Errorf("forgotten render %+v", d)
	}
}
