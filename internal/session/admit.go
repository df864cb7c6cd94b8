package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mcpl-go/mcpl/grant"
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

// serve is the connection's handler. A privileged method that arrives
// before the policy exchange settles waits for it here, in arrival order
// with everything behind it, then is admitted or rejected against the
// grant; the wire peer's queue bounds how many wait (Config.MaxHeld), and
// refuses the rest. Answers to this host's own requests keep flowing
// meanwhile: the peer routes them on its reader, not here.
//
// SPEC §5.3 says to reject privileged methods before policy; several real
// servers send channels/register right after initialize and give up on a
// rejection (reference/interop.md item 6). Holding them until the grant is
// known, then deciding, serves those servers without admitting anything the
// grant does not allow.
func (c *conn) serve(ctx context.Context, req *wire.Request) (any, error) {
	if msg, ok := removedMethods[req.Method]; ok {
		return nil, &wire.Error{Code: wire.CodeMethodNotFound, Message: msg}
	}
	capability, privileged := requiredCapability[req.Method]
	if !privileged {
		return c.s.serveHost(ctx, req)
	}
	g, why := c.admissionGrant(ctx)
	if !g.Has(capability) {
		return c.s.deny(req, capability, why)
	}
	if req.Method == protocol.MethodPushEvent {
		res, err := c.s.pushEvent(req, g)
		if req.IsNotification() {
			// Nothing answers a notification, and a rejection is
			// already logged: no second line about a handler error.
			return nil, nil
		}
		return res, err
	}
	c.s.observe(req, true, "")
	res, err := c.s.serveHost(ctx, req)
	if errors.Is(err, wire.ErrMethodNotFound) {
		return nil, &wire.Error{Code: wire.CodeMethodNotFound, Message: notImplemented(req.Method)}
	}
	return res, err
}

// admissionGrant waits until the policy exchange has settled (or the
// connection has ended) and returns the grant admission uses then, with
// why policy is not established ("" when it is). A connection that has
// ended has no grant: nothing is admitted on a connection that is gone, and
// what was held when it ended is refused rather than left waiting.
func (c *conn) admissionGrant(ctx context.Context) (grant.Grant, string) {
	select {
	case <-c.settledCh:
	case <-ctx.Done():
		return emptyGrant(), whyClosed
	}
	if c.peer.Err() != nil {
		return emptyGrant(), whyClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grant, c.notEstablished
}

const whyClosed = "the connection has closed"

// deny refuses a privileged method whose capability is not in the grant:
// a request gets -32002 naming the capability, and saying whether it is
// not granted or policy is not established (notEstablished says why); a
// notification is dropped with a log line.
func (s *Session) deny(req *wire.Request, capability, notEstablished string) (any, error) {
	reason := fmt.Sprintf("%s rejected: capability %q is not in the effective grant", req.Method, capability)
	if notEstablished != "" {
		reason = fmt.Sprintf("%s rejected: capability %q is not granted: policy is not yet established on this connection (%s)", req.Method, capability, notEstablished)
	}
	s.observe(req, false, reason)
	if req.IsNotification() {
		s.log.Info("privileged notification discarded", "method", req.Method, "capability", capability, "reason", reason)
		return nil, nil
	}
	s.log.Info("privileged request refused", "method", req.Method, "capability", capability, "reason", reason)
	return nil, wire.NewError(protocol.CodeCapabilityDenied, reason, map[string]string{"capability": capability})
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
	if s.cfg.Handler == nil {
		return nil, wire.ErrMethodNotFound
	}
	return s.cfg.Handler.Serve(ctx, req)
}

func (s *Session) observe(req *wire.Request, admitted bool, reason string) {
	if s.cfg.OnInbound != nil {
		s.cfg.OnInbound(Inbound{Method: req.Method, Request: !req.IsNotification(), Admitted: admitted, Reason: reason, Params: req.Params})
	}
}

// pushEvent validates an admitted push/event (SPEC §9, §6.5), answers a
// retried eventId as it answered the first, and hands a new event to the
// host.
func (s *Session) pushEvent(req *wire.Request, g grant.Grant) (any, error) {
	var p protocol.PushEventParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return s.rejectPush(req, "", wire.NewError(wire.CodeInvalidParams, "Invalid params: push/event params are not an object of the right shape", nil))
	}
	if p.FeatureSet == "" {
		return s.rejectPush(req, p.EventID, wire.NewError(protocol.CodeFeatureSetNotEnabled, "Feature set not enabled: push/event must name its feature set", map[string]string{"featureSet": ""}))
	}
	fs, declared := g.FeatureSet(p.FeatureSet)
	if !declared {
		return s.rejectPush(req, p.EventID, wire.NewError(protocol.CodeUnknownFeatureSet, fmt.Sprintf("Unknown feature set: %q is not declared", p.FeatureSet), map[string]string{"featureSet": p.FeatureSet}))
	}
	if fs.State != grant.StateEnabled {
		return s.rejectPush(req, p.EventID, wire.NewError(protocol.CodeFeatureSetNotEnabled, fmt.Sprintf("Feature set not enabled: %q is disabled (%s)", p.FeatureSet, fs.Reason), map[string]string{"featureSet": p.FeatureSet}))
	}
	if p.EventID == "" {
		return s.rejectPush(req, "", wire.NewError(wire.CodeInvalidParams, "Invalid params: push/event requires an eventId", nil))
	}
	if prior, seen := s.dedupe.get(p.EventID); seen {
		s.log.Debug("push/event retried; answered as before", "event_id", p.EventID)
		s.observe(req, true, "duplicate eventId: answered as before")
		return prior, nil
	}
	res := protocol.PushEventResult{Accepted: true}
	s.dedupe.put(p.EventID, res)
	s.observe(req, true, "")
	if s.cfg.OnPushEvent != nil {
		s.cfg.OnPushEvent(PushEvent{Server: s.cfg.ID, Params: p, Raw: req.Params})
	}
	return res, nil
}

func (s *Session) rejectPush(req *wire.Request, eventID string, e *wire.Error) (any, error) {
	s.log.Info("push/event rejected", slog.String("event_id", eventID), slog.Int64("code", e.Code), slog.String("reason", e.Message))
	s.observe(req, false, e.Message)
	return nil, e
}

// dedupe remembers the answers to recent eventIds (bounded), across the
// session's connections.
type dedupe struct {
	mu    sync.Mutex
	seen  map[string]protocol.PushEventResult
	order []string
}

const dedupeKeep = 4096

func (d *dedupe) get(id string) (protocol.PushEventResult, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.seen[id]
	return r, ok
}

func (d *dedupe) put(id string, r protocol.PushEventResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = make(map[string]protocol.PushEventResult)
	}
	if len(d.order) >= dedupeKeep {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
	d.seen[id] = r
	d.order = append(d.order, id)
}

// HostAdvertisement is the host's experimental.mcpl for initialize: MCPL
// 0.5, each implemented path as a nested member (MCP's own "tools" left
// out), and featureSets. It says what this host implements, no more and no
// less, read as a server reads it (SPEC §5.1), where true at any level
// means every leaf beneath: so a capability that has sub-capabilities
// ("inferenceRequest" over "inferenceRequest.streaming") is advertised as
// an object, its sub-capabilities true or false, never as a bare true. A
// sub-capability whose parent capability is not implemented cannot be
// said on its own (the object would advertise the parent) and is left
// out.
func HostAdvertisement(implemented []string) json.RawMessage {
	impl := make(map[string]bool, len(implemented))
	for _, p := range implemented {
		impl[p] = true
	}
	root := map[string]any{"version": protocol.MCPLVersion05, "featureSets": true}
	for _, p := range implemented {
		if p == "tools" || orphan(p, impl) {
			continue
		}
		subs := subCapabilities(p)
		if len(subs) == 0 {
			setPath(root, p, true)
			continue
		}
		for _, sub := range subs {
			setPath(root, sub, impl[sub])
		}
	}
	b, _ := json.Marshal(root)
	return b
}

// orphan reports whether a capability path above p is in the vocabulary
// but not implemented.
func orphan(p string, impl map[string]bool) bool {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '.' && grant.Known(p[:i]) && !impl[p[:i]] {
			return true
		}
	}
	return false
}

// subCapabilities returns the vocabulary paths beneath p.
func subCapabilities(p string) []string {
	var out []string
	for _, v := range grant.Vocabulary {
		if len(v) > len(p) && v[:len(p)] == p && v[len(p)] == '.' {
			out = append(out, v)
		}
	}
	return out
}

// setPath sets a dotted path to v in a nested map, making the objects on
// the way. A true already there stays (an implemented sub-capability is
// not turned off by its parent's listing), and an object already there is
// not replaced by a leaf value.
func setPath(m map[string]any, path string, v bool) {
	segs := splitPath(path)
	for i, seg := range segs {
		if i == len(segs)-1 {
			switch cur := m[seg].(type) {
			case map[string]any:
			case bool:
				m[seg] = cur || v
			default:
				m[seg] = v
			}
			return
		}
		next, ok := m[seg].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[seg] = next
		}
		m = next
	}
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}
