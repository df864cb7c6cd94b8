package coalesce

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/mcpl-go/mcpl/protocol"
)

// StateFormat names the State encoding.
const StateFormat = "mcpl-coalesce-1"

// State is a table's whole state as plain data, for the caller to make
// durable (encoding/json) and to restore after a restart (Import). It is
// sorted, so equal tables export equal States.
//
// Not in it: the order in which idle subjects are evicted (after Import
// it is the subjects' sorted order), and the memory of closed renders
// (after a restart no earlier render can complete).
type State struct {
	// Format is StateFormat.
	Format string `json:"format"`
	// NextRender is the last render id handed out.
	NextRender uint64 `json:"nextRender"`
	// Subjects are the tracked subjects.
	Subjects []SubjectState `json:"subjects"`
	// Receipts are the retry receipts.
	Receipts []ReceiptState `json:"receipts"`
}

// SubjectState is one tracked subject.
type SubjectState struct {
	// Subject is its identity.
	Subject Subject `json:"subject"`
	// History is its consumed history.
	History History `json:"history"`
	// LastConsumed is the eventId of the last occurrence consumed, when
	// known: a later outcome's priorEventId.
	LastConsumed string `json:"lastConsumed,omitempty"`
	// Occupant is the unconsumed occupant's eventId; empty when none.
	Occupant string `json:"occupant,omitempty"`
	// Materialized says the occupant is a materialized batch, not a plain
	// occurrence.
	Materialized bool `json:"materialized,omitempty"`
	// Rendering is the batch whose render is open.
	Rendering *BatchState `json:"rendering,omitempty"`
	// Pending is the pending batch.
	Pending *BatchState `json:"pending,omitempty"`
}

// BatchState is one batch.
type BatchState struct {
	// FeatureSet is the latest notice's feature set.
	FeatureSet string `json:"featureSet"`
	// EventID is the latest notice's eventId, the batch's placeholder.
	EventID string `json:"eventId"`
	// Notices are the retained notices, oldest first.
	Notices []protocol.Notice `json:"notices"`
	// Dropped counts the notices discarded before them.
	Dropped int `json:"dropped"`
	// Fallback is the latest notice's fallback, as the caller gave it.
	Fallback json.RawMessage `json:"fallback,omitempty"`
	// RenderID is the open render, for a rendering batch.
	RenderID uint64 `json:"renderId,omitempty"`
}

// ReceiptState is one retry receipt.
type ReceiptState struct {
	// Binding is the occurrence's binding.
	Binding string `json:"binding"`
	// EventID is the occurrence's eventId.
	EventID string `json:"eventId"`
	// Result is its original coalesce result.
	Result protocol.CoalesceResult `json:"result"`
	// AdmittedMs is its first admission, in Unix milliseconds.
	AdmittedMs int64 `json:"admittedMs"`
	// ExpiresMs is the last millisecond of its window, fixed at admission
	// by the window then advertised.
	ExpiresMs int64 `json:"expiresMs"`
}

func (b *batch) export() *BatchState {
	if b == nil {
		return nil
	}
	return &BatchState{FeatureSet: b.featureSet, EventID: b.eventID, Notices: copyNotices(b.notices),
		Dropped: b.dropped, Fallback: slices.Clone(b.fallback), RenderID: b.renderID}
}

func (s *subject) export() SubjectState {
	st := SubjectState{Subject: s.id, History: s.history, LastConsumed: s.lastConsumed,
		Rendering: s.rendering.export(), Pending: s.pending.export()}
	if s.occ != nil {
		st.Occupant, st.Materialized = s.occ.eventID, s.occ.kind == occMaterialized
	}
	return st
}

// Export returns the table's state.
func (t *Table) Export() State {
	st := State{Format: StateFormat, NextRender: t.nextRender, Subjects: []SubjectState{}, Receipts: []ReceiptState{}}
	for _, b := range t.bindings {
		for _, s := range b.subjects {
			st.Subjects = append(st.Subjects, s.export())
		}
	}
	slices.SortFunc(st.Subjects, func(a, b SubjectState) int { return compareSubjects(a.Subject, b.Subject) })
	for k, r := range t.receipts {
		st.Receipts = append(st.Receipts, ReceiptState{Binding: k.binding, EventID: k.eventID, Result: r.result,
			AdmittedMs: r.admitted, ExpiresMs: r.expires})
	}
	slices.SortFunc(st.Receipts, func(a, b ReceiptState) int {
		return cmp.Or(cmp.Compare(a.Binding, b.Binding), cmp.Compare(a.EventID, b.EventID))
	})
	return st
}

// Import returns a table holding st, configured by opts, exactly as it
// was exported: open renders are still open, occupants still
// replaceable. After a restart no render is really in flight, so the
// caller follows Import with Recover before admitting anything. A batch
// with more notices than opts retains keeps the newest, the rest counted
// as dropped.
func Import(st State, opts Options) (*Table, error) {
	if st.Format != StateFormat {
		return nil, fmt.Errorf("coalesce: state format %q, want %q", st.Format, StateFormat)
	}
	t := New(opts)
	t.nextRender = st.NextRender
	for i, ss := range st.Subjects {
		s, err := t.importSubject(ss)
		if err != nil {
			return nil, fmt.Errorf("coalesce: state subject %d (%v): %w", i, ss.Subject, err)
		}
		b := t.binding(s.id.Binding)
		if b.subjects[s.id] != nil {
			return nil, fmt.Errorf("coalesce: state subject %d (%v) repeated", i, ss.Subject)
		}
		for _, id := range s.liveIDs() {
			if _, dup := b.live[id]; dup {
				return nil, fmt.Errorf("coalesce: state subject %d (%v): eventId %q held twice", i, ss.Subject, id)
			}
		}
		if r := s.rendering; r != nil {
			if _, dup := t.open[r.renderID]; dup || r.renderID > t.nextRender {
				return nil, fmt.Errorf("coalesce: state subject %d (%v): render %d repeated or not handed out", i, ss.Subject, r.renderID)
			}
			t.open[r.renderID] = s.id
		}
		b.subjects[s.id] = s
		t.settle(b, s, nil)
	}
	for i, rs := range st.Receipts {
		k := receiptKey{rs.Binding, rs.EventID}
		if rs.Binding == "" || rs.EventID == "" || rs.Result.Outcome == "" {
			return nil, fmt.Errorf("coalesce: state receipt %d is incomplete", i)
		}
		if _, dup := t.receipts[k]; dup {
			return nil, fmt.Errorf("coalesce: state receipt %d (%s %q) repeated", i, rs.Binding, rs.EventID)
		}
		t.receipts[k] = receipt{result: rs.Result, admitted: rs.AdmittedMs, expires: rs.ExpiresMs}
	}
	return t, nil
}

func (t *Table) importSubject(ss SubjectState) (*subject, error) {
	k := ss.Subject
	if k.Binding == "" || k.ScopeID == "" || k.Key == "" || (k.Scope != ScopeChannel && k.Scope != ScopeFeatureSet) {
		return nil, fmt.Errorf("incomplete identity")
	}
	if _, err := ss.History.MarshalText(); err != nil {
		return nil, err
	}
	s := &subject{id: k, history: ss.History, lastConsumed: ss.LastConsumed}
	if ss.Occupant != "" {
		s.occ = &occupant{eventID: ss.Occupant, kind: occPlain}
		if ss.Materialized {
			s.occ.kind = occMaterialized
		}
	} else if ss.Materialized {
		return nil, fmt.Errorf("materialized without an occupant")
	}
	var err error
	if s.pending, err = t.importBatch(ss.Pending, false); err != nil {
		return nil, fmt.Errorf("pending: %w", err)
	}
	if s.rendering, err = t.importBatch(ss.Rendering, true); err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	if s.occ != nil && s.occ.kind == occPlain && (s.pending != nil || s.rendering != nil) {
		return nil, fmt.Errorf("a plain occupant beside a batch")
	}
	return s, nil
}

func (t *Table) importBatch(bs *BatchState, rendering bool) (*batch, error) {
	switch {
	case bs == nil:
		return nil, nil
	case bs.EventID == "" || len(bs.Notices) == 0 || bs.Dropped < 0:
		return nil, fmt.Errorf("incomplete batch")
	case rendering != (bs.RenderID != 0):
		return nil, fmt.Errorf("render id %d on a batch that is rendering: %v", bs.RenderID, rendering)
	case bs.Notices[len(bs.Notices)-1].EventID != bs.EventID:
		return nil, fmt.Errorf("the latest notice is not the batch's eventId")
	}
	b := &batch{featureSet: bs.FeatureSet, eventID: bs.EventID, notices: copyNotices(bs.Notices),
		dropped: bs.Dropped, fallback: slices.Clone(bs.Fallback), renderID: bs.RenderID}
	if over := len(b.notices) - t.maxNotices; over > 0 {
		b.notices = slices.Delete(b.notices, 0, over)
		b.dropped += over
	}
	return b, nil
}

// RecoveryMode is how Recover treats work that was replaceable before a
// restart; both conform (RFC-006 §3.2, vector 40).
type RecoveryMode uint8

const (
	// RecoverConservative seals every unconsumed occupant as an ordinary
	// occurrence and materializes every batch as its fallback, ordinary
	// too: nothing stays replaceable, the subject's history counts those
	// occurrences as consumed, and a later plain occurrence appends
	// (vector 7). The default profile.
	RecoverConservative RecoveryMode = iota
	// RecoverPreserving keeps occupants and pending batches replaceable;
	// only interrupted renders fall back, as occupants.
	RecoverPreserving
)

// String is for logs and test names.
func (m RecoveryMode) String() string {
	switch m {
	case RecoverConservative:
		return "conservative"
	case RecoverPreserving:
		return "preserving"
	}
	return "recovery?"
}

// Sealed is an occupant recovery turned ordinary.
type Sealed struct {
	// Subject is its subject.
	Subject Subject
	// EventID names it.
	EventID string
}

// Recovery is what Recover leaves the caller to do.
type Recovery struct {
	// Sealed are occupants now ordinary: the caller keeps delivering them
	// as they are (nothing to change but their replaceability).
	Sealed []Sealed
	// Fallbacks are batches the caller materializes as their fallbacks,
	// each once. An interrupted render is not replayed (§3.2, §5.3); its
	// result, were it to come, is discarded. A caller that crashes before
	// persisting the table after Recover gets the same fallbacks again
	// from the next Recover: it materializes at most one occurrence per
	// Decision.EventID.
	Fallbacks []Decision
}

// Recover applies mode to a table just imported after a restart, in
// subject order, and keeps every receipt, so retries within their
// windows still dedupe (vectors 7, 40, 47). Every render open before the
// restart closes here. A subject the restart lost from State is simply
// untracked, and so unknown (vector 31).
func (t *Table) Recover(mode RecoveryMode) Recovery {
	var rec Recovery
	for _, binding := range slices.Sorted(maps.Keys(t.bindings)) {
		b := t.bindings[binding]
		for _, key := range t.Subjects(binding) {
			s := b.subjects[key]
			before := s.liveIDs()
			if r := s.rendering; r != nil {
				d := fallbackOf(key, r, CauseRecovered)
				s.rendering = nil
				if mode == RecoverPreserving {
					materialize(s, &d)
				}
				rec.Fallbacks = append(rec.Fallbacks, d)
			}
			if mode == RecoverConservative {
				if s.occ != nil {
					rec.Sealed = append(rec.Sealed, Sealed{Subject: key, EventID: s.occ.eventID})
					s.occ = nil
					s.history = s.history.consumed()
				}
				if p := s.pending; p != nil {
					rec.Fallbacks = append(rec.Fallbacks, fallbackOf(key, p, CauseRecovered))
					s.pending = nil
				}
				if len(before) > 0 {
					s.history = s.history.consumed()
				}
			}
			t.settle(b, s, before)
		}
	}
	clear(t.open)
	clear(t.closed)
	t.closedQ = nil
	t.version++
	return rec
}
