package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// conn is one connection of a session: from dial to close.
type conn struct {
	s    *Session
	peer *wire.Peer

	settledCh chan struct{} // closed when the policy exchange has settled
	mu        sync.Mutex
	grant     grant.Grant // this connection's grant, once settled
	// notEstablished says why policy is not established on this
	// connection ("" when it is): admission's words for a refusal.
	notEstablished string
}

// ErrRefusedClose is a server's refusal of the policy with fallback
// "close": the connection is closed and the session does not reconnect.
// Connect's error wraps it, with the server's reason.
var ErrRefusedClose = errors.New("session: the server refused the policy and asked to close")

// Why policy is not established on a connection, as admission says it.
const (
	whyPlainMCP   = "the server does not speak MCPL"
	whyUnreadable = "the server's MCPL advertisement is unreadable"
	whyRefused    = "the server refused the policy"
	whyUnanswered = "the policy exchange was not answered"
)

// connect dials, runs initialize and the policy exchange, and installs the
// connection. It fails when the dial or initialize fails, when the server
// refuses the policy asking to close, and when the connection or ctx ends
// before the exchange settles; any other policy exchange that goes wrong
// leaves MCPL off instead.
func (s *Session) connect(ctx context.Context) error {
	stream, err := s.cfg.Dial(ctx)
	if err != nil {
		return err
	}
	c := &conn{s: s, settledCh: make(chan struct{})}
	c.peer = wire.NewPeer(stream, wire.Options{
		Name:         s.cfg.ID,
		Handler:      wire.HandlerFunc(c.serve),
		Logger:       s.cfg.Logger,
		Timeout:      s.cfg.RequestTimeout,
		Reconnecting: s.Reconnecting,
		// The message being decided is held too: it has left the queue.
		MaxQueued: max(s.cfg.MaxHeld-1, 1),
	})
	st, why, err := c.handshake(ctx)
	if err != nil {
		if c.peer.Err() != nil {
			// The connection ended under the handshake. What it held is
			// refused (admission sees it has ended): let those answers
			// go out while the stream still takes them.
			<-c.peer.Done()
		}
		c.peer.Close()
		if errors.Is(err, ErrRefusedClose) {
			s.mu.Lock()
			s.state = st
			s.mu.Unlock()
		}
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.peer.Close()
		return ErrClosed
	}
	s.conn = c
	s.state = st
	s.mu.Unlock()
	c.settle(st.Grant, why)
	s.wg.Add(1)
	go s.watch(c)
	if s.cfg.OnConnect != nil {
		s.cfg.OnConnect(s)
	}
	return nil
}

// handshake runs initialize, notifications/initialized and, for an MCPL
// server, the policy exchange. why says why policy is not established
// ("" when it is).
func (c *conn) handshake(ctx context.Context) (st State, why string, err error) {
	s := c.s
	params := protocol.InitializeParams{
		ProtocolVersion: protocol.ProtocolVersion,
		Capabilities: protocol.ClientCapabilities{Experimental: map[string]json.RawMessage{
			"mcpl": HostAdvertisement(s.cfg.Implemented),
		}},
		ClientInfo: protocol.Implementation{Name: s.cfg.ClientName, Version: s.cfg.ClientVersion},
	}
	if err := c.peer.Call(ctx, protocol.MethodInitialize, params, &st.Init, wire.WithTimeout(InitializeTimeout)); err != nil {
		return st, "", err
	}
	// Some servers read exactly one message after their initialize answer
	// and drop it unless it is this one: it goes first, before anything.
	if err := c.peer.Notify(ctx, protocol.MethodInitialized, nil); err != nil {
		return st, "", err
	}
	st.Grant = emptyGrant()
	raw := st.Init.Capabilities.MCPL()
	if raw == nil {
		s.log.Info("a plain MCP server: tools work, MCPL is off")
		return st, whyPlainMCP, nil
	}
	ad, err := grant.ParseAdvertisement(raw, st.Init.Capabilities.Tools != nil)
	if err != nil {
		s.log.Warn("the MCPL advertisement is unreadable; MCPL stays off", "error", err.Error())
		return st, whyUnreadable, nil
	}
	st.Advertisement = &ad
	if len(ad.Ignored) > 0 {
		s.log.Info("advertised capabilities this host does not know are ignored", "paths", ad.Ignored)
	}
	g := grant.Compute(ad, s.cfg.Implemented, s.cfg.Policy)
	for _, p := range g.Denied {
		if isDeniedByDefault(p) && !matchesAnyEnable(s.cfg.Policy, p) {
			s.log.Info("advertised but denied by default; enable it explicitly if intended", "path", p)
		}
	}
	res, established := c.exchange(ctx, ad, g)
	st.Policy = &res
	if res.Outcome == OutcomeRefused && res.Fallback == protocol.FallbackClose {
		s.mu.Lock()
		s.reconnect = false
		s.mu.Unlock()
		return st, whyRefused, fmt.Errorf("%w: %s", ErrRefusedClose, res.Reason)
	}
	// A caller that gave up, or a connection that ended, is no policy
	// outcome: the connect failed.
	if err := ctx.Err(); err != nil {
		return st, "", err
	}
	if err := c.peer.Err(); err != nil {
		return st, "", fmt.Errorf("session: the connection closed during the policy exchange: %w", err)
	}
	if established {
		st.Grant = g
		return st, "", nil
	}
	st.Grant = offGrant(g)
	if res.Outcome == OutcomeRefused {
		return st, whyRefused, nil
	}
	return st, whyUnanswered, nil
}

// exchange sends the initial policy (SPEC §5.3) and reads the receipt.
// established says whether the grant now holds.
func (c *conn) exchange(ctx context.Context, ad grant.Advertisement, g grant.Grant) (PolicyResult, bool) {
	log := c.s.log
	params := protocol.FeatureSetsUpdateParams{
		EffectiveCapabilities: g.Effective,
		DeniedCapabilities:    g.Denied,
		Enabled:               g.Enabled(),
		Disabled:              g.Disabled(),
	}
	var rec protocol.PolicyReceipt
	err := c.peer.Call(ctx, protocol.MethodFeatureSetsUpdate, params, &rec, wire.WithTimeout(PolicyTimeout))
	var ce *wire.CallError
	switch {
	case err == nil && rec.Accepted:
		res := PolicyResult{Outcome: OutcomeAccepted, Receipt: &rec}
		if rec.Mode == "degraded" || len(rec.UnavailableFeatures) > 0 {
			res.Outcome = OutcomeDegraded
			for _, u := range rec.UnavailableFeatures {
				log.Warn("feature set degraded by the server", "feature_set", u.FeatureSet, "effect", u.Effect, "missing", u.MissingCapabilities)
			}
		}
		log.Info("policy established", "outcome", res.Outcome, "effective", g.Effective)
		return res, true
	case err == nil:
		res := PolicyResult{Outcome: OutcomeRefused, Fallback: rec.Fallback, Reason: rec.Reason, Receipt: &rec}
		if res.Fallback != protocol.FallbackClose {
			// A refusal that names no fallback, or an unknown one, is
			// read as the milder: MCPL off, tools on.
			res.Fallback = protocol.FallbackMCPOnly
		}
		log.Warn("the server refused the initial policy", "reason", rec.Reason, "fallback", res.Fallback, "missing", rec.MissingCapabilities)
		return res, false
	case errors.As(err, &ce) && ce.Outcome == wire.ErrorResponse && ce.Code == wire.CodeMethodNotFound && ad.Version == protocol.MCPLVersion04:
		if nerr := c.peer.Notify(ctx, protocol.MethodFeatureSetsUpdate, params); nerr != nil {
			log.Warn("a 0.4 server refused the policy request, and the notification could not be sent; MCPL stays off", "error", nerr.Error())
			return PolicyResult{Outcome: OutcomeUnanswered, Reason: "the policy notification was not sent"}, false
		}
		log.Info("a 0.4 server took the policy as a notification (the 0.4 path)", "effective", g.Effective)
		return PolicyResult{Outcome: OutcomeNotification}, true
	default:
		reason := policyErrorReason(err)
		if ctx.Err() == nil && c.peer.Err() == nil {
			// Otherwise the connect fails, and says so itself.
			log.Warn("the initial policy was not answered; MCPL's privileged surface stays off, tools work", "reason", reason)
		}
		return PolicyResult{Outcome: OutcomeUnanswered, Reason: reason}, false
	}
}

// policyErrorReason says for the operator why the policy request failed.
func policyErrorReason(err error) string {
	var ce *wire.CallError
	if !errors.As(err, &ce) {
		return err.Error()
	}
	switch ce.Outcome {
	case wire.ErrorResponse:
		return fmt.Sprintf("error %d: %s", ce.Code, strings.TrimSpace(ce.Message))
	case wire.NoResponse:
		switch ce.Cause {
		case wire.CauseDeadline:
			return fmt.Sprintf("no answer within %s", ce.Timeout)
		case wire.CauseCanceled:
			return "no answer: the request was abandoned"
		}
		return "no answer: the connection closed"
	case wire.BadResponse:
		return "the answer was not a policy receipt"
	}
	return "the request was not sent"
}

// settle installs the connection's grant, with why policy is not
// established ("" when it is), and releases what was held.
func (c *conn) settle(g grant.Grant, notEstablished string) {
	c.mu.Lock()
	c.grant = g
	c.notEstablished = notEstablished
	c.mu.Unlock()
	close(c.settledCh)
}

// live reports whether the connection is still open. Its grant holds only
// while it is: the moment the connection ends, the grant is gone, before
// the connection's goroutines have wound down.
func (c *conn) live() bool { return c.peer.Err() == nil }

// watch waits for the connection to end, drops it and its grant, and
// reconnects when that is on.
func (s *Session) watch(c *conn) {
	defer s.wg.Done()
	<-c.peer.Done()
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
		s.state.Grant = emptyGrant()
		s.state.Policy = nil
	}
	closed, recon := s.closed, s.reconnect
	s.mu.Unlock()
	if closed {
		return
	}
	attrs := []any{slog.Bool("will_reconnect", recon)}
	for _, a := range c.peer.CloseInfo().LogAttrs() {
		attrs = append(attrs, a)
	}
	if err := c.peer.Err(); err != nil {
		attrs = append(attrs, slog.String("cause", err.Error()))
	}
	s.log.Warn("the connection to the server closed", attrs...)
	if s.cfg.OnDisconnect != nil {
		s.cfg.OnDisconnect(s, recon)
	}
	if recon {
		s.redialLoop()
	}
}

func emptyGrant() grant.Grant {
	return grant.Grant{Effective: []string{}, Denied: []string{}}
}

// offGrant is the grant when MCPL stays off: nothing effective, every
// advertised path denied, every feature set disabled.
func offGrant(g grant.Grant) grant.Grant {
	off := grant.Grant{Effective: []string{}, Denied: append(append([]string{}, g.Effective...), g.Denied...)}
	slices.Sort(off.Denied)
	for _, fs := range g.FeatureSets {
		fs.State = grant.StateDisabled
		if fs.Reason == "" {
			fs.Reason = "policy_not_established"
		}
		off.FeatureSets = append(off.FeatureSets, fs)
	}
	return off
}

func isDeniedByDefault(p string) bool {
	for _, d := range grant.DeniedByDefault {
		if d == p {
			return true
		}
	}
	return false
}

func matchesAnyEnable(pol grant.Policy, p string) bool {
	for _, e := range pol.Enable {
		if grant.Match(e, p) {
			return true
		}
	}
	return false
}
