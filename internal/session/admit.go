package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/advert"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// requiredCapability maps each privileged inbound method to the capability
// admission checks (SPEC §14.1, §9, §11, §12).
var requiredCapability = map[string]string{
	protocol.MethodPushEvent:        "pushEvents",
	protocol.MethodChannelsRegister: "channels.register",
	protocol.MethodChannelsChanged:  "channels.register",
	protocol.MethodChannelsList:     "channels.register",
	protocol.MethodChannelsIncoming: "channels.incoming",
	protocol.MethodInferenceRequest: "inferenceRequest",
	protocol.MethodModelInfo:        "modelInfo",
}

// Answers to methods MCPL 0.5.0 removed: each says what replaced it.
var removedMethods = map[string]string{
	protocol.MethodFeatureSetsChanged: "featureSets/changed was removed in MCPL 0.5.0: a server announces a changed manifest with mcpl/manifestChanged (SPEC §17)",
	protocol.MethodScopeElevate:       "scope/elevate was removed in MCPL 0.5.0 with scoped access (SPEC §7): what a server may do is the grant the host computes",
}

// serve is the connection's handler: admission of the server's privileged
// methods (docs/admission.md).
//
// SPEC §5.3 says to reject privileged methods until the initial policy
// exchange completes. Several real servers send channels/register right
// after initialize and give up on a rejection (reference/interop.md item
// 6), so this host deviates where it can help and nowhere else: a method
// whose capability host policy could grant is held until the grant is
// known, then admitted or rejected against it, in arrival order; a method
// whose capability it can never grant on this connection (not implemented,
// disabled by host policy, not advertised by the server) is rejected at
// once, held or not. Nothing is admitted that the grant does not allow.
// Everything else (ping, tools/list_changed) is answered at once, held
// messages or not: holding is a side queue, not a stop of the connection's
// dispatch.
func (c *conn) serve(ctx context.Context, req *wire.Request) (any, error) {
	if msg, ok := removedMethods[req.Method]; ok {
		return nil, &protocol.Error{Code: protocol.CodeMethodNotFound, Message: msg}
	}
	capability, privileged := requiredCapability[req.Method]
	if !privileged {
		return c.s.serveHost(ctx, req)
	}
	if !grant.Grantable(capability, c.s.cfg.Implemented, c.s.cfg.Policy) {
		return c.s.deny(req, capability, c.s.neverGranted(capability))
	}
	if why := c.notOffered(capability); why != "" {
		return c.s.deny(req, capability, why)
	}
	switch held, full := c.hold(ctx, req); {
	case held:
		return nil, nil // answered when the policy settles
	case full:
		return c.s.tooManyHeld(req)
	}
	return c.admit(ctx, req, capability)
}

// heldMsg is a privileged message waiting for the policy to settle.
type heldMsg struct {
	ctx     context.Context
	req     *wire.Request
	reply   func(any, error) // nil for a notification
	release func()           // lets its bytes go from the connection's budget
}

// hold queues req while the policy exchange is open, or while what was
// held is being decided (so that order holds); it reports whether it did.
// Beyond MaxHeld it does not: a request is then refused at once (full is
// set) and a notification dropped.
func (c *conn) hold(ctx context.Context, req *wire.Request) (held, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.settled && !c.draining {
		return false, false
	}
	if len(c.held) >= c.s.cfg.MaxHeld {
		return false, true
	}
	// Held, it still counts against the connection's inbound byte budget
	// (wire.Options.MaxQueuedBytes): a server cannot make this host keep
	// more than that, however many messages it sends before the policy.
	m := heldMsg{ctx: ctx, req: req, release: req.Hold()}
	if !req.IsNotification() {
		m.reply = req.Defer()
	}
	c.held = append(c.held, m)
	return true, false
}

// tooManyHeld refuses a request (drops a notification) beyond MaxHeld.
func (s *Session) tooManyHeld(req *wire.Request) (any, error) {
	if req.IsNotification() {
		s.limits.Log(&logHeldFullNotification, "method", req.Method)
		s.observe(req, false, "dropped: too many messages are waiting for the policy exchange", nil, nil)
		return nil, nil
	}
	s.limits.Log(&logHeldFullRequest, "method", req.Method)
	e := &protocol.Error{Code: wire.CodeOverloaded, Message: "request refused: too many requests are waiting for the policy exchange; try again later"}
	s.observe(req, false, e.Message, nil, e)
	return nil, e
}

// heldRequests returns the methods of the requests held now.
func (c *conn) heldRequests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.held {
		if m.reply != nil {
			out = append(out, m.req.Method)
		}
	}
	return out
}

// settle installs the connection's grant, with why policy is not
// established ("" when it is), and decides what was held, in order, on
// the calling goroutine; what arrives meanwhile queues behind.
func (c *conn) settle(g grant.Grant, notEstablished string) {
	c.mu.Lock()
	c.grant, c.notEstablished = g, notEstablished
	c.settled, c.draining = true, true
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if len(c.held) == 0 {
			c.draining = false
			c.mu.Unlock()
			return
		}
		m := c.held[0]
		c.held[0] = heldMsg{}
		c.held = c.held[1:]
		c.mu.Unlock()
		res, err := c.admit(m.ctx, m.req, requiredCapability[m.req.Method])
		if m.reply != nil {
			m.reply(res, err)
		}
		m.release()
	}
}

// admissionGrant returns the grant admission uses now, with why policy is
// not established ("" when it is). A connection that has ended has no
// grant: nothing is admitted on a connection that is gone.
func (c *conn) admissionGrant() (grant.Grant, string) {
	if c.peer.Err() != nil {
		return emptyGrant(), whyClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grant, c.notEstablished
}

// admit decides a privileged message against the grant and, admitted,
// hands it to its consumer.
func (c *conn) admit(ctx context.Context, req *wire.Request, capability string) (any, error) {
	g, why := c.admissionGrant()
	if !g.Has(capability) {
		reason := fmt.Sprintf("%s rejected: capability %q is not in the effective grant", req.Method, capability)
		if why != "" {
			reason = fmt.Sprintf("%s rejected: capability %q is not granted: policy is not yet established on this connection (%s)", req.Method, capability, why)
		}
		return c.s.deny(req, capability, reason)
	}
	if req.Method == protocol.MethodPushEvent {
		res, err := c.s.pushEvent(ctx, req, g)
		if req.IsNotification() {
			// Nothing answers a notification, and a rejection is
			// already logged: no second line about a handler error.
			return nil, nil
		}
		return res, err
	}
	res, err := c.s.serveHost(ctx, req)
	if errors.Is(err, wire.ErrMethodNotFound) {
		err = &protocol.Error{Code: protocol.CodeMethodNotFound, Message: notImplemented(req.Method)}
	}
	c.s.observe(req, true, "", res, err)
	return res, err
}

// neverGranted says why host policy can never grant capability.
func (s *Session) neverGranted(capability string) string {
	if !grant.Known(capability) || !slices.Contains(s.cfg.Implemented, capability) {
		return fmt.Sprintf("capability %q is not implemented by this host", capability)
	}
	return fmt.Sprintf("capability %q is disabled by this host's policy", capability)
}

// deny refuses a privileged method: a request gets -32002 naming the
// capability, with reason (the method is named in front unless reason
// already starts with it); a notification is dropped with a log line.
func (s *Session) deny(req *wire.Request, capability, reason string) (any, error) {
	if len(reason) < len(req.Method) || reason[:len(req.Method)] != req.Method {
		reason = req.Method + " rejected: " + reason
	}
	e := protocol.NewError(protocol.CodeCapabilityDenied, reason, map[string]string{"capability": capability})
	s.observe(req, false, reason, nil, e)
	if req.IsNotification() {
		s.limits.LogFor(&logDeniedNotification, req.Method, "method", req.Method, "capability", capability, "reason", reason)
		return nil, nil
	}
	s.limits.LogFor(&logDeniedRequest, req.Method, "method", req.Method, "capability", capability, "reason", reason)
	return nil, e
}

// notImplemented says why an admitted method gets no answer of substance.
func notImplemented(method string) string {
	if method == protocol.MethodModelInfo {
		return "model/info unavailable: this host has no truthful model information (no context window source) to give"
	}
	return method + " is not implemented by this host"
}

// serveHost hands a method to the host's handler.
func (s *Session) serveHost(ctx context.Context, req *wire.Request) (any, error) {
	if req.Method == protocol.MethodPing {
		// MCP: the receiver answers at once with an empty result, whoever
		// embeds the session. A server that pings to keep its session
		// alive closes one whose ping fails.
		return struct{}{}, nil
	}
	if s.cfg.Handler == nil {
		return nil, wire.ErrMethodNotFound
	}
	return s.cfg.Handler.Serve(ctx, req)
}

// observe tells OnInbound of a decided message and what it was answered.
func (s *Session) observe(req *wire.Request, admitted bool, reason string, res any, err error) {
	if s.cfg.OnInbound == nil {
		return
	}
	in := Inbound{Method: req.Method, Request: !req.IsNotification(), Admitted: admitted, Reason: reason, Params: req.Params}
	if in.Request {
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			in.Answer, _ = json.Marshal(pe)
			in.AnswerIsError = true
		case err != nil:
			in.Answer, _ = json.Marshal(protocol.Error{Code: protocol.CodeInternalError, Message: "internal error"})
			in.AnswerIsError = true
		default:
			in.Answer, _ = json.Marshal(res)
		}
	}
	s.cfg.OnInbound(in)
}

// pushEvent validates an admitted push/event (SPEC §9, §6.5), answers a
// retried eventId as it answered the first, and hands a new event to
// OnPushEvent for its answer.
func (s *Session) pushEvent(ctx context.Context, req *wire.Request, g grant.Grant) (any, error) {
	var p protocol.PushEventParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return s.rejectPush(req, "", protocol.NewError(protocol.CodeInvalidParams, "Invalid params: push/event params are not an object of the right shape", nil))
	}
	if len(p.EventID) > MaxEventIDBytes {
		return s.rejectPush(req, "", protocol.NewError(protocol.CodeInvalidParams,
			fmt.Sprintf("Invalid params: the eventId is %d bytes; this host takes eventIds of at most %d bytes", len(p.EventID), MaxEventIDBytes), nil))
	}
	if p.FeatureSet == "" {
		return s.rejectPush(req, p.EventID, protocol.NewError(protocol.CodeFeatureSetNotEnabled, "Feature set not enabled: push/event must name its feature set", map[string]string{"featureSet": ""}))
	}
	fs, declared := g.FeatureSet(p.FeatureSet)
	if !declared {
		return s.rejectPush(req, p.EventID, protocol.NewError(protocol.CodeUnknownFeatureSet, fmt.Sprintf("Unknown feature set: %q is not declared", p.FeatureSet), map[string]string{"featureSet": p.FeatureSet}))
	}
	if fs.State != grant.StateEnabled {
		return s.rejectPush(req, p.EventID, protocol.NewError(protocol.CodeFeatureSetNotEnabled, fmt.Sprintf("Feature set not enabled: %q is disabled (%s)", p.FeatureSet, fs.Reason), map[string]string{"featureSet": p.FeatureSet}))
	}
	if p.EventID == "" {
		return s.rejectPush(req, "", protocol.NewError(protocol.CodeInvalidParams, "Invalid params: push/event requires an eventId", nil))
	}
	if prior, seen := s.dedupe.get(p.EventID); seen {
		s.limits.Log(&logEventRetried, "event_id", p.EventID)
		s.observe(req, true, "duplicate eventId: answered as before", prior, nil)
		return prior, nil
	}
	res := protocol.PushEventResult{Accepted: false, Reason: "this host has nothing to deliver events to"}
	if s.cfg.OnPushEvent != nil {
		var err error
		res, err = s.cfg.OnPushEvent(ctx, PushEvent{Server: s.cfg.ID, Params: p, Raw: req.Params})
		var refusal *protocol.Error
		if errors.As(err, &refusal) {
			// The consumer refused the event as the server sent it (its
			// content shows nothing): answered as that error, and not
			// remembered, like any rejection.
			return s.rejectPush(req, p.EventID, refusal)
		}
		if err != nil {
			s.log.Error("push/event consumer failed; the event is not remembered, so a retry is handled anew",
				slog.String("event_id", p.EventID), slog.String("error", err.Error()))
			s.observe(req, true, "", nil, err)
			return nil, err
		}
	}
	s.dedupe.put(p.EventID, res)
	s.observe(req, true, "", res, nil)
	return res, nil
}

func (s *Session) rejectPush(req *wire.Request, eventID string, e *protocol.Error) (any, error) {
	s.limits.Log(&logPushRejected, slog.String("event_id", eventID), slog.Int64("code", e.Code), slog.String("reason", wire.OneLine(e.Message, 300)))
	s.observe(req, false, e.Message, nil, e)
	return nil, e
}

// dedupe remembers the answers to recent eventIds across the session's
// connections, bounded by count (dedupeKeep) and by bytes (dedupeBytes, of
// the ids and the answers' words); the oldest go first. An id longer than
// MaxEventIDBytes never reaches it: such an event is refused.
type dedupe struct {
	mu    sync.Mutex
	seen  map[string]protocol.PushEventResult
	order []string
	bytes int
}

// Bounds of the push-event dedupe set.
const (
	// MaxEventIDBytes bounds a push event's eventId; a longer one is
	// refused with -32602 and the reason.
	MaxEventIDBytes = 512
	dedupeKeep      = 4096
	dedupeBytes     = 1 << 20
)

func (d *dedupe) get(id string) (protocol.PushEventResult, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.seen[id]
	return r, ok
}

func entrySize(id string, r protocol.PushEventResult) int {
	return len(id) + len(r.Reason) + len(r.InferenceID)
}

func (d *dedupe) put(id string, r protocol.PushEventResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = make(map[string]protocol.PushEventResult)
	}
	if old, ok := d.seen[id]; ok {
		d.bytes -= entrySize(id, old)
		d.order = slices.DeleteFunc(d.order, func(x string) bool { return x == id })
	}
	size := entrySize(id, r)
	for len(d.order) > 0 && (len(d.order) >= dedupeKeep || d.bytes+size > dedupeBytes) {
		oldest := d.order[0]
		d.bytes -= entrySize(oldest, d.seen[oldest])
		delete(d.seen, oldest)
		d.order[0] = ""
		d.order = d.order[1:]
	}
	d.seen[id] = r
	d.order = append(d.order, id)
	d.bytes += size
}

// HostAdvertisement is the host's experimental.mcpl for initialize: MCPL
// 0.5, each implemented path as a nested member, and featureSets. It says
// what this host implements, no more and no less (advert.Marshal).
func HostAdvertisement(implemented []string) json.RawMessage {
	var ordered []string
	for _, p := range grant.Vocabulary() {
		if slices.Contains(implemented, p) {
			ordered = append(ordered, p)
		}
	}
	return advert.Marshal(protocol.MCPLVersion05, ordered, json.RawMessage("true"))
}

// withCoalescing adds the eventCoalescing member (RFC-006 §10) to an
// advertisement HostAdvertisement made; ec nil leaves it as it is.
func withCoalescing(ad json.RawMessage, ec *protocol.EventCoalescing) json.RawMessage {
	if ec == nil {
		return ad
	}
	b, err := json.Marshal(ec)
	if err != nil || len(ad) < 2 || ad[len(ad)-1] != '}' {
		return ad // a window below the least is a caller's bug; advertise nothing
	}
	out := append(slices.Clone(ad[:len(ad)-1]), `,"`+protocol.EventCoalescingMember+`":`...)
	out = append(out, b...)
	return append(out, '}')
}
