package coalesce

import (
	"encoding/json"
	"slices"

	"github.com/mcpl-go/mcpl/protocol"
)

// batch is a deferred batch (RFC-006 §5): its retained notices, and what
// its latest notice said.
type batch struct {
	featureSet string
	eventID    string // the latest notice's: the batch's placeholder
	notices    []protocol.Notice
	dropped    int
	fallback   json.RawMessage
	renderID   uint64 // while rendering
}

func (b *batch) clone() *batch {
	if b == nil {
		return nil
	}
	c := *b
	c.notices = slices.Clone(b.notices)
	return &c
}

// add joins a notice: it updates the latest eventId, feature set and
// fallback, and keeps the newest max notices, counting those it drops.
// The data slice is the Spec's own copy (Parse copies it).
func (b *batch) add(in Admission, max int) {
	b.featureSet, b.eventID, b.fallback = in.FeatureSet, in.EventID, slices.Clone(in.Fallback)
	b.notices = append(b.notices, protocol.Notice{EventID: in.EventID, Timestamp: in.Timestamp, Data: slices.Clone(in.Spec.Data)})
	if over := len(b.notices) - max; over > 0 {
		b.notices = slices.Delete(b.notices, 0, over)
		b.dropped += over
	}
}

func (b *batch) noticeIDs() []string {
	ids := make([]string, len(b.notices))
	for i, n := range b.notices {
		ids[i] = n.EventID
	}
	return ids
}

func copyNotices(ns []protocol.Notice) []protocol.Notice {
	out := make([]protocol.Notice, len(ns))
	for i, n := range ns {
		out[i] = protocol.Notice{EventID: n.EventID, Timestamp: n.Timestamp, Data: slices.Clone(n.Data)}
	}
	return out
}

// Render is a started render: the push/render request to send.
type Render struct {
	// ID names the render in Finish.
	ID uint64
	// Subject is the subject rendered.
	Subject Subject
	// Params are the push/render params: exactly the frozen notices.
	Params protocol.PushRenderParams
}

// StartRender freezes a subject's pending batch and returns its
// push/render request (RFC-006 §5.2, §5.4 rule 1): the caller calls it
// when it assembles a request that would include the batch, sends the
// request, and reports its completion to Finish. Notices admitted from
// here on open a new batch.
//
// It returns false when the subject has no pending batch, or when its
// previous render is still open: one render per subject is open at a
// time, so rendered deltas materialize in order and the server is never
// asked to describe the same span twice at once. The newer batch then
// stays pending, unseen, for a later assembly; a caller may instead wait
// for the open render, which its timeout bounds.
func (t *Table) StartRender(key Subject) (Render, bool) {
	b, s := t.lookup(key)
	if s == nil || s.pending == nil || s.rendering != nil {
		return Render{}, false
	}
	t.nextRender++
	r := s.pending
	r.renderID = t.nextRender
	s.rendering, s.pending = r, nil
	t.open[r.renderID] = key
	t.settle(b, s, nil)
	p := protocol.PushRenderParams{FeatureSet: r.featureSet, Key: key.Key, EventID: r.eventID,
		Notices: copyNotices(r.notices), Dropped: r.dropped}
	if key.Scope == ScopeChannel {
		p.ChannelID = key.ScopeID
	}
	return Render{ID: r.renderID, Subject: key, Params: p}, true
}

// RenderOutcome is how a render completed, as the caller judged it.
type RenderOutcome uint8

const (
	// Rendered: the server answered with content that passed every check
	// pushed content gets (§5.2, §5.4 rule 5). Content that fails them is
	// RenderFailed.
	Rendered RenderOutcome = iota + 1
	// RenderEmpty: the server answered with empty content: nothing
	// changed (§5.2).
	RenderEmpty
	// RenderFailed: timeout, error, a disconnected server, or content
	// refused by the checks (§5.3).
	RenderFailed
	// RenderLapsed: the batch's authority no longer holds at response
	// (§5.4 rule 4).
	RenderLapsed
)

// Materialize is what a decision puts in front of a model.
type Materialize uint8

const (
	// MaterializeNothing: nothing; the caller removes the batch's
	// placeholder if it still holds it.
	MaterializeNothing Materialize = iota
	// MaterializeResult: the render's content, as an ordinary durable
	// occurrence known by Decision.EventID, carrying the batch's tags and
	// latest origin, delivered to the batch's audience (§5.2).
	MaterializeResult
	// MaterializeFallback: the batch's fallback (Decision.Fallback, as the
	// caller stored it), likewise.
	MaterializeFallback
)

// Cause says why a decision is what it is, for the audit.
type Cause uint8

const (
	// CauseRendered: the render's result.
	CauseRendered Cause = iota + 1
	// CauseEmpty: an empty result; nothing appended.
	CauseEmpty
	// CauseFailed: the render failed; the fallback.
	CauseFailed
	// CauseLapsed: authority lapsed; the batch is dropped (§5.4 rule 4).
	CauseLapsed
	// CauseUnrendered: the caller fell back without rendering (Fallback).
	CauseUnrendered
	// CauseEvicted: the subject was evicted (§11).
	CauseEvicted
	// CauseRecovered: recovery after a restart (Recover).
	CauseRecovered
	// CauseCancelled: the completion of a render whose batch a retraction
	// or plain occurrence cancelled: discarded (§5.4 rule 6).
	CauseCancelled
	// CauseLate: a completion after the batch was closed (a result after
	// its fallback, or a second completion): discarded (§5.4 rule 3).
	CauseLate
	// CauseUnknown: a completion of a render the table does not know (or
	// no longer remembers): discarded.
	CauseUnknown
)

// String is for logs.
func (c Cause) String() string {
	switch c {
	case CauseRendered:
		return "rendered"
	case CauseEmpty:
		return "empty"
	case CauseFailed:
		return "failed"
	case CauseLapsed:
		return "lapsed"
	case CauseUnrendered:
		return "unrendered"
	case CauseEvicted:
		return "evicted"
	case CauseRecovered:
		return "recovered"
	case CauseCancelled:
		return "cancelled"
	case CauseLate:
		return "late"
	case CauseUnknown:
		return "unknown"
	}
	return "cause?"
}

// Decision is what to materialize for a batch. Every batch is decided
// exactly once with a Materialize other than nothing at most once; a
// Discarded decision changes nothing and its result goes only to the
// audit (§11).
type Decision struct {
	// Subject is the batch's subject; zero for a render the table does
	// not know.
	Subject Subject
	// RenderID is the render decided, 0 when none was sent.
	RenderID uint64
	// EventID is the batch's latest notice: the materialized occurrence
	// is known by it (the placeholder becomes it).
	EventID string
	// Materialize is what to show.
	Materialize Materialize
	// Fallback is the stored fallback, for MaterializeFallback.
	Fallback json.RawMessage
	// Cause is why.
	Cause Cause
	// Discarded: this completion has no effect; audit its result as
	// discarded.
	Discarded bool
	// Occupant: the materialized occurrence is the subject's occupant,
	// replaceable or removable until consumed (§5.4 rule 7); false: it is
	// ordinary.
	Occupant bool
	// Notices are the batch's retained notice eventIds, oldest first: the
	// notices folded into this materialization.
	Notices []string
	// Dropped counts the older notices the batch had discarded.
	Dropped int
	// Sealed names an earlier materialized occurrence of the subject still
	// unread, now ordinary: it is the baseline of this one and stays
	// (§3.3, vector 49).
	Sealed []string
}

func fallbackOf(key Subject, b *batch, c Cause) Decision {
	return Decision{Subject: key, RenderID: b.renderID, EventID: b.eventID, Materialize: MaterializeFallback,
		Fallback: slices.Clone(b.fallback), Cause: c, Notices: b.noticeIDs(), Dropped: b.dropped}
}

// materialize makes the decided batch the subject's occupant; an earlier
// materialized occupant still unread is sealed as ordinary, treated as
// consumed.
func materialize(s *subject, d *Decision) {
	if o := s.occ; o != nil {
		d.Sealed = append(d.Sealed, o.eventID)
		s.history = s.history.consumed()
	}
	s.occ = &occupant{eventID: d.EventID, kind: occMaterialized}
	d.Occupant = true
}

// Finish decides what a render's completion materializes (RFC-006 §5.4),
// atomically with respect to admissions: the render's batch closes here
// and its occurrence, if any, is the subject's occupant from this call
// on, so a retraction or plain occurrence admitted after it removes or
// replaces it (rule 7), and one admitted before it cancelled the render
// (rule 6). A pending batch opened meanwhile stays pending (rule 2).
//
// The materialized occurrence is then consumed by the request that asked
// for it: the caller calls Consume with Decision.EventID as it assembles.
func (t *Table) Finish(id uint64, out RenderOutcome) Decision {
	key, ok := t.open[id]
	if !ok {
		switch t.closed[id] {
		case closedCancelled:
			return Decision{RenderID: id, Cause: CauseCancelled, Discarded: true}
		case closedFellBack, closedDone:
			return Decision{RenderID: id, Cause: CauseLate, Discarded: true}
		}
		return Decision{RenderID: id, Cause: CauseUnknown, Discarded: true}
	}
	delete(t.open, id)
	b, s := t.lookup(key)
	before := s.liveIDs()
	r := s.rendering
	s.rendering = nil
	d := Decision{Subject: key, RenderID: id, EventID: r.eventID, Notices: r.noticeIDs(), Dropped: r.dropped}
	switch out {
	case Rendered:
		d.Materialize, d.Cause = MaterializeResult, CauseRendered
		materialize(s, &d)
		t.close(id, closedDone)
	case RenderEmpty:
		d.Cause = CauseEmpty
		t.close(id, closedDone)
	case RenderLapsed:
		d.Cause = CauseLapsed
		t.close(id, closedDone)
	default:
		d = fallbackOf(key, r, CauseFailed)
		materialize(s, &d)
		t.close(id, closedFellBack)
	}
	t.settle(b, s, before)
	return d
}

// Fallback materializes a subject's pending batch as its fallback without
// rendering it: the server is disconnected at assembly, or the caller
// will not render (RFC-006 §5.3). False when there is no pending batch.
func (t *Table) Fallback(key Subject) (Decision, bool) {
	b, s := t.lookup(key)
	if s == nil || s.pending == nil {
		return Decision{}, false
	}
	before := s.liveIDs()
	d := fallbackOf(key, s.pending, CauseUnrendered)
	s.pending = nil
	materialize(s, &d)
	t.settle(b, s, before)
	return d, true
}

// Lapse drops a subject's pending batch whose authority lapsed before
// assembly, without a render (RFC-006 §5.4 rule 4): nothing is
// materialized. False when there is no pending batch. A batch whose
// render is open lapses through Finish(id, RenderLapsed).
func (t *Table) Lapse(key Subject) (Decision, bool) {
	b, s := t.lookup(key)
	if s == nil || s.pending == nil {
		return Decision{}, false
	}
	before := s.liveIDs()
	p := s.pending
	s.pending = nil
	t.settle(b, s, before)
	return Decision{Subject: key, EventID: p.eventID, Cause: CauseLapsed, Notices: p.noticeIDs(), Dropped: p.dropped}, true
}

// BatchInfo describes a batch of a binding.
type BatchInfo struct {
	// Subject is the batch's subject.
	Subject Subject
	// EventID is its placeholder, the latest notice's eventId.
	EventID string
	// FeatureSet is the latest notice's feature set.
	FeatureSet string
	// RenderID is its open render; 0 while pending.
	RenderID uint64
}

// Batches lists binding's batches, pending and rendering, sorted by
// subject (a rendering batch before its subject's pending one): what a
// caller checks when authority changes (Lapse) or when it decides what an
// assembly includes.
func (t *Table) Batches(binding string) []BatchInfo {
	var out []BatchInfo
	for _, key := range t.Subjects(binding) {
		s := t.bindings[binding].subjects[key]
		for _, b := range []*batch{s.rendering, s.pending} {
			if b != nil {
				out = append(out, BatchInfo{Subject: key, EventID: b.eventID, FeatureSet: b.featureSet, RenderID: b.renderID})
			}
		}
	}
	return out
}

type closedReason uint8

const (
	closedDone closedReason = iota + 1
	closedFellBack
	closedCancelled
)

// close remembers a closed render, the oldest forgotten past the bound.
func (t *Table) close(id uint64, why closedReason) {
	if _, ok := t.closed[id]; !ok {
		t.closedQ = append(t.closedQ, id)
	}
	t.closed[id] = why
	for len(t.closedQ) > t.maxClosed {
		delete(t.closed, t.closedQ[0])
		t.closedQ = t.closedQ[1:]
	}
	t.version++
}
