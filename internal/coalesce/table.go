package coalesce

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
)

// Defaults of Options.
const (
	// DefaultMaxSubjects bounds the subjects tracked per binding.
	DefaultMaxSubjects = 1024
	// MinNotices is the fewest notices a batch retains (RFC-006 §5.1).
	MinNotices = 64
	// DefaultClosedRenders is how many closed renders the table remembers
	// to classify a late completion for the audit.
	DefaultClosedRenders = 4096
)

// Options configures a Table.
type Options struct {
	// MaxSubjects bounds the subjects tracked per binding (RFC-006 §11);
	// 0 means DefaultMaxSubjects. At the bound a new subject first takes
	// the place of the binding's longest-idle subject (one with nothing
	// unconsumed: forgetting it only turns its history to unknown) and,
	// when none is idle, is admitted degraded (Result.Degraded).
	MaxSubjects int
	// MaxNotices is how many notices a batch retains, newest kept; 0 or
	// fewer than MinNotices means MinNotices. A batch holds at most
	// MaxNotices × 4 KiB of data.
	MaxNotices int
	// ClosedRenders bounds the memory of closed render ids; 0 means
	// DefaultClosedRenders. A completion of a render forgotten here is
	// still discarded (CauseUnknown): only its audit label is lost.
	ClosedRenders int
}

// Errors of the table's calls. Each is a caller's mistake or a race the
// caller's serialization should prevent; none is an answer to a server.
var (
	// ErrAdmission: an Admission lacks what every occurrence has.
	ErrAdmission = errors.New("coalesce: malformed admission")
	// ErrStale: the table changed between Plan and Commit.
	ErrStale = errors.New("coalesce: the table changed since the plan")
	// ErrCommitted: the plan was committed already.
	ErrCommitted = errors.New("coalesce: plan already committed")
)

// Table is the coalescing state of a host: every tracked subject, every
// open render, every retry receipt. It is not safe for concurrent use: the
// caller serializes every call (one executor owns it), and applies the
// effects each call returns in the order it returned them.
type Table struct {
	maxSubjects int
	maxNotices  int
	maxClosed   int

	bindings   map[string]*bindingState
	open       map[uint64]Subject // render id → the subject rendering it
	closed     map[uint64]closedReason
	closedQ    []uint64
	nextRender uint64
	receipts   map[receiptKey]receipt
	stamp      uint64 // idle order
	version    uint64 // bumped by every change; invalidates plans
}

type bindingState struct {
	subjects map[Subject]*subject
	live     map[string]Subject // eventId of an occupant or a batch placeholder → its subject
	idle     []idleEntry
	idleHead int
}

type idleEntry struct {
	key   Subject
	stamp uint64
}

type occKind uint8

const (
	occPlain occKind = iota + 1
	occMaterialized
)

type occupant struct {
	eventID string
	kind    occKind
}

type subject struct {
	id           Subject
	history      History
	lastConsumed string
	occ          *occupant // the unconsumed occupant; nil once consumed or sealed
	pending      *batch
	rendering    *batch
	idleStamp    uint64 // its place in the idle queue; 0 while busy
}

func (s *subject) idle() bool { return s.occ == nil && s.pending == nil && s.rendering == nil }

func (s *subject) liveIDs() []string {
	var ids []string
	if s.occ != nil {
		ids = append(ids, s.occ.eventID)
	}
	if s.rendering != nil {
		ids = append(ids, s.rendering.eventID)
	}
	if s.pending != nil {
		ids = append(ids, s.pending.eventID)
	}
	return ids
}

func (s *subject) clone() *subject {
	c := *s
	if s.occ != nil {
		o := *s.occ
		c.occ = &o
	}
	c.pending = s.pending.clone()
	c.rendering = s.rendering.clone()
	return &c
}

// New returns an empty table.
func New(opts Options) *Table {
	t := &Table{
		maxSubjects: opts.MaxSubjects,
		maxNotices:  max(opts.MaxNotices, MinNotices),
		maxClosed:   opts.ClosedRenders,
		bindings:    map[string]*bindingState{},
		open:        map[uint64]Subject{},
		closed:      map[uint64]closedReason{},
		receipts:    map[receiptKey]receipt{},
	}
	if t.maxSubjects <= 0 {
		t.maxSubjects = DefaultMaxSubjects
	}
	if t.maxClosed <= 0 {
		t.maxClosed = DefaultClosedRenders
	}
	return t
}

func (t *Table) binding(name string) *bindingState {
	b := t.bindings[name]
	if b == nil {
		b = &bindingState{subjects: map[Subject]*subject{}, live: map[string]Subject{}}
		t.bindings[name] = b
	}
	return b
}

func (t *Table) lookup(s Subject) (*bindingState, *subject) {
	b := t.bindings[s.Binding]
	if b == nil {
		return nil, nil
	}
	return b, b.subjects[s]
}

// settle brings the binding's indexes up to date after s changed in
// place: before is s.liveIDs() from before the change.
func (t *Table) settle(b *bindingState, s *subject, before []string) {
	for _, id := range before {
		if b.live[id] == s.id {
			delete(b.live, id)
		}
	}
	for _, id := range s.liveIDs() {
		b.live[id] = s.id
	}
	switch {
	case !s.idle():
		s.idleStamp = 0
	case s.idleStamp == 0:
		t.stamp++
		s.idleStamp = t.stamp
		b.idle = append(b.idle, idleEntry{s.id, t.stamp})
		t.compactIdle(b)
	}
	t.version++
}

func (t *Table) forget(b *bindingState, s *subject) {
	for _, id := range s.liveIDs() {
		delete(b.live, id)
	}
	delete(b.subjects, s.id)
	t.version++
}

// oldestIdle returns the binding's longest-idle subject, or nil.
func (b *bindingState) oldestIdle() *subject {
	for _, e := range b.idle[b.idleHead:] {
		if s := b.subjects[e.key]; s != nil && s.idleStamp == e.stamp && s.idle() {
			return s
		}
	}
	return nil
}

// compactIdle drops the idle queue's stale entries once they outnumber
// the subjects, so the queue stays within a small multiple of them.
func (t *Table) compactIdle(b *bindingState) {
	if len(b.idle)-b.idleHead <= 2*len(b.subjects)+32 {
		return
	}
	var q []idleEntry
	for _, e := range b.idle[b.idleHead:] {
		if s := b.subjects[e.key]; s != nil && s.idleStamp == e.stamp && s.idle() {
			q = append(q, e)
		}
	}
	b.idle, b.idleHead = q, 0
}

// Delivery says what the caller does with an admitted occurrence.
type Delivery uint8

const (
	// DeliverNone: the occurrence's content enters no context (a
	// withdrawal whose notice is not needed, or has none).
	DeliverNone Delivery = iota
	// DeliverOrdinary: deliver its content as an ordinary occurrence: a
	// plain occurrence, a deletion notice, or a degraded notice's
	// fallback.
	DeliverOrdinary
	// DeliverBatch: hold it as its batch's placeholder, not model-visible,
	// until the batch is rendered, falls back, or is removed (RFC-006
	// §5.1). The placeholder is known by the notice's eventId.
	DeliverBatch
)

// RemovalReason says why an occurrence was taken out of delivery, for the
// audit record (RFC-006 §11).
type RemovalReason uint8

const (
	// RemovedReplaced: displaced unread by a newer occurrence (§4, §5.1).
	RemovedReplaced RemovalReason = iota + 1
	// RemovedFolded: a batch placeholder whose notice a newer notice
	// joined; the notice stays in the batch, its placeholder goes.
	RemovedFolded
	// RemovedWithdrawn: removed unread by a retraction (§6).
	RemovedWithdrawn
	// RemovedCancelled: a rendering batch cancelled by a retraction or a
	// plain occurrence (§5.4 rule 6): its render's completion, whenever it
	// comes, materializes nothing.
	RemovedCancelled
)

// String is for logs.
func (r RemovalReason) String() string {
	switch r {
	case RemovedReplaced:
		return "displaced"
	case RemovedFolded:
		return "folded"
	case RemovedWithdrawn:
		return "withdrawn"
	case RemovedCancelled:
		return "cancelled"
	}
	return "removal?"
}

// Removal is one occurrence the caller takes out of every context it was
// delivered to, leaving no trace a model can see (RFC-006 §4.1). An
// occurrence removed can no longer be a wake cause: a caller whose
// pending wake rested on it alone drops that wake unless the admitting
// occurrence qualifies in its own right (§4.2).
type Removal struct {
	// EventID names the occurrence (for a batch, its placeholder).
	EventID string
	// Reason is why, for the audit.
	Reason RemovalReason
	// RenderID is the cancelled render, for RemovedCancelled.
	RenderID uint64
	// Notices are a removed batch's retained notice eventIds, oldest
	// first: the audit of notices that will never render.
	Notices []string
	// Dropped counts the older notices a removed batch had discarded.
	Dropped int
}

// Admission is one admitted occurrence carrying coalesce, as the caller
// hands it over after every admission check the same occurrence would
// face without coalesce (enablement, grant, channel authority for
// channel scope; RFC-006 §4): a refused occurrence never reaches the
// table and so touches no subject.
type Admission struct {
	// Binding is the host's server binding identity.
	Binding string
	// Lane is the method it came by.
	Lane Lane
	// FeatureSet is the push/event's feature set; empty on
	// channels/incoming.
	FeatureSet string
	// ChannelID is the channels/incoming message's channelId; ignored on
	// push/event, whose channel scope is Spec.ChannelID alone.
	ChannelID string
	// EventID is the occurrence id; the table knows the occurrence by it
	// (within its binding) from here on.
	EventID string
	// Timestamp is the occurrence's timestamp, returned in push/render;
	// the caller gives its receipt time when the push carried none.
	Timestamp string
	// Spec is the validated coalesce member (Parse).
	Spec Spec
	// HasNotice says a retraction's content is non-empty.
	HasNotice bool
	// Fallback is a notice's fallback as the caller wants it back when the
	// batch falls back: opaque to the table (its payload, tags and origin,
	// or nothing if the caller keeps them in its placeholder).
	Fallback json.RawMessage
	// WindowMs is the retry window advertised to the session admitting it
	// (protocol.EventCoalescing.RetryWindow); anything below
	// protocol.DefaultRetryWindowMs counts as that.
	WindowMs int64
}

// Result is the table's decision on an admission: the reply, and the
// effects the caller applies.
type Result struct {
	// Reply is the coalesce member of the occurrence's result.
	Reply protocol.CoalesceResult
	// Duplicate: a retry of an occurrence admitted within its window.
	// Answer with the original result (Reply) and apply nothing.
	Duplicate bool
	// Subject is the occurrence's subject (zero for a Duplicate).
	Subject Subject
	// Deliver says what to do with the occurrence's content.
	Deliver Delivery
	// Narrow: the occurrence replaces earlier ones, so it may reach only
	// contexts the removed occurrences reached (RFC-006 §3.2, §11); where
	// none of them is still reachable it is delivered nowhere.
	Narrow bool
	// Removed are the occurrences to take out of delivery, oldest first.
	Removed []Removal
	// Degraded: no coalescing slot was free, so the occurrence is
	// ordinary and untracked (RFC-006 §11); never a refusal.
	Degraded bool
	// Evicted is the idle subject forgotten to make room, for the log.
	Evicted *Subject
}

// Plan is an admission decided but not yet applied: Commit applies it,
// and a plan never committed leaves the table as it was. A caller that
// must make the occurrence durable before the server is answered plans,
// writes, and commits only once the write succeeded (nothing else may
// change the table in between; Commit says ErrStale if something did).
type Plan struct {
	version uint64
	done    bool
	result  Result
	binding string
	eventID string
	next    *subject // the subject as it will be; nil when untracked
	evict   *Subject
	cancel  []uint64
	receipt receipt
}

// Result is the plan's decision.
func (p *Plan) Result() Result { return p.result }

// Admit decides and applies an admission at now: Plan, then Commit.
func (t *Table) Admit(now time.Time, in Admission) (Result, error) {
	p, err := t.Plan(now, in)
	if err != nil {
		return Result{}, err
	}
	return p.result, t.Commit(p)
}

// Plan decides an admission at now (RFC-006 §3.1, §4, §5.1, §6, §11)
// without changing the table.
func (t *Table) Plan(now time.Time, in Admission) (*Plan, error) {
	switch {
	case in.Binding == "", in.EventID == "", !in.Spec.Coalesced():
		return nil, fmt.Errorf("%w: binding, eventId and a coalesced spec are required", ErrAdmission)
	case in.Lane != LanePush && in.Lane != LaneIncoming:
		return nil, fmt.Errorf("%w: no lane", ErrAdmission)
	case in.Lane == LanePush && in.FeatureSet == "":
		return nil, fmt.Errorf("%w: a push/event without its feature set", ErrAdmission)
	case in.Lane == LaneIncoming && (in.Spec.Deferred || in.Spec.ChannelID != ""):
		return nil, fmt.Errorf("%w: deferred or channelId on channels/incoming", ErrAdmission)
	case in.Spec.Retract && (in.Spec.Deferred || in.Spec.Initial):
		return nil, fmt.Errorf("%w: retract with deferred or initial", ErrAdmission)
	}
	key := SubjectFor(in.Binding, in.Lane, in.FeatureSet, in.ChannelID, in.Spec)
	if key.ScopeID == "" {
		return nil, fmt.Errorf("%w: no %s to scope the key", ErrAdmission, key.Scope)
	}
	p := &Plan{version: t.version, binding: in.Binding, eventID: in.EventID}
	if r, ok := t.receipt(now, in.Binding, in.EventID); ok {
		p.result = Result{Reply: r, Duplicate: true}
		return p, nil
	}
	p.result.Subject = key
	b, cur := t.lookup(key)
	switch {
	case cur != nil:
		p.next = cur.clone()
	case in.Spec.Retract:
		// A subject never heard of is unknown (§6); tracking it would add
		// nothing, since untracked is unknown already.
	case b != nil && len(b.subjects) >= t.maxSubjects:
		if old := b.oldestIdle(); old != nil {
			ev := old.id
			p.evict, p.result.Evicted = &ev, &ev
			p.next = t.fresh(key, in.Spec)
		}
	default:
		p.next = t.fresh(key, in.Spec)
	}
	switch {
	case p.next == nil && in.Spec.Retract:
		p.result.Reply.Outcome, p.result.Deliver = withdrawal(HistoryUnknown, in.HasNotice)
	case p.next == nil:
		// Degraded: ordinary delivery, as a host without coalescing; a
		// notice delivers its fallback and is never rendered (§11).
		p.result.Reply.Outcome, p.result.Deliver, p.result.Degraded = protocol.CoalesceAppended, DeliverOrdinary, true
	case in.Spec.Retract:
		p.cancel = t.retract(p.next, in, &p.result)
	case in.Spec.Deferred:
		t.notice(p.next, in, &p.result)
	default:
		p.cancel = t.plain(p.next, in, &p.result)
	}
	window := max(in.WindowMs, protocol.DefaultRetryWindowMs)
	at := now.UnixMilli()
	p.receipt = receipt{result: p.result.Reply, admitted: at, expires: at + window}
	return p, nil
}

// fresh is an untracked subject as it starts (§3.3): none on an initial
// occurrence, else unknown.
func (t *Table) fresh(key Subject, spec Spec) *subject {
	s := &subject{id: key}
	if spec.Initial {
		s.history = HistoryNone
	}
	return s
}

// Commit applies a plan.
func (t *Table) Commit(p *Plan) error {
	switch {
	case p.done:
		return ErrCommitted
	case p.version != t.version:
		return ErrStale
	}
	p.done = true
	if p.result.Duplicate {
		return nil
	}
	b := t.binding(p.binding)
	if p.evict != nil {
		t.forget(b, b.subjects[*p.evict])
	}
	for _, id := range p.cancel {
		delete(t.open, id)
		t.close(id, closedCancelled)
	}
	if s := p.next; s != nil {
		var before []string
		if old := b.subjects[s.id]; old != nil {
			before = old.liveIDs()
		}
		b.subjects[s.id] = s
		t.settle(b, s, before)
	}
	t.receipts[receiptKey{p.binding, p.eventID}] = p.receipt
	t.version++
	return nil
}

// supersede removes every unconsumed thing of s, oldest first: its
// occupant, its rendering batch (cancelled), its pending batch. It
// returns the removals and the cancelled render ids.
func supersede(s *subject, why RemovalReason) ([]Removal, []uint64) {
	var out []Removal
	var cancel []uint64
	if s.occ != nil {
		out = append(out, Removal{EventID: s.occ.eventID, Reason: why})
		s.occ = nil
	}
	if r := s.rendering; r != nil {
		out = append(out, Removal{EventID: r.eventID, Reason: RemovedCancelled, RenderID: r.renderID, Notices: r.noticeIDs(), Dropped: r.dropped})
		cancel = append(cancel, r.renderID)
		s.rendering = nil
	}
	if p := s.pending; p != nil {
		out = append(out, Removal{EventID: p.eventID, Reason: why, Notices: p.noticeIDs(), Dropped: p.dropped})
		s.pending = nil
	}
	return out, cancel
}

// plain applies a plain occurrence (§4): it supersedes all older
// unconsumed work, a frozen render and a batch opened during it included
// (§5.4 rule 6), and becomes the occupant.
func (t *Table) plain(s *subject, in Admission, res *Result) []uint64 {
	removed, cancel := supersede(s, RemovedReplaced)
	res.Removed = removed
	switch {
	case len(removed) > 0:
		res.Reply = protocol.CoalesceResult{Outcome: protocol.CoalesceReplaced, PriorEventID: removed[len(removed)-1].EventID}
		res.Narrow = true
	case s.history == HistoryNone:
		res.Reply.Outcome = protocol.CoalesceFirst
	default:
		res.Reply = protocol.CoalesceResult{Outcome: protocol.CoalesceAppended, PriorEventID: s.lastConsumed}
	}
	s.occ = &occupant{eventID: in.EventID, kind: occPlain}
	res.Deliver = DeliverOrdinary
	return cancel
}

// notice applies a deferred notice (§5.1): it joins the pending batch, or
// displaces an unread plain occupant and opens one, or opens one. A
// materialized occurrence still unread is not displaced: a later delta
// is rendered relative to it (§3.3, vector 49). Notices arriving while a
// batch renders open a new one (§5.4 rule 1).
func (t *Table) notice(s *subject, in Admission, res *Result) {
	res.Deliver = DeliverBatch
	if p := s.pending; p != nil {
		res.Removed = []Removal{{EventID: p.eventID, Reason: RemovedFolded}}
		res.Reply = protocol.CoalesceResult{Outcome: protocol.CoalesceReplaced, PriorEventID: p.eventID}
		res.Narrow = true
		p.add(in, t.maxNotices)
		return
	}
	if o := s.occ; o != nil && o.kind == occPlain {
		res.Removed = []Removal{{EventID: o.eventID, Reason: RemovedReplaced}}
		res.Reply = protocol.CoalesceResult{Outcome: protocol.CoalesceReplaced, PriorEventID: o.eventID}
		res.Narrow = true
		s.occ = nil
	} else {
		res.Reply.Outcome = protocol.CoalesceFirst
	}
	s.pending = &batch{}
	s.pending.add(in, t.maxNotices)
}

// retract applies a withdrawal (§6): everything unconsumed goes, and the
// notice is appended iff history is not known to be none. The notice is
// an ordinary occurrence, not the subject's occupant, so the next
// occurrence cannot displace it (vector 34); the slot is empty and the
// history persists.
func (t *Table) retract(s *subject, in Admission, res *Result) []uint64 {
	removed, cancel := supersede(s, RemovedWithdrawn)
	res.Removed = removed
	res.Reply.Outcome, res.Deliver = withdrawal(s.history, in.HasNotice)
	switch {
	case len(removed) > 0:
		res.Reply.PriorEventID = removed[len(removed)-1].EventID
	case res.Reply.Outcome != protocol.CoalesceRetracted:
		res.Reply.PriorEventID = s.lastConsumed
	}
	return cancel
}

// withdrawal is §6's table.
func withdrawal(h History, hasNotice bool) (string, Delivery) {
	switch {
	case h == HistoryNone:
		return protocol.CoalesceRetracted, DeliverNone
	case hasNotice:
		return protocol.CoalesceNoted, DeliverOrdinary
	}
	return protocol.CoalesceConsumed, DeliverNone
}

// Consume records that the occurrences named (by eventId, within binding)
// were included in the assembly of a request (RFC-006 §3.3). A consumed
// occupant is history: the subject's history becomes some, and a later
// plain occurrence appends. It returns how many occupants it sealed;
// eventIds the table does not hold as occupants (ordinary content,
// deletion notices, degraded occurrences, batch placeholders, which are
// never model-visible) are ignored.
//
// Consumption is shared (the conservative rule of §3.3): an occurrence
// consumed in any context is consumed in all, so one render serves every
// recipient and a rendered baseline is never dropped from a context that
// has not read it yet (§3.3, vectors 25, 49).
func (t *Table) Consume(binding string, eventIDs ...string) int {
	b := t.bindings[binding]
	if b == nil {
		return 0
	}
	n := 0
	for _, id := range eventIDs {
		key, ok := b.live[id]
		if !ok {
			continue
		}
		s := b.subjects[key]
		if s.occ == nil || s.occ.eventID != id {
			continue
		}
		before := s.liveIDs()
		s.occ = nil
		s.history = s.history.consumed()
		s.lastConsumed = id
		t.settle(b, s, before)
		n++
	}
	return n
}

// Kind is what the table holds an eventId as (Occurrence).
type Kind uint8

const (
	// KindOccupant: the subject's unconsumed occupant, plain or
	// materialized; replaceable until consumed.
	KindOccupant Kind = iota + 1
	// KindPending: the placeholder of a pending batch: render it
	// (StartRender) before a request includes it.
	KindPending
	// KindRendering: the placeholder of a batch whose render is open.
	KindRendering
)

// Occurrence says what the table holds binding's eventID as, and its
// subject; false when it holds it as nothing (ordinary content).
func (t *Table) Occurrence(binding, eventID string) (Subject, Kind, bool) {
	b := t.bindings[binding]
	if b == nil {
		return Subject{}, 0, false
	}
	key, ok := b.live[eventID]
	if !ok {
		return Subject{}, 0, false
	}
	s := b.subjects[key]
	switch {
	case s.occ != nil && s.occ.eventID == eventID:
		return key, KindOccupant, true
	case s.pending != nil && s.pending.eventID == eventID:
		return key, KindPending, true
	}
	return key, KindRendering, true
}

// Eviction is what evicting a subject leaves the caller to do (RFC-006
// §11).
type Eviction struct {
	// Subject is the subject forgotten; its history is unknown from now.
	Subject Subject
	// Sealed is its unconsumed occupant, now an ordinary occurrence the
	// caller keeps delivering (treated as consumed); empty when none.
	Sealed string
	// Fallbacks are its batches, each materialized as its fallback, as
	// ordinary occurrences: a rendering batch first (its render's
	// completion is discarded), then a pending one.
	Fallbacks []Decision
}

// Evict forgets a subject (an operator's or the caller's choice; the
// table itself evicts only idle subjects, at its bound): its occupant
// becomes ordinary, its batches fall back, its history becomes unknown.
func (t *Table) Evict(key Subject) (Eviction, bool) {
	b, s := t.lookup(key)
	if s == nil {
		return Eviction{}, false
	}
	ev := Eviction{Subject: key}
	if s.occ != nil {
		ev.Sealed = s.occ.eventID
	}
	if r := s.rendering; r != nil {
		delete(t.open, r.renderID)
		t.close(r.renderID, closedFellBack)
		ev.Fallbacks = append(ev.Fallbacks, fallbackOf(key, r, CauseEvicted))
	}
	if p := s.pending; p != nil {
		ev.Fallbacks = append(ev.Fallbacks, fallbackOf(key, p, CauseEvicted))
	}
	t.forget(b, s)
	return ev, true
}

// Inspect returns a copy of a subject's state; false when untracked (its
// history is then unknown).
func (t *Table) Inspect(key Subject) (SubjectState, bool) {
	_, s := t.lookup(key)
	if s == nil {
		return SubjectState{}, false
	}
	return s.export(), true
}

// Subjects returns every tracked subject of binding, sorted.
func (t *Table) Subjects(binding string) []Subject {
	b := t.bindings[binding]
	if b == nil {
		return nil
	}
	out := make([]Subject, 0, len(b.subjects))
	for k := range b.subjects {
		out = append(out, k)
	}
	slices.SortFunc(out, compareSubjects)
	return out
}
