package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/coalesce"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/inbox"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// Event coalescing (RFC-006) as this host serves it: the executor around
// internal/coalesce's pure table. It owns the table, the rows of the
// inbox that carry coalesced occurrences, and their durable state.
//
// What is served, and advertised (principle 9): every part, on push/event
// and channels/incoming (replacement, retraction, initial), deferred
// events with push/render, and channel-scoped push; docs/coalescing.md
// says it for server authors and operators.
//
// The decisions this host takes where RFC-006 leaves the choice:
//
//   - A binding is a configured server as configured: its id and its
//     endpoint (see bind).
//   - Every agent reads one inbox, so an occurrence reaches every agent
//     that reads its server's events, and a replacement the same ones: the
//     audience narrowing of §3.2 holds by construction. Consumption is
//     shared (internal/coalesce's profile): the first agent whose request
//     includes an occurrence consumes it for all.
//   - An occurrence is consumed when a request is assembled with it: the
//     model call of a turn, and also a record between turns, when an
//     agent keeps what it read without a model call (a batched event once
//     its hold is over, internal/agent): what is in a history can't be
//     taken out of it.
//   - Recovery after a restart is conservative: every unread occurrence
//     is sealed as ordinary, and every batch falls back.
//   - A render's deadline is Options.RenderTimeout, 5 s by default;
//     render results are checked as pushed content is (content that shows
//     nothing falls back), and the server's authority (pushEvents and the
//     feature set enabled, or for a channel's subject the channel
//     registered and channels.incoming) is checked again when the result
//     comes, after a dropped connection once it is back.
//   - An inference/request from a server while one of its renders is open
//     is refused (-32600, §10.7 loop prevention).
//   - The state is stored whole with each decision (store.SaveState), a
//     cost that grows with the subjects tracked.
type coalescer struct {
	h       *Host
	log     *slog.Logger
	timeout time.Duration
	adv     protocol.EventCoalescing

	mu  sync.Mutex
	tab *coalesce.Table
	// rows are the inbox rows of coalesced occurrences the table has
	// decided something about that a reader must know: by binding, then
	// eventId.
	rows map[string]map[string]*coRow
	// ident is each channel subject's platform message (identKey).
	ident map[string]msgIdent
	// tags are each server's binding tag (bind), by server id.
	tags map[string]string
	// rendering counts each server's open renders (inference/request is
	// refused meanwhile); waits are closed when a render ends, by its
	// binding and placeholder eventId, for the assemblies waiting on it.
	rendering map[string]int
	waits     map[string]chan struct{}
}

// coRow is what a reader must know of a coalesced occurrence's inbox row.
type coRow struct {
	Seq int64 `json:"seq"`
	// At is when it came; Since when the first occurrence it displaced,
	// directly or through others, came: the wake's postponement is
	// counted from there (§4.2).
	At    time.Time `json:"at"`
	Since time.Time `json:"since"`
	// Withdrawn: removed unread (replaced, retracted, folded, cancelled,
	// or a batch that materialized nothing): never shown.
	Withdrawn bool `json:"withdrawn,omitempty"`
	// By is the Seq of the row that replaced it, when one did.
	By int64 `json:"by,omitempty"`
	// Materialized: a batch's placeholder decided; Content is the render's
	// result, nil for its fallback (the row's own content).
	Materialized bool              `json:"materialized,omitempty"`
	Content      []json.RawMessage `json:"content,omitempty"`
}

// coStateName is the store state the coalescer keeps.
const coStateName = "coalesce"

// coState is the coalescer's durable state.
type coState struct {
	Table coalesce.State               `json:"table"`
	Rows  map[string]map[string]*coRow `json:"rows"`
	Ident map[string]msgIdent          `json:"ident,omitempty"`
}

// DefaultRenderTimeout bounds a push/render (RFC-006 §5.3).
const DefaultRenderTimeout = 5 * time.Second

// advertisedCoalescing is what this host advertises (see coalescer).
func advertisedCoalescing() protocol.EventCoalescing {
	return protocol.AllEventCoalescing()
}

// newCoalescer loads the coalescer's state from st and recovers it.
func newCoalescer(ctx context.Context, h *Host, st store.Store, opts Options) (*coalescer, error) {
	topts := coalesce.Options{MaxSubjects: opts.CoalesceSubjects}
	c := &coalescer{h: h, log: h.log, timeout: opts.RenderTimeout, adv: advertisedCoalescing(),
		tab: coalesce.New(topts), rows: map[string]map[string]*coRow{}, ident: map[string]msgIdent{}, tags: map[string]string{},
		rendering: map[string]int{}, waits: map[string]chan struct{}{}}
	if c.timeout <= 0 {
		c.timeout = DefaultRenderTimeout
	}
	body, ok, err := st.LoadState(ctx, coStateName)
	if err != nil {
		return nil, fmt.Errorf("host: reading the coalescing state: %w", err)
	}
	if !ok {
		return c, nil
	}
	var s coState
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("host: the coalescing state in the store is not readable: %w", err)
	}
	tab, err := coalesce.Import(s.Table, topts)
	if err != nil {
		return nil, fmt.Errorf("host: the coalescing state in the store is not readable: %w", err)
	}
	c.tab = tab
	for server, rows := range s.Rows {
		c.rows[server] = rows
	}
	for k, id := range s.Ident {
		c.ident[k] = id
	}
	rec := tab.Recover(coalesce.RecoverConservative)
	for _, d := range rec.Fallbacks {
		c.decided(d, nil)
	}
	if len(rec.Sealed) > 0 || len(rec.Fallbacks) > 0 {
		h.log.Info("coalesced events kept across the restart are ordinary now: none of them can be replaced, and each deferred batch shows its fallback",
			"sealed", len(rec.Sealed), "fallbacks", len(rec.Fallbacks))
	}
	return c, c.save(ctx)
}

// save makes the state durable; the caller holds mu (or owns c alone).
func (c *coalescer) save(ctx context.Context) error {
	b, err := json.Marshal(coState{Table: c.tab.Export(), Rows: c.rows, Ident: c.ident})
	if err != nil {
		return err
	}
	return c.h.store.SaveState(ctx, coStateName, b)
}

func (c *coalescer) row(server, id string) *coRow {
	return c.rows[server][id]
}

func (c *coalescer) setRow(server, id string, r *coRow) {
	m := c.rows[server]
	if m == nil {
		m = map[string]*coRow{}
		c.rows[server] = m
	}
	m[id] = r
}

// errCoalesceInvalid refuses a push/event whose coalesce member is
// malformed, or uses a part this host does not serve (RFC-006 §13).
func errCoalesceInvalid(inv *coalesce.Invalid) error {
	return protocol.NewError(protocol.CodeInvalidParams, "Invalid params: coalesce."+inv.Error(),
		map[string]string{"reason": protocol.ReasonCoalesceInvalid, "field": "coalesce." + inv.Field})
}

// admit decides a coalesced push event, keeps what it delivers in the
// inbox and the decision in the store, and answers. m is the event's
// inbox row as an ordinary event would have it.
func (c *coalescer) admit(ctx context.Context, ev session.PushEvent, m store.Message) (protocol.PushEventResult, error) {
	spec, inv := coalesce.Parse(ev.Params.Coalesce, coalesce.LanePush, ev.Params.EventID, c.adv)
	if inv != nil {
		return protocol.PushEventResult{}, errCoalesceInvalid(inv)
	}
	hasNotice := content.Shows(ev.Params.Payload.Content)
	if !spec.Retract && !hasNotice {
		return protocol.PushEventResult{}, errEmptyEvent
	}
	if spec.ChannelID != "" {
		// Channel scope (§3.2): admitted as a channels/incoming message
		// of that channel would be, now; never inferred from an origin.
		directed, ok := c.h.channels.Registered(ev.Server, spec.ChannelID)
		if !ok || !c.h.grantOf(ev.Server).Has("channels.incoming") {
			return protocol.PushEventResult{}, errChannelScope(spec.ChannelID, ok)
		}
		m.Channel, m.Directed = spec.ChannelID, directed
	} else {
		c.h.placePush(ctx, &m, ev.Params.Origin)
	}
	binding := c.binding(ev.Server)
	m.EventID = qualify(binding, ev.Params.EventID)
	ts := ev.Params.Timestamp
	if ts == "" {
		ts = m.At.Format(time.RFC3339Nano)
	}
	reply, err := c.decide(ctx, m, coalesce.Admission{Binding: binding, Lane: coalesce.LanePush, FeatureSet: ev.Params.FeatureSet,
		EventID: ev.Params.EventID, Timestamp: ts, Spec: spec, HasNotice: hasNotice, WindowMs: c.adv.RetryWindow()})
	if err != nil {
		return protocol.PushEventResult{}, err
	}
	return protocol.PushEventResult{Accepted: true, Coalesce: &reply}, nil
}

// Incoming decides a coalesced channels/incoming message (internal/channels
// validated the rest of it).
func (c *coalescer) Incoming(ctx context.Context, m store.Message, eventID string, raw json.RawMessage) (protocol.IncomingResult, error) {
	spec, inv := coalesce.Parse(raw, coalesce.LaneIncoming, eventID, c.adv)
	if inv != nil {
		c.log.Debug("a channel message's coalesce member is malformed; the message was not accepted", "server", m.Server, "channel", m.Channel, "event_id", eventID, "problem", inv.Error())
		return protocol.IncomingResult{Reason: protocol.ReasonCoalesceInvalid}, nil
	}
	binding := c.binding(m.Server)
	m.EventID = qualify(binding, eventID)
	reply, err := c.decide(ctx, m, coalesce.Admission{Binding: binding, Lane: coalesce.LaneIncoming, ChannelID: m.Channel,
		EventID: eventID, Timestamp: m.At.Format(time.RFC3339Nano), Spec: spec, HasNotice: true, WindowMs: c.adv.RetryWindow()})
	var pe *protocol.Error
	if errors.As(err, &pe) {
		// The store failed: the whole request is refused, as an
		// ordinary one is.
		return protocol.IncomingResult{}, pe
	}
	if err != nil {
		return protocol.IncomingResult{}, err
	}
	return protocol.IncomingResult{Accepted: true, Coalesce: &reply}, nil
}

// decide plans an admission, keeps the row m it delivers, commits, and
// applies what it removed; the answer's coalesce member, or the error to
// answer.
func (c *coalescer) decide(ctx context.Context, m store.Message, adm coalesce.Admission) (protocol.CoalesceResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	plan, err := c.tab.Plan(m.At, adm)
	if err != nil {
		c.log.Error("a coalesced event could not be decided", "server", adm.Binding, "event_id", adm.EventID, "error", err.Error())
		return protocol.CoalesceResult{}, &protocol.Error{Code: protocol.CodeInternalError, Message: "this host could not decide the coalesced event, so it was not accepted"}
	}
	res := plan.Result()
	server := serverOf(adm.Binding)
	if res.Duplicate {
		c.h.metrics.Coalesced(server, "retry")
		return res.Reply, nil
	}
	key := identKey(res.Subject)
	if res.Subject.Scope == coalesce.ScopeChannel {
		if adm.Lane == coalesce.LaneIncoming {
			c.ident[key] = msgIdent{MessageID: m.MessageID, ThreadID: m.ThreadID}
		} else if id, ok := c.ident[key]; ok {
			// An edit pushed into a channel answers as its message (§9.2,
			// vector 45): the same reply target and thread.
			m.MessageID, m.ThreadID = id.MessageID, id.ThreadID
		}
	}
	since := m.At
	for _, rm := range res.Removed {
		if r := c.row(adm.Binding, rm.EventID); r != nil {
			since = earliest(since, r.Since)
		}
	}
	if res.Deliver != coalesce.DeliverNone {
		seq, err := c.h.keep(ctx, m.Server, adm.EventID, m)
		if err != nil {
			return protocol.CoalesceResult{}, err
		}
		m.Seq = seq
	}
	if err := c.tab.Commit(plan); err != nil {
		// Nothing changed the table since the plan: mu is held.
		c.log.Error("a coalesced event's decision could not be applied", "server", adm.Binding, "event_id", adm.EventID, "error", err.Error())
		return protocol.CoalesceResult{}, &protocol.Error{Code: protocol.CodeInternalError, Message: "this host could not apply the coalesced event, so it was not accepted"}
	}
	for _, rm := range res.Removed {
		r := c.row(adm.Binding, rm.EventID)
		if r == nil {
			r = &coRow{}
			c.setRow(adm.Binding, rm.EventID, r)
		}
		r.Withdrawn, r.By = true, m.Seq
		c.h.metrics.Removed(server, rm.Reason.String())
		c.log.Debug("a coalesced event leaves delivery unread", "server", server, "event_id", rm.EventID, "why", rm.Reason.String(), "by", adm.EventID)
	}
	c.h.metrics.Coalesced(server, res.Reply.Outcome)
	if res.Deliver != coalesce.DeliverNone && m.Seq > 0 {
		c.setRow(adm.Binding, adm.EventID, &coRow{Seq: m.Seq, At: m.At, Since: since})
	}
	if err := c.save(ctx); err != nil {
		c.log.Error("the coalescing state could not be stored; the event is delivered, and a restart may treat a retry of it as new", "server", adm.Binding, "event_id", adm.EventID, "error", err.Error())
	}
	return res.Reply, nil
}

// msgIdent is the platform message a channel subject's occurrences are:
// the reply target, and its thread.
type msgIdent struct {
	MessageID string `json:"messageId"`
	ThreadID  string `json:"threadId,omitempty"`
}

// identKey names a subject in coalescer.ident.
func identKey(s coalesce.Subject) string {
	return s.Binding + "\x00" + string(s.Scope) + "\x00" + s.ScopeID + "\x00" + s.Key
}

// errChannelScope refuses a channel-scoped push its server may not send
// into that channel now (RFC-006 §3.2).
func errChannelScope(channel string, registered bool) error {
	why := "the channel is not registered by this server"
	if registered {
		why = "channels.incoming is not in this server's grant"
	}
	return protocol.NewError(protocol.CodeChannelNotPermitted, fmt.Sprintf("Channel not permitted: coalesce.channelId %q: %s, so the event was not accepted", channel, why),
		map[string]string{"channelId": channel})
}

// grantOf is server's grant now; empty when it is not connected.
func (h *Host) grantOf(server string) grant.Grant {
	h.mu.Lock()
	srv := h.servers[server]
	h.mu.Unlock()
	if srv == nil || srv.sess == nil {
		return grant.Grant{}
	}
	return srv.sess.Grant()
}

// keep puts a row of server's event or message eventID in the inbox,
// durably, and returns its Seq: 0 for a row that was there already (a
// retry of one kept before a crash), which counts as kept.
func (h *Host) keep(ctx context.Context, server, eventID string, m store.Message) (int64, error) {
	msgs := []store.Message{m}
	var res inbox.Result
	select {
	case res = <-h.inbox.Accept(msgs):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	switch {
	case errors.Is(res.Err, inbox.ErrClosed):
		// Refused at shutdown: no failure of the store.
		h.log.Debug("a push event refused: this host is shutting down", "server", server, "event_id", eventID)
		return 0, &protocol.Error{Code: protocol.CodeInternalError, Message: "this host is shutting down, so the event was not accepted: send it again later"}
	case res.Err != nil:
		// At most a line and a count a window for each server: the store's
		// health logs the failure itself (StoreHealth).
		h.limits.LogFor(&logEventNotStored, server, "server", server, "event_id", eventID, "error", res.Err.Error())
		return 0, &protocol.Error{Code: protocol.CodeInternalError, Message: "this host could not store the event, so it was not accepted: send it again later"}
	}
	return msgs[0].Seq, nil
}

// forget drops what it keeps of rows every reader has consumed: no reader
// reads them again (prune.go).
func (c *coalescer) forget(floor int64, through map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for binding, rows := range c.rows {
		upTo := floor
		if t, ok := through[serverOf(binding)]; ok {
			upTo = t
		}
		maps.DeleteFunc(rows, func(id string, r *coRow) bool {
			_, _, tracked := c.tab.Occurrence(binding, id)
			if r.Seq > 0 && r.Seq <= upTo && !tracked {
				n++
				return true
			}
			return false
		})
	}
	if n > 0 {
		if err := c.save(context.Background()); err != nil {
			c.log.Warn("the coalescing state could not be stored after pruning; it is stored with the next change", "error", err.Error())
		}
	}
}

// A binding (RFC-006 §3.1: what a subject and an occurrence belong to) is
// a configured server as it is configured: its id and a tag of its
// endpoint (its URL, or its command, arguments and directory). A server
// reconfigured under its id to another endpoint is another binding: its
// occurrences can't replace, retract or deduplicate the old one's (vector
// 42), whose unread ones stay, ordinary. An occurrence's row carries its
// binding's tag in its EventID ("tag/eventId"), so the inbox keeps the
// two bindings' same eventIds apart.

// bind records server cfg's binding tag; each connect of it calls it.
func (c *coalescer) bind(cfg config.Server) {
	sum := sha256.Sum256([]byte(cfg.URL + "\x00" + strings.Join(cfg.Argv, "\x00") + "\x00" + cfg.Dir))
	c.mu.Lock()
	c.tags[cfg.ID] = hex.EncodeToString(sum[:4])
	c.mu.Unlock()
}

// binding is server's binding now.
func (c *coalescer) binding(server string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return server + "#" + c.tags[server]
}

// qualify is an occurrence's EventID in its binding's rows.
func qualify(binding, eventID string) string {
	return binding[strings.LastIndexByte(binding, '#')+1:] + "/" + eventID
}

// resolve reads an occurrence's EventID back into its binding and its
// eventId.
func (c *coalescer) resolve(server, occ string) (binding, eventID string) {
	tag, id, ok := strings.Cut(occ, "/")
	if !ok {
		return server + "#", occ
	}
	return server + "#" + tag, id
}

// serverOf is a binding's server id.
func serverOf(binding string) string {
	return binding[:max(strings.LastIndexByte(binding, '#'), 0)]
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
