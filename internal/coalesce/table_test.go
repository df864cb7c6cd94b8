package coalesce

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
)

func spec(t *testing.T, raw string) Spec {
	t.Helper()
	s, inv := Parse(json.RawMessage(raw), LanePush, "e", protocol.AllEventCoalescing())
	if inv != nil {
		t.Fatal(inv)
	}
	return s
}

// An admission the caller could not have built from a valid occurrence
// is refused as a mistake, touching nothing.
func TestAdmissionErrors(t *testing.T) {
	tab := New(Options{})
	now := time.UnixMilli(0)
	for name, in := range map[string]Admission{
		"no binding":              {Lane: LanePush, FeatureSet: "doc", EventID: "a", Spec: spec(t, cPlain)},
		"no eventId":              {Binding: "b", Lane: LanePush, FeatureSet: "doc", Spec: spec(t, cPlain)},
		"not coalesced":           {Binding: "b", Lane: LanePush, FeatureSet: "doc", EventID: "a"},
		"no lane":                 {Binding: "b", FeatureSet: "doc", EventID: "a", Spec: spec(t, cPlain)},
		"no feature set":          {Binding: "b", Lane: LanePush, EventID: "a", Spec: spec(t, cPlain)},
		"channel push, no fs":     {Binding: "b", Lane: LanePush, EventID: "a", Spec: spec(t, cChanEdit)},
		"incoming without chan":   {Binding: "b", Lane: LaneIncoming, EventID: "a", Spec: spec(t, cPlain)},
		"incoming deferred":       {Binding: "b", Lane: LaneIncoming, ChannelID: "c", EventID: "a", Spec: spec(t, cDeferred)},
		"retract and initial":     {Binding: "b", Lane: LanePush, FeatureSet: "doc", EventID: "a", Spec: Spec{Key: "K", Retract: true, Initial: true}},
		"retract and deferred":    {Binding: "b", Lane: LanePush, FeatureSet: "doc", EventID: "a", Spec: Spec{Key: "K", Retract: true, Deferred: true}},
		"incoming with channelId": {Binding: "b", Lane: LaneIncoming, ChannelID: "c", EventID: "a", Spec: Spec{Key: "K", ChannelID: "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := tab.Admit(now, in); !errors.Is(err, ErrAdmission) {
				t.Errorf("err = %v", err)
			}
		})
	}
	if st := tab.Export(); len(st.Subjects)+len(st.Receipts) != 0 {
		t.Errorf("refused admissions left %+v", st)
	}
}

// A plan applies once, and only onto the table it was made against.
func TestPlanCommit(t *testing.T) {
	tab := New(Options{})
	now := time.UnixMilli(0)
	in := func(id, raw string) Admission {
		return Admission{Binding: "b", Lane: LanePush, FeatureSet: "doc", EventID: id, Spec: spec(t, raw)}
	}
	p, err := tab.Plan(now, in("a", cInitial))
	if err != nil {
		t.Fatal(err)
	}
	if p.Result().Reply.Outcome != protocol.CoalesceFirst {
		t.Fatalf("plan %+v", p.Result())
	}
	if _, ok := tab.Receipt(now, "b", "a"); ok {
		t.Error("a plan left a receipt before its commit")
	}
	stale, _ := tab.Plan(now, in("b", cPlain))
	if err := tab.Commit(p); err != nil {
		t.Fatal(err)
	}
	if err := tab.Commit(p); !errors.Is(err, ErrCommitted) {
		t.Errorf("second commit: %v", err)
	}
	if err := tab.Commit(stale); !errors.Is(err, ErrStale) {
		t.Errorf("stale commit: %v", err)
	}
	fresh, _ := tab.Plan(now, in("b", cPlain))
	if fresh.Result().Reply.Outcome != protocol.CoalesceReplaced {
		t.Errorf("replan %+v", fresh.Result())
	}
	// A duplicate's plan commits as a no-op.
	dup, _ := tab.Plan(now, in("a", cInitial))
	before := tab.Export()
	if !dup.Result().Duplicate || tab.Commit(dup) != nil {
		t.Errorf("duplicate plan %+v", dup.Result())
	}
	if d := cmp.Diff(before, tab.Export()); d != "" {
		t.Error(d)
	}
}

// Export is data: it goes through JSON and back to an equal table, and
// changing what it returned does not change the table.
func TestExportImportRoundTrip(t *testing.T) {
	h := newHarness(t, Options{})
	h.push("a", cInitial, "FIRST")
	h.assemble(nil)
	h.push("b", cPlain, "EDIT")
	h.push("n1", `{"key":"D","deferred":true,"data":[1, 2]}`, "FB1")
	h.start(Subject{Binding: "editor", Scope: ScopeFeatureSet, ScopeID: "doc", Key: "D"})
	h.push("n2", `{"key":"D","deferred":true,"initial":true}`, "FB2")
	h.incoming("chat", "c", cInitial, "CHAT")
	st := h.tab.Export()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	tab, err := Import(back, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(st, tab.Export()); d != "" {
		t.Errorf("round trip:\n%s", d)
	}
	if !strings.Contains(string(b), `"data":[1,2]`) {
		t.Errorf("notice data not kept: %s", b)
	}
	d := st.Subjects[1]
	if d.Subject.Key != "D" || d.Rendering == nil {
		t.Fatalf("subject order: %+v", st.Subjects)
	}
	d.Rendering.Notices[0].Data[0] = 'X'
	d.Rendering.Fallback[0] = 'X'
	st.Subjects[0].History = HistorySome
	if d := cmp.Diff(back, h.tab.Export()); d != "" {
		t.Errorf("the export aliases the table:\n%s", d)
	}
	// The imported table carries on where the first left off.
	if _, kind, _ := tab.Occurrence("editor", "n1"); kind != KindRendering {
		t.Errorf("n1 is %v", kind)
	}
	if r, ok := tab.StartRender(Subject{Binding: "editor", Scope: ScopeFeatureSet, ScopeID: "doc", Key: "D"}); ok {
		t.Errorf("render started while one is open: %+v", r)
	}
}

// Import refuses a state it cannot hold.
func TestImportErrors(t *testing.T) {
	good := func() State {
		h := newHarness(t, Options{})
		h.push("a", cInitial, "A")
		h.push("n1", `{"key":"D","deferred":true}`, "F")
		h.start(Subject{Binding: "editor", Scope: ScopeFeatureSet, ScopeID: "doc", Key: "D"})
		return h.tab.Export()
	}
	if _, err := Import(good(), Options{}); err != nil {
		t.Fatalf("the good state: %v", err)
	}
	for name, mutate := range map[string]func(*State){
		"format":           func(s *State) { s.Format = "other" },
		"repeated subject": func(s *State) { s.Subjects = append(s.Subjects, s.Subjects[0]) },
		"no binding":       func(s *State) { s.Subjects[0].Subject.Binding = "" },
		"bad scope":        func(s *State) { s.Subjects[0].Subject.Scope = "room" },
		"bad history":      func(s *State) { s.Subjects[0].History = 9 },
		"materialized without occupant": func(s *State) {
			s.Subjects[1].Occupant, s.Subjects[1].Materialized = "", true
		},
		"plain beside a batch": func(s *State) { s.Subjects[0].Occupant = "x" },
		"eventId held twice":   func(s *State) { s.Subjects[1].Occupant = "n1" },
		"render not handed out": func(s *State) {
			s.NextRender = 0
		},
		"pending with a render id": func(s *State) {
			s.Subjects[0].Pending, s.Subjects[0].Rendering = s.Subjects[0].Rendering, nil
		},
		"batch without notices": func(s *State) { s.Subjects[0].Rendering.Notices = nil },
		"latest notice differs": func(s *State) { s.Subjects[0].Rendering.EventID = "other" },
		"repeated receipt":      func(s *State) { s.Receipts = append(s.Receipts, s.Receipts[0]) },
		"incomplete receipt":    func(s *State) { s.Receipts[0].Result.Outcome = "" },
	} {
		t.Run(name, func(t *testing.T) {
			st := good()
			mutate(&st)
			if _, err := Import(st, Options{}); err == nil {
				t.Error("imported")
			}
		})
	}
}

// A batch imported with more notices than the table retains keeps the
// newest and counts the rest.
func TestImportTrimsNotices(t *testing.T) {
	ns := make([]protocol.Notice, 70)
	for i := range ns {
		ns[i] = protocol.Notice{EventID: string(rune('a'+i%26)) + strings.Repeat("x", i/26), Timestamp: ts}
	}
	st := State{Format: StateFormat, Subjects: []SubjectState{{Subject: doc, History: HistoryNone,
		Pending: &BatchState{FeatureSet: "doc", EventID: ns[69].EventID, Notices: ns, Dropped: 2}}}}
	tab, err := Import(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tab.Inspect(doc)
	if len(got.Pending.Notices) != 64 || got.Pending.Dropped != 8 || got.Pending.Notices[0].EventID != ns[6].EventID {
		t.Errorf("%d notices, %d dropped", len(got.Pending.Notices), got.Pending.Dropped)
	}
}

// Evict: the occupant becomes ordinary, each batch falls back, the
// history becomes unknown; a rendering batch's result is discarded.
func TestEvict(t *testing.T) {
	h := newHarness(t, Options{})
	h.push("a", cInitial, "FIRST")
	h.assemble(nil)
	h.push("n1", cDeferred, "FB_ONE")
	r := h.start(doc)
	h.push("n2", cDeferred, "FB_TWO")
	ev, ok := h.tab.Evict(doc)
	if !ok || len(ev.Fallbacks) != 2 || ev.Fallbacks[0].EventID != "n1" || ev.Fallbacks[1].EventID != "n2" || ev.Sealed != "" {
		t.Fatalf("eviction %+v", ev)
	}
	for _, d := range ev.Fallbacks {
		if d.Occupant || d.Cause != CauseEvicted {
			t.Errorf("fallback %+v", d)
		}
		h.decide(d, "")
	}
	if d := h.tab.Finish(r.ID, Rendered); !d.Discarded || d.Cause != CauseLate {
		t.Errorf("the evicted render's result %+v", d)
	}
	if _, tracked := h.tab.Inspect(doc); tracked {
		t.Error("still tracked")
	}
	order(t, h.assemble(nil), "FIRST", "FB_ONE", "FB_TWO")
	outcome(t, h.push("z", cRetract, ""), protocol.CoalesceConsumed)
	if _, ok := h.tab.Evict(doc); ok {
		t.Error("evicted an untracked subject")
	}
	// An unread occupant is sealed: a later edit appends beside it.
	h.push("b", cInitial, "LATE_CREATE")
	if ev, _ := h.tab.Evict(doc); ev.Sealed != "b" {
		t.Errorf("eviction %+v", ev)
	}
	outcome(t, h.push("c", cPlain, "EDIT"), protocol.CoalesceAppended)
}

// The idle queue stays bounded however often subjects go busy and idle.
func TestIdleQueueBounded(t *testing.T) {
	h := newHarness(t, Options{MaxSubjects: 4})
	for i := range 500 {
		key := []string{"k0", "k1", "k2"}[i%3]
		id := "e" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('A'+i/26%26)) + string(rune('0'+i/676))
		h.push(id, `{"key":"`+key+`"}`, "T")
		h.assemble(nil)
	}
	b := h.tab.bindings["editor"]
	if n := len(b.idle) - b.idleHead; n > 2*len(b.subjects)+33 {
		t.Errorf("idle queue holds %d entries for %d subjects", n, len(b.subjects))
	}
}
