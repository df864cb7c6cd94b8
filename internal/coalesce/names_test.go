package coalesce

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
)

// The names State and the logs use are fixed; an unknown value says so
// and never encodes.
func TestNames(t *testing.T) {
	for got, want := range map[string]string{
		LanePush.String(): "push/event", LaneIncoming.String(): "channels/incoming", Lane(9).String(): "lane?",
		HistoryNone.String(): "none", HistorySome.String(): "some", HistoryUnknown.String(): "unknown",
		RemovedReplaced.String(): "displaced", RemovedFolded.String(): "folded", RemovedWithdrawn.String(): "withdrawn",
		RemovedCancelled.String(): "cancelled", RemovalReason(0).String(): "removal?",
		CauseRendered.String(): "rendered", CauseEmpty.String(): "empty", CauseFailed.String(): "failed",
		CauseLapsed.String(): "lapsed", CauseUnrendered.String(): "unrendered", CauseEvicted.String(): "evicted",
		CauseRecovered.String(): "recovered", CauseCancelled.String(): "cancelled", CauseLate.String(): "late",
		CauseUnknown.String(): "unknown", Cause(0).String(): "cause?",
		RecoverConservative.String(): "conservative", RecoverPreserving.String(): "preserving", RecoveryMode(7).String(): "recovery?",
		doc.String(): `editor/featureSet:doc/"K"`,
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if _, err := json.Marshal(History(7)); err == nil {
		t.Error("an unknown history encoded")
	}
	var h History
	if err := json.Unmarshal([]byte(`"maybe"`), &h); err == nil {
		t.Error("an unknown history decoded")
	}
	for _, want := range []History{HistoryNone, HistorySome, HistoryUnknown} {
		b, _ := json.Marshal(want)
		var got History
		if err := json.Unmarshal(b, &got); err != nil || got != want {
			t.Errorf("%v round trip: %v %v", want, got, err)
		}
	}
}

// Admission of a replacement, the common case of a busy subject.
func BenchmarkAdmitReplace(b *testing.B) {
	tab := New(Options{})
	now := time.UnixMilli(0)
	spec, _ := Parse(json.RawMessage(`{"key":"K"}`), LanePush, "e", protocol.AllEventCoalescing())
	in := Admission{Binding: "b", Lane: LanePush, FeatureSet: "doc", Spec: spec}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		in.EventID = fmt.Sprint(i)
		if _, err := tab.Admit(now, in); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			now = now.Add(2 * time.Hour)
			tab.Consume("b", in.EventID)
			tab.Expire(now)
		}
	}
}

// A notice joining a full batch of 64: the copy of the batch a plan
// makes is the cost of being able to drop the plan.
func BenchmarkAdmitNoticeFullBatch(b *testing.B) {
	tab := New(Options{})
	now := time.UnixMilli(0)
	spec, _ := Parse(json.RawMessage(`{"key":"K","deferred":true,"data":{"by":"o","para":3}}`), LanePush, "e", protocol.AllEventCoalescing())
	in := Admission{Binding: "b", Lane: LanePush, FeatureSet: "doc", Spec: spec, Fallback: json.RawMessage(`"f"`)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		in.EventID = fmt.Sprint(i)
		if _, err := tab.Admit(now, in); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			now = now.Add(2 * time.Hour)
			tab.Expire(now)
		}
	}
}
