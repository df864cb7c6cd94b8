package coalesce

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
)

// Coalesce members the vectors send.
const (
	cInitial  = `{"key":"K","initial":true}`
	cPlain    = `{"key":"K"}`
	cDeferred = `{"key":"K","deferred":true}`
	cDefInit  = `{"key":"K","deferred":true,"initial":true}`
	cRetract  = `{"key":"K","retract":true}`
	cChanEdit = `{"key":"K","channelId":"chat"}`
	cChanDel  = `{"key":"K","retract":true,"channelId":"chat"}`
)

// RFC-006 §14, plain, identity and scope, and retraction, driven at the
// core the way the host will drive it.
func TestVectorsPlain(t *testing.T) {
	t.Run("vector-1", func(t *testing.T) {
		h := newHarness(t, Options{})
		outcome(t, h.push("a", cInitial, "FIRST"), protocol.CoalesceFirst)
		includes(t, h.assemble(nil), "FIRST")
	})

	t.Run("vector-1a", func(t *testing.T) {
		h := newHarness(t, Options{})
		res := h.push("a", cPlain, "FIRST")
		outcome(t, res, protocol.CoalesceAppended)
		if res.Reply.PriorEventID != "" {
			t.Errorf("a prior %q for a subject never seen", res.Reply.PriorEventID)
		}
		includes(t, h.assemble(nil), "FIRST")
	})

	t.Run("vector-2", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		res := h.push("b", cPlain, "SECOND")
		outcome(t, res, protocol.CoalesceReplaced)
		if res.Reply.PriorEventID != "a" || !res.Narrow || len(res.Removed) != 1 || !cmp.Equal(res.Removed[0], Removal{EventID: "a", Reason: RemovedReplaced}) {
			t.Errorf("replacement effects %+v", res)
		}
		includes(t, h.assemble(nil), "SECOND")
		excludes(t, h.allRequests(), "FIRST")
	})

	// 3, 4 and 5 are one case for the core: a request of any kind (agent
	// inference, one that fails after assembly, a compression) consumes
	// what it assembled, and the caller calls Consume at assembly.
	for _, v := range []string{"vector-3", "vector-4", "vector-5"} {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.push("a", cInitial, "FIRST")
			h.assemble(nil)
			res := h.push("b", cPlain, "SECOND")
			outcome(t, res, protocol.CoalesceAppended)
			if res.Reply.PriorEventID != "a" || len(res.Removed) != 0 {
				t.Errorf("append effects %+v", res)
			}
			order(t, h.assemble(nil), "FIRST", "SECOND")
		})
	}

	t.Run("vector-6", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		prior := "a"
		for i, id := range []string{"1", "2", "3"} {
			res := h.push(id, cPlain, "EDIT_"+id)
			outcome(t, res, protocol.CoalesceReplaced)
			if res.Reply.PriorEventID != prior {
				t.Errorf("edit %d: prior %q, want %q", i+1, res.Reply.PriorEventID, prior)
			}
			prior = id
		}
		req := h.assemble(nil)
		if d := cmp.Diff([]string{"EDIT_3"}, req); d != "" {
			t.Error(d)
		}
	})

	t.Run("vector-8", func(t *testing.T) {
		h := newHarness(t, Options{})
		first := h.incoming("chat", "a", cInitial, "FIRST")
		outcome(t, first, protocol.CoalesceFirst)
		outcome(t, h.incoming("chat", "b", cPlain, "EDIT"), protocol.CoalesceReplaced)
		again := h.incoming("chat", "a", cInitial, "FIRST")
		if !again.Duplicate || again.Reply != first.Reply {
			t.Errorf("retry of a: %+v, want the duplicate of %+v", again, first.Reply)
		}
		req := h.assemble(nil)
		if count(req, "EDIT") != 1 {
			t.Errorf("EDIT %d times in %q", count(req, "EDIT"), req)
		}
		excludes(t, h.allRequests(), "FIRST")
	})

	t.Run("vector-9", func(t *testing.T) {
		h := newHarness(t, Options{})
		for _, s := range []send{
			{binding: "editor", id: "a", coalesce: cInitial, text: "SERVER_A"},
			{binding: "other", id: "a", coalesce: cInitial, text: "SERVER_B"},
			{fs: "other", id: "otherfs", coalesce: cInitial, text: "OTHER_FEATURE"},
			{lane: LaneIncoming, channel: "chat", id: "c", coalesce: cInitial, text: "CHANNEL_A"},
			{lane: LaneIncoming, channel: "otherchat", id: "d", coalesce: cInitial, text: "CHANNEL_B"},
			{id: "e", coalesce: `{"key":"K","channelId":"doc","initial":true}`, text: "CHANNEL_NAMED_LIKE_FS"},
		} {
			outcome(t, h.admit(s), protocol.CoalesceFirst)
		}
		res := h.push("edit", cPlain, "SERVER_A_NEW")
		outcome(t, res, protocol.CoalesceReplaced)
		if res.Reply.PriorEventID != "a" || len(res.Removed) != 1 {
			t.Errorf("edit effects %+v", res)
		}
		req := h.assemble(nil)
		includes(t, req, "SERVER_A_NEW", "SERVER_B", "OTHER_FEATURE", "CHANNEL_A", "CHANNEL_B", "CHANNEL_NAMED_LIKE_FS")
		if count(h.allRequests(), "SERVER_A") != 0 {
			t.Errorf("SERVER_A reached a request: %q", req)
		}
	})

	t.Run("vector-10", func(t *testing.T) {
		h := newHarness(t, Options{})
		outcome(t, h.incoming("chat", "a", cInitial, "FIRST"), protocol.CoalesceFirst)
		outcome(t, h.push("b", cChanEdit, "EDIT"), protocol.CoalesceReplaced)
		res := h.push("z", cChanDel, "DELETED")
		outcome(t, res, protocol.CoalesceRetracted)
		if res.Deliver != DeliverNone || res.Reply.PriorEventID != "b" {
			t.Errorf("retraction effects %+v", res)
		}
		h.assemble(nil)
		excludes(t, h.allRequests(), "FIRST", "EDIT", "DELETED")
	})

	t.Run("vector-11", func(t *testing.T) {
		h := newHarness(t, Options{})
		outcome(t, h.push("a", `{"key":"K","channelId":"chat","initial":true}`, "FIRST"), protocol.CoalesceFirst)
		outcome(t, h.incoming("chat", "b", cPlain, "EDIT"), protocol.CoalesceReplaced)
		includes(t, h.assemble(nil), "EDIT")
		excludes(t, h.allRequests(), "FIRST")
	})

	// The audience is the caller's; the core says the edit replaces and
	// must stay within the create's contexts.
	t.Run("vector-12", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.incoming("chat", "a", cInitial, "FIRST")
		res := h.push("b", cChanEdit, "EDIT")
		outcome(t, res, protocol.CoalesceReplaced)
		if !res.Narrow || len(res.Removed) != 1 || res.Removed[0].EventID != "a" {
			t.Errorf("edit effects %+v", res)
		}
		includes(t, h.context(), "EDIT")
		excludes(t, h.context(), "FIRST")
	})

	// The channel authority check is the caller's and comes first; a
	// refused edit never reaches the table. A plan the caller drops (its
	// write failed, say) touches nothing either.
	t.Run("vector-13", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.incoming("chat", "a", cInitial, "FIRST")
		before := h.tab.Export()
		spec, _ := Parse(json.RawMessage(cChanDel), LanePush, "z", h.adv)
		if _, err := h.tab.Plan(h.now, Admission{Binding: "editor", Lane: LanePush, FeatureSet: "doc", EventID: "z", Spec: spec, HasNotice: true}); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(before, h.tab.Export()); d != "" {
			t.Errorf("a plan changed the table:\n%s", d)
		}
		includes(t, h.context(), "FIRST")
	})

	t.Run("vector-14", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.incoming("chat", "a", cInitial, "CHANNEL_FIRST")
		res := h.admit(send{id: "b", coalesce: cPlain, text: "FEATURE_ONLY", channel: "chat"}) // as if origin named chat
		outcome(t, res, protocol.CoalesceAppended)
		if res.Subject.Scope != ScopeFeatureSet || len(res.Removed) != 0 {
			t.Errorf("push effects %+v", res)
		}
		includes(t, h.assemble(nil), "CHANNEL_FIRST", "FEATURE_ONLY")
	})

	t.Run("vector-15", func(t *testing.T) {
		h := newHarness(t, Options{})
		adv := protocol.EventCoalescing{PushEvents: true}
		if _, inv := Parse(json.RawMessage(`{"key":"K","channelId":"chat"}`), LanePush, "a", adv); inv == nil || inv.Field != "coalesce.channelId" {
			t.Fatalf("unadvertised channelId: %v", inv)
		}
		if len(h.tab.Export().Subjects) != 0 {
			t.Error("a refused push touched the table")
		}
	})

	t.Run("vector-15a", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.incoming("chat", "a", cInitial, "FIRST")
		for _, id := range []string{"", ""} {
			if _, inv := Parse(json.RawMessage(cPlain), LaneIncoming, id, h.adv); inv == nil || inv.Field != "eventId" {
				t.Fatalf("coalesced message without eventId: %v", inv)
			}
		}
		outcome(t, h.incoming("chat", "sibling", `{"key":"sibling","initial":true}`, "VALID_SIBLING"), protocol.CoalesceFirst)
		outcome(t, h.incoming("chat", "b", cPlain, "EDIT"), protocol.CoalesceReplaced)
		includes(t, h.assemble(nil), "EDIT", "VALID_SIBLING")
		excludes(t, h.allRequests(), "FIRST", "INVALID")
	})

	t.Run("vector-28", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		h.push("edit", cPlain, "EDIT")
		res := h.push("z", cRetract, "DELETED")
		outcome(t, res, protocol.CoalesceRetracted)
		if res.Deliver != DeliverNone || len(res.Removed) != 1 || !cmp.Equal(res.Removed[0], Removal{EventID: "edit", Reason: RemovedWithdrawn}) {
			t.Errorf("retraction effects %+v", res)
		}
		h.assemble(nil)
		excludes(t, h.allRequests(), "FIRST", "EDIT", "DELETED")
	})

	t.Run("vector-29", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		h.assemble(nil)
		outcome(t, h.push("edit", cPlain, "EDIT"), protocol.CoalesceAppended)
		res := h.push("z", cRetract, "DELETED")
		outcome(t, res, protocol.CoalesceNoted)
		if res.Deliver != DeliverOrdinary || res.Reply.PriorEventID != "edit" || len(res.Removed) != 1 {
			t.Errorf("retraction effects %+v", res)
		}
		order(t, h.assemble(nil), "FIRST", "DELETED")
		excludes(t, h.allRequests(), "EDIT")
	})

	t.Run("vector-30", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		h.assemble(nil)
		res := h.push("z", cRetract, "")
		outcome(t, res, protocol.CoalesceConsumed)
		if res.Deliver != DeliverNone || res.Reply.PriorEventID != "a" {
			t.Errorf("withdrawal effects %+v", res)
		}
		req := h.assemble(nil)
		if count(req, "FIRST") != 1 || len(req) != 1 {
			t.Errorf("request %q", req)
		}
	})

	t.Run("vector-32", func(t *testing.T) {
		h := newHarness(t, Options{})
		res := h.push("z", cRetract, "DELETED")
		outcome(t, res, protocol.CoalesceNoted)
		if res.Deliver != DeliverOrdinary || res.Reply.PriorEventID != "" {
			t.Errorf("effects %+v", res)
		}
		includes(t, h.assemble(nil), "DELETED")
		if _, tracked := h.tab.Inspect(doc); tracked {
			t.Error("a retraction of an unknown subject started tracking it")
		}
	})

	t.Run("vector-33", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.incoming("chat", "a", cInitial, "FIRST")
		h.assemble(nil)
		res := h.push("z", cChanDel, "")
		outcome(t, res, protocol.CoalesceConsumed)
		if res.Deliver != DeliverNone {
			t.Errorf("effects %+v", res)
		}
		includes(t, h.assemble(nil), "FIRST")
		excludes(t, h.allRequests(), "DELETED")
	})

	t.Run("vector-34", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		h.assemble(nil)
		outcome(t, h.push("z", cRetract, "DELETED"), protocol.CoalesceNoted)
		outcome(t, h.push("b", cInitial, "NEW_CREATE"), protocol.CoalesceAppended)
		res := h.push("again", cRetract, "SECOND_NOTICE")
		outcome(t, res, protocol.CoalesceNoted)
		if len(res.Removed) != 1 || res.Removed[0].EventID != "b" {
			t.Errorf("second retraction removed %+v", res.Removed)
		}
		includes(t, h.assemble(nil), "FIRST", "DELETED", "SECOND_NOTICE")
		excludes(t, h.allRequests(), "NEW_CREATE")
		if st, _ := h.tab.Inspect(doc); st.History != HistorySome || st.Occupant != "" {
			t.Errorf("subject after: %+v", st)
		}
	})

	// §6's empty-slot supplement: the noted deletion notice is ordinary,
	// not the occupant, so the next create appends beside it.
	t.Run("vector-34/empty-slot-after-retraction", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		h.assemble(nil)
		outcome(t, h.push("z", cRetract, "DELETED"), protocol.CoalesceNoted)
		includes(t, h.context(), "DELETED")
		res := h.push("b", cInitial, "NEW_CREATE")
		outcome(t, res, protocol.CoalesceAppended)
		if len(res.Removed) != 0 {
			t.Errorf("the create removed %+v", res.Removed)
		}
		if _, _, held := h.tab.Occurrence("editor", "z"); held {
			t.Error("the deletion notice is held as an occupant")
		}
		includes(t, h.assemble(nil), "FIRST", "DELETED", "NEW_CREATE")
	})

	t.Run("vector-34a", func(t *testing.T) {
		// A fresh table is a host restarted without history.
		h := newHarness(t, Options{})
		outcome(t, h.push("a", cInitial, "FIRST"), protocol.CoalesceFirst)
		outcome(t, h.push("edit", cPlain, "EDIT"), protocol.CoalesceReplaced)
		outcome(t, h.push("z", cRetract, "DELETED"), protocol.CoalesceRetracted)
		h.assemble(nil)
		excludes(t, h.allRequests(), "FIRST", "EDIT", "DELETED")
	})

	t.Run("vector-34a/without-initial", func(t *testing.T) {
		h := newHarness(t, Options{})
		outcome(t, h.push("a", cPlain, "FIRST"), protocol.CoalesceAppended)
		outcome(t, h.push("edit", cPlain, "EDIT"), protocol.CoalesceReplaced)
		outcome(t, h.push("z", cRetract, "DELETED"), protocol.CoalesceNoted)
		req := h.assemble(nil)
		includes(t, req, "DELETED")
		excludes(t, h.allRequests(), "FIRST", "EDIT")
	})

	t.Run("vector-34b", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "FIRST")
		h.assemble(nil)
		outcome(t, h.push("second", cInitial, "NEW_INITIAL"), protocol.CoalesceAppended)
		outcome(t, h.push("z", cRetract, "DELETED"), protocol.CoalesceNoted)
		includes(t, h.assemble(nil), "FIRST", "DELETED")
		excludes(t, h.allRequests(), "NEW_INITIAL")
	})

	t.Run("vector-35", func(t *testing.T) {
		h := newHarness(t, Options{})
		first := h.push("a", cInitial, "FIRST")
		again := h.push("a", cInitial, "FIRST")
		if !again.Duplicate || again.Reply != first.Reply {
			t.Errorf("retry %+v, want the duplicate of %+v", again, first.Reply)
		}
		if count(h.assemble(nil), "FIRST") != 1 {
			t.Errorf("FIRST not exactly once: %q", h.requests)
		}
	})

	t.Run("vector-39", func(t *testing.T) {
		// A reconnect changes transport authority, not the table: the
		// caller keeps the same table and binding.
		h := newHarness(t, Options{})
		first := h.push("a", cInitial, "FIRST")
		h.now = h.now.Add(59 * time.Minute)
		again := h.push("a", cInitial, "FIRST")
		if !again.Duplicate || again.Reply != first.Reply {
			t.Errorf("retry %+v", again)
		}
		if count(h.assemble(nil), "FIRST") != 1 {
			t.Errorf("FIRST not once: %q", h.requests)
		}
	})

	t.Run("vector-42", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "ENDPOINT_A")
		// The reassigned configuration gets a new host-owned binding.
		b := h.admit(send{binding: "editor#2", id: "a", coalesce: cInitial, text: "ENDPOINT_B"})
		outcome(t, b, protocol.CoalesceFirst)
		res := h.admit(send{binding: "editor#2", id: "edit", coalesce: cPlain, text: "ENDPOINT_B_NEW"})
		outcome(t, res, protocol.CoalesceReplaced)
		if res.Removed[0].EventID != "a" || res.Subject.Binding != "editor#2" {
			t.Errorf("edit effects %+v", res)
		}
		if _, kind, _ := h.tab.Occurrence("editor", "a"); kind != KindOccupant {
			t.Error("the old binding's occurrence was touched")
		}
		includes(t, h.assemble(nil), "ENDPOINT_A", "ENDPOINT_B_NEW")
		// ENDPOINT_B is a prefix of ENDPOINT_B_NEW: count whole texts.
		if count(h.allRequests(), "ENDPOINT_B") != 0 {
			t.Error("ENDPOINT_B reached a request")
		}
	})

	// Wake is the caller's (§4.2); the core tells it which pending
	// occurrence a replacement or an unread retraction removed, so the
	// caller can drop a wake that rested on it alone.
	t.Run("vector-43", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "QUALIFYING")
		res := h.push("b", cPlain, "NEW_NONQUALIFYING")
		if len(res.Removed) != 1 || res.Removed[0].EventID != "a" {
			t.Errorf("replacement removed %+v, want a", res.Removed)
		}
		res = h.push("z", cRetract, "DELETED")
		outcome(t, res, protocol.CoalesceRetracted)
		if len(res.Removed) != 1 || res.Removed[0].EventID != "b" || res.Deliver != DeliverNone {
			t.Errorf("unread retraction %+v", res)
		}
	})
}

// Vector 37 (audit, illustrative): every displaced, folded and discarded
// thing is reported with its eventIds and why.
func TestVector37Audit(t *testing.T) {
	h := newHarness(t, Options{})
	h.push("a", cInitial, "FIRST")
	if res := h.push("b", cPlain, "EDIT"); res.Removed[0].Reason.String() != "displaced" {
		t.Errorf("vector 2's E1: %v", res.Removed)
	}
	h.assemble(nil)

	dh := newHarness(t, Options{})
	dh.push("n1", cDeferred, "FALLBACK")
	if res := dh.push("n2", cDeferred, "FALLBACK"); !cmp.Equal(res.Removed[0], Removal{EventID: "n1", Reason: RemovedFolded}) {
		t.Errorf("vector 16's fold: %v", res.Removed)
	}
	dh.push("n3", cDeferred, "FALLBACK")
	r := dh.start(doc)
	dec := dh.finish(r.ID, RenderFailed, "")
	if d := cmp.Diff([]string{"n1", "n2", "n3"}, dec.Notices); d != "" || dec.Cause != CauseFailed {
		t.Errorf("vector 23's fallback folded %v (%v)", dec.Notices, dec.Cause)
	}
	if late := dh.finish(r.ID, Rendered, "TOO_LATE"); !late.Discarded || late.Cause.String() != "late" {
		t.Errorf("vector 23's late result: %+v", late)
	}

	e := newHarness(t, Options{})
	e.push("a", cInitial, "FIRST")
	e.assemble(nil)
	e.push("edit", cPlain, "EDIT")
	if res := e.push("z", cRetract, "DELETED"); res.Removed[0].Reason.String() != "withdrawn" || res.Removed[0].EventID != "edit" {
		t.Errorf("vector 29's removed edit: %v", res.Removed)
	}
}
