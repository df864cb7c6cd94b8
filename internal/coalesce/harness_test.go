package coalesce

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
)

// harness drives a Table the way the host will, and applies every effect
// to a simulated inbox of rows, so a test can read what a request would
// contain (the conformance corpus's requestText and allRequestText). As
// it applies effects it fails the test on anything that would break a
// safety property: removing a row a model has read, materializing a batch
// twice, materializing a cancelled or removed batch, removing a row that
// was never delivered.
type harness struct {
	t   testing.TB
	tab *Table
	now time.Time
	adv protocol.EventCoalescing

	rows     []*row
	live     map[string]*row // binding/eventId → the row that carries it
	requests [][]string      // the texts of each assembled request
	renders  []Render        // every push/render sent
	decided  map[uint64]bool // renders that materialized something
	cancel   map[uint64]bool // renders whose batch was cancelled
	audit    []string        // displaced/folded/discarded lines
	window   int64
}

type rowKind uint8

const (
	rowContent rowKind = iota + 1
	rowPlaceholder
)

type row struct {
	binding, id string
	subject     Subject
	kind        rowKind
	text        string // content; for a placeholder, its fallback
	removed     bool
	consumed    bool
	replaceable bool // the table holds it as the subject's occupant
	tracked     bool // it belongs to a subject (not a notice or a degraded occurrence)
}

func newHarness(t testing.TB, opts Options) *harness {
	return &harness{t: t, tab: New(opts), now: time.UnixMilli(1_800_000_000_000), adv: protocol.AllEventCoalescing(),
		live: map[string]*row{}, decided: map[uint64]bool{}, cancel: map[uint64]bool{}}
}

func rowKey(binding, id string) string { return binding + "\x00" + id }

// send is one coalesced occurrence on the wire: its lane, binding, scope,
// eventId, raw coalesce member and content text ("" for none).
type send struct {
	lane     Lane
	binding  string
	fs       string
	channel  string // channels/incoming's channelId
	id       string
	coalesce string
	text     string
}

func (h *harness) admit(s send) Result {
	h.t.Helper()
	if s.lane == 0 {
		s.lane = LanePush
	}
	if s.binding == "" {
		s.binding = "editor"
	}
	if s.lane == LanePush && s.fs == "" {
		s.fs = "doc"
	}
	spec, inv := Parse(json.RawMessage(s.coalesce), s.lane, s.id, h.adv)
	if inv != nil {
		h.t.Fatalf("send %s: malformed: %v", s.id, inv)
	}
	fb, _ := json.Marshal(s.text)
	res, err := h.tab.Admit(h.now, Admission{Binding: s.binding, Lane: s.lane, FeatureSet: s.fs, ChannelID: s.channel,
		EventID: s.id, Timestamp: "2026-01-01T00:00:00Z", Spec: spec, HasNotice: s.text != "", Fallback: fb, WindowMs: h.window})
	if err != nil {
		h.t.Fatalf("send %s: %v", s.id, err)
	}
	h.apply(s.binding, s.id, s.text, res)
	return res
}

func (h *harness) push(id, coalesce, text string) Result {
	h.t.Helper()
	return h.admit(send{id: id, coalesce: coalesce, text: text})
}

func (h *harness) incoming(channel, id, coalesce, text string) Result {
	h.t.Helper()
	return h.admit(send{lane: LaneIncoming, channel: channel, id: id, coalesce: coalesce, text: text})
}

func (h *harness) remove(binding string, rm Removal) {
	h.t.Helper()
	r := h.live[rowKey(binding, rm.EventID)]
	switch {
	case r == nil:
		h.t.Fatalf("removal of %q, which no row carries", rm.EventID)
	case r.consumed:
		h.t.Fatalf("removal of %q, which a model has read", rm.EventID)
	case r.removed:
		h.t.Fatalf("removal of %q twice", rm.EventID)
	}
	if rm.Reason == RemovedCancelled {
		h.cancel[rm.RenderID] = true
	}
	r.removed = true
	delete(h.live, rowKey(binding, rm.EventID))
	h.audit = append(h.audit, fmt.Sprintf("%s %s", rm.Reason, rm.EventID))
}

func (h *harness) apply(binding, id, text string, res Result) {
	h.t.Helper()
	if res.Duplicate {
		if res.Deliver != DeliverNone || len(res.Removed) != 0 {
			h.t.Fatalf("a duplicate with effects: %+v", res)
		}
		return
	}
	for _, rm := range res.Removed {
		h.remove(binding, rm)
	}
	tracked := !res.Degraded
	switch res.Deliver {
	case DeliverOrdinary:
		retract := res.Reply.Outcome == protocol.CoalesceNoted || res.Reply.Outcome == protocol.CoalesceConsumed || res.Reply.Outcome == protocol.CoalesceRetracted
		h.add(&row{binding: binding, id: id, subject: res.Subject, kind: rowContent, text: text,
			replaceable: tracked && !retract, tracked: tracked && !retract})
	case DeliverBatch:
		h.add(&row{binding: binding, id: id, subject: res.Subject, kind: rowPlaceholder, text: text, tracked: true})
	}
}

func (h *harness) add(r *row) {
	h.t.Helper()
	k := rowKey(r.binding, r.id)
	if old := h.live[k]; old != nil {
		h.t.Fatalf("eventId %q delivered twice", r.id)
	}
	h.rows = append(h.rows, r)
	h.live[k] = r
}

// decide applies a Decision to the placeholder it names.
func (h *harness) decide(d Decision, rendered string) {
	h.t.Helper()
	if h.cancel[d.RenderID] && !d.Discarded {
		h.t.Fatalf("render %d of a cancelled batch decided %+v", d.RenderID, d)
	}
	if d.Discarded {
		if d.Materialize != MaterializeNothing {
			h.t.Fatalf("a discarded decision materializes: %+v", d)
		}
		h.audit = append(h.audit, fmt.Sprintf("discarded render %d (%s)", d.RenderID, d.Cause))
		return
	}
	k := rowKey(d.Subject.Binding, d.EventID)
	r := h.live[k]
	if r == nil || r.kind != rowPlaceholder || r.removed {
		h.t.Fatalf("decision on %q, which is not a live placeholder (%+v)", d.EventID, r)
	}
	if d.RenderID != 0 {
		if h.decided[d.RenderID] {
			h.t.Fatalf("render %d decided twice", d.RenderID)
		}
		h.decided[d.RenderID] = true
	}
	for _, id := range d.Sealed {
		if s := h.live[rowKey(d.Subject.Binding, id)]; s != nil {
			s.replaceable = false
		}
	}
	switch d.Materialize {
	case MaterializeNothing:
		r.removed = true
		delete(h.live, k)
		return
	case MaterializeResult:
		r.text = rendered
	case MaterializeFallback:
		var fb string
		if err := json.Unmarshal(d.Fallback, &fb); err != nil || fb != r.text {
			h.t.Fatalf("fallback %s, want the latest notice's %q", d.Fallback, r.text)
		}
	}
	r.kind, r.replaceable = rowContent, d.Occupant
	if !d.Occupant {
		r.tracked = false
	}
	h.audit = append(h.audit, fmt.Sprintf("folded %v into %s", d.Notices, d.EventID))
}

func (h *harness) start(key Subject) Render {
	h.t.Helper()
	r, ok := h.tab.StartRender(key)
	if !ok {
		h.t.Fatalf("no render started for %v", key)
	}
	h.renders = append(h.renders, r)
	return r
}

func (h *harness) finish(id uint64, out RenderOutcome, text string) Decision {
	h.t.Helper()
	d := h.tab.Finish(id, out)
	h.decide(d, text)
	return d
}

// renderPlan answers a render at assembly: the outcome and text.
type renderPlan struct {
	out  RenderOutcome
	text string
}

// assemble builds one request the way the host will: every pending batch
// among the live rows is rendered first by plan (nil: none may be), then
// every live content row is included and consumed. Placeholders of open
// renders are left out.
func (h *harness) assemble(plan *renderPlan) []string {
	h.t.Helper()
	for _, r := range slices.Clone(h.rows) {
		if r.removed || r.kind != rowPlaceholder {
			continue
		}
		key, kind, ok := h.tab.Occurrence(r.binding, r.id)
		if !ok {
			h.t.Fatalf("placeholder %q the table does not hold", r.id)
		}
		if kind != KindPending {
			continue
		}
		if plan == nil {
			h.t.Fatalf("a render of %v at an assembly that expects none", key)
		}
		ren, ok := h.tab.StartRender(key)
		if !ok {
			// The subject's previous render is still open: this batch
			// stays pending, unseen, for a later assembly.
			if st, _ := h.tab.Inspect(key); st.Rendering == nil {
				h.t.Fatalf("no render started for %v, and none is open", key)
			}
			continue
		}
		h.renders = append(h.renders, ren)
		h.finish(ren.ID, plan.out, plan.text)
	}
	var req []string
	ids := map[string][]string{}
	for _, r := range h.rows {
		if r.removed || r.kind != rowContent {
			continue
		}
		req = append(req, r.text)
		ids[r.binding] = append(ids[r.binding], r.id)
		r.consumed = true
		r.replaceable = false
	}
	for b, list := range ids {
		h.tab.Consume(b, list...)
	}
	h.requests = append(h.requests, req)
	return req
}

// context is every live content row's text, read or not.
func (h *harness) context() []string {
	var out []string
	for _, r := range h.rows {
		if !r.removed && r.kind == rowContent {
			out = append(out, r.text)
		}
	}
	return out
}

func (h *harness) allRequests() []string {
	var out []string
	for _, r := range h.requests {
		out = append(out, r...)
	}
	return out
}

func outcome(t testing.TB, res Result, want string) {
	t.Helper()
	if res.Duplicate {
		t.Fatalf("a duplicate, want outcome %q", want)
	}
	if res.Reply.Outcome != want {
		t.Fatalf("outcome %q, want %q (%+v)", res.Reply.Outcome, want, res)
	}
}

func includes(t testing.TB, texts []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(texts, w) {
			t.Errorf("%q not in %q", w, texts)
		}
	}
}

func excludes(t testing.TB, texts []string, not ...string) {
	t.Helper()
	for _, n := range not {
		for _, s := range texts {
			if strings.Contains(s, n) {
				t.Errorf("%q in %q", n, texts)
			}
		}
	}
}

func order(t testing.TB, texts []string, want ...string) {
	t.Helper()
	at := -1
	for _, w := range want {
		i := slices.Index(texts, w)
		if i <= at {
			t.Errorf("%q not in order %q in %q", w, want, texts)
			return
		}
		at = i
	}
}

func count(texts []string, s string) int {
	n := 0
	for _, x := range texts {
		if x == s {
			n++
		}
	}
	return n
}

// doc is the default subject of the vectors: feature set "doc", key K.
var doc = Subject{Binding: "editor", Scope: ScopeFeatureSet, ScopeID: "doc", Key: "K"}
