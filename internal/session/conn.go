package session

import (
	"cmp"
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

	mu sync.Mutex
	// settled is set once the policy exchange has settled (or failed):
	// from then on admission decides against grant.
	settled bool
	grant   grant.Grant // this connection's grant, once settled
	// notEstablished says why policy is not established on this
	// connection ("" when it is): admission's words for a refusal.
	notEstablished string
	// held are the privileged messages that arrived before the policy
	// settled, in arrival order; draining is set while they are decided,
	// and what arrives meanwhile queues behind them.
	held     []heldMsg
	draining bool
	// offered is what the server advertised, once initialize has told
	// (offeredKnown); nil for a server that speaks no MCPL, with why in
	// offeredWhy. A capability it did not offer is never granted on this
	// connection, so admission refuses it at once.
	offered      []string
	offeredKnown bool
	offeredWhy   string
	// modern is the revision of a stateless (2026-07-28) connection, ""
	// for one opened with initialize; set before it is installed.
	modern string
	// listening, when not nil, is closed once its subscriptions/listen
	// has ended (modern.go).
	listening chan struct{}
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
	whyClosed     = "the connection has closed"
	whyFailed     = "the connect failed, and the connection is closing"
)

// connect dials, runs initialize and the policy exchange, answers what the
// server sent meanwhile, and installs the connection. It fails when the
// dial or initialize fails, when the server refuses the policy asking to
// close, and when the connection or ctx ends before the exchange settles;
// any other policy exchange that goes wrong leaves MCPL off instead.
// tracked says whether the calling goroutine is one Close waits for.
func (s *Session) connect(ctx context.Context, tracked bool) error {
	probed := s.probing()
	err := s.connectOnce(ctx, tracked)
	if probed && errors.Is(err, errDiscoverClosed) && ctx.Err() == nil {
		// A server of an earlier revision that ends the connection on a
		// first message other than initialize: open it again with
		// initialize alone, now and from now on.
		s.log.Info("the server closed the connection on server/discover; connecting again with initialize", "error", err.Error())
		s.legacy.Store(true)
		err = s.connectOnce(ctx, tracked)
	}
	return err
}

// connectOnce is one dial and handshake of connect.
func (s *Session) connectOnce(ctx context.Context, tracked bool) error {
	stream, err := s.cfg.Dial(ctx)
	if err != nil {
		return err
	}
	c := &conn{s: s}
	c.peer = wire.NewPeer(stream, wire.Options{
		Name:         s.cfg.ID,
		Handler:      wire.HandlerFunc(c.serve),
		Context:      s.base,
		Logger:       s.cfg.Logger,
		Timeout:      s.cfg.RequestTimeout,
		Reconnecting: s.Reconnecting,
		Observer:     s.cfg.Observer,
	})
	st, why, err := c.handshake(ctx)
	if err != nil {
		c.abandon(whyFailed)
		if errors.Is(err, ErrRefusedClose) || errors.Is(err, ErrVersion) {
			s.mu.Lock()
			s.state = st
			s.mu.Unlock()
		}
		return err
	}
	// What the server sent before its policy answer is decided against
	// that policy: the dispatcher hands it over (to the held queue) first.
	if err := c.peer.Sync(ctx); err != nil {
		c.abandon(whyFailed)
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.abandon(whyClosed)
		return ErrClosed
	}
	s.conn, s.last = c, c
	s.state = st
	s.mu.Unlock()
	c.settle(st.Grant, why)
	if c.modern != "" && listChanged(st.Init.Capabilities.Tools) {
		s.mu.Lock()
		if !s.closed {
			c.listening = make(chan struct{})
			s.running.add()
			go c.listen()
		}
		s.mu.Unlock()
	}
	if s.cfg.OnConnect != nil {
		s.callback(tracked, func() { s.cfg.OnConnect(s) })
	}
	// The watch starts after OnConnect, so OnDisconnect never runs before
	// or beside it for the same connection; a Close meanwhile has closed
	// the connection, and leaves nothing to watch.
	s.mu.Lock()
	if !s.closed {
		s.running.add()
		go s.watch(c)
	}
	s.mu.Unlock()
	return nil
}

// abandon ends a connection that will not be installed: what it held is
// refused (saying why), while the stream still takes the answers, and then
// it closes.
func (c *conn) abandon(why string) {
	c.settle(emptyGrant(), why)
	c.peer.Close()
}

// offer records what the server advertised (nil, with why, for none).
func (c *conn) offer(caps []string, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offered, c.offeredKnown, c.offeredWhy = caps, true, why
}

// notOffered says why capability can never be granted on this connection
// because of what the server advertised, or "" when it can be (or
// initialize has not told yet).
func (c *conn) notOffered(capability string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.offeredKnown, slices.Contains(c.offered, capability):
		return ""
	case c.offeredWhy != "":
		return fmt.Sprintf("capability %q is not granted: policy is not yet established on this connection (%s)", capability, c.offeredWhy)
	}
	return fmt.Sprintf("capability %q is not in the effective grant: the server did not advertise it", capability)
}

// handshake opens the connection at an MCP revision both sides speak
// (version.go): server/discover first when Config.Discover says so, then,
// for a server of the earlier revisions, initialize,
// notifications/initialized and, for an MCPL server, the policy exchange.
// why says why policy is not established ("" when it is).
func (c *conn) handshake(ctx context.Context) (st State, why string, err error) {
	s := c.s
	offer := cmp.Or(s.cfg.Version, protocol.LegacyVersions[0])
	probed := s.probing()
	if probed {
		verdict, o, err := c.discover(ctx, &st)
		switch {
		case err != nil:
			return st, "", err
		case verdict == eraModern:
			return c.modernReady(st)
		case s.cfg.Version != "":
			return st, "", fmt.Errorf("%w: the server did not answer server/discover as %s defines, and this host is pinned to it", ErrVersion, s.cfg.Version)
		case o != "":
			offer = o
		}
	}
	params := protocol.InitializeParams{
		ProtocolVersion: offer,
		Capabilities: protocol.ClientCapabilities{Experimental: map[string]json.RawMessage{
			"mcpl": withCoalescing(HostAdvertisement(s.cfg.Implemented), s.cfg.Coalescing),
		}},
		ClientInfo: protocol.Implementation{Name: s.cfg.ClientName, Version: s.cfg.ClientVersion},
	}
	err = c.peer.Call(ctx, protocol.MethodInitialize, params, &st.Init, wire.WithTimeout(s.cfg.InitializeTimeout))
	if retry, theirs, ok := initializeRefused(err, offer); ok {
		st.ServerVersions = theirs
		if retry == "" || s.cfg.Version != "" {
			return st, "", fmt.Errorf("%w: the server refused initialize at %s and speaks %s; this host speaks %s",
				ErrVersion, offer, versionList(theirs), versionList(protocol.LegacyVersions))
		}
		s.log.Info("the server refused the protocol version offered; offering the newest it named", "offered", offer, "supported", theirs, "offering", retry)
		offer, params.ProtocolVersion = retry, retry
		err = c.peer.Call(ctx, protocol.MethodInitialize, params, &st.Init, wire.WithTimeout(s.cfg.InitializeTimeout))
	}
	if err != nil {
		if probed {
			err = unknownInitialize(err)
		}
		return st, "", err
	}
	if err := c.checkAnswered(offer, st.Init.ProtocolVersion); err != nil {
		return st, "", err
	}
	if got := st.Init.ProtocolVersion; s.cfg.Version != "" && got != "" && got != offer {
		return st, "", fmt.Errorf("%w: the server answered initialize with %s; this host is pinned to %s", ErrVersion, got, offer)
	}
	st.Version = cmp.Or(st.Init.ProtocolVersion, offer)
	// Some servers read exactly one message after their initialize answer
	// and drop it unless it is this one: it goes first, before anything.
	if err := c.peer.Notify(ctx, protocol.MethodInitialized, nil); err != nil {
		return st, "", err
	}
	// It answered initialize: its reconnects are opened the same way.
	s.legacy.Store(true)
	st.Grant = emptyGrant()
	raw := st.Init.Capabilities.MCPL()
	if why := st.Init.Capabilities.ExperimentalInvalid; why != "" {
		s.log.Warn("the server's capabilities are malformed; treated as a plain MCP server: tools work, MCPL is off", "problem", why)
	}
	if raw == nil {
		s.log.Info("a plain MCP server: tools work, MCPL is off")
		c.offer(nil, whyPlainMCP)
		return st, whyPlainMCP, nil
	}
	ad, err := grant.ParseAdvertisement(raw, st.Init.Capabilities.Tools != nil)
	if err != nil {
		s.log.Warn("the MCPL advertisement is unreadable; MCPL stays off", "error", err.Error())
		c.offer(nil, whyUnreadable)
		return st, whyUnreadable, nil
	}
	st.Advertisement = &ad
	c.offer(ad.Capabilities, "")
	if len(ad.Ignored) > 0 {
		s.log.Info("advertised capabilities this host does not know are ignored", "paths", ad.Ignored)
	}
	g := grant.Compute(ad, s.cfg.Implemented, s.cfg.Policy)
	if p := g.DeniedFor(grant.DenialDefault); len(p) > 0 {
		s.log.Info("advertised but denied by default; enable them explicitly if intended", "paths", p)
	}
	res := c.exchange(ctx, ad, g)
	st.Policy = &res
	if res.Outcome == grant.OutcomeRefused && res.Fallback == protocol.FallbackClose {
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
		return st, "", fmt.Errorf("session: %w during the policy exchange: %w", wire.ErrConnClosed, err)
	}
	if res.Outcome.Established() {
		st.Grant = g
		return st, "", nil
	}
	st.Grant = g.Withheld()
	if res.Outcome == grant.OutcomeRefused {
		return st, whyRefused, nil
	}
	return st, whyUnanswered, nil
}

// exchange sends the initial policy (SPEC §5.3) and reads the receipt.
func (c *conn) exchange(ctx context.Context, ad grant.Advertisement, g grant.Grant) PolicyResult {
	log := c.s.log
	params := protocol.FeatureSetsUpdateParams{
		EffectiveCapabilities: g.Effective,
		DeniedCapabilities:    g.DeniedPaths(),
		Enabled:               g.Enabled(),
		Disabled:              g.Disabled(),
	}
	var rec protocol.PolicyReceipt
	err := c.peer.Call(ctx, protocol.MethodFeatureSetsUpdate, params, &rec, wire.WithTimeout(c.s.cfg.PolicyTimeout))
	var ce *wire.CallError
	switch {
	case err == nil && rec.Accepted:
		res := PolicyResult{Outcome: grant.OutcomeAccepted, Receipt: &rec}
		if rec.Mode == "degraded" || len(rec.UnavailableFeatures) > 0 {
			res.Outcome = grant.OutcomeDegraded
			for _, u := range rec.UnavailableFeatures {
				log.Warn("feature set degraded by the server", "feature_set", u.FeatureSet, "effect", u.Effect, "missing", u.MissingCapabilities)
			}
		}
		log.Info("policy established", "outcome", string(res.Outcome), "effective", g.Effective)
		return res
	case err == nil:
		res := PolicyResult{Outcome: grant.OutcomeRefused, Fallback: rec.Fallback, Reason: rec.Reason, Receipt: &rec}
		if res.Fallback != protocol.FallbackClose {
			// A refusal that names no fallback, or an unknown one, is
			// read as the milder: MCPL off, tools on.
			res.Fallback = protocol.FallbackMCPOnly
		}
		log.Warn("the server refused the initial policy", "reason", rec.Reason, "fallback", res.Fallback, "missing", rec.MissingCapabilities)
		return res
	case errors.As(err, &ce) && ce.Outcome == wire.ErrorResponse && ce.Answer.Code == protocol.CodeMethodNotFound && ad.Version == protocol.MCPLVersion04:
		if nerr := c.peer.Notify(ctx, protocol.MethodFeatureSetsUpdate, params); nerr != nil {
			log.Warn("a 0.4 server refused the policy request, and the notification could not be sent; MCPL stays off", "error", nerr.Error())
			return PolicyResult{Outcome: grant.OutcomeUnanswered, Reason: "the policy notification was not sent"}
		}
		log.Info("a 0.4 server refused the policy as a Request; sent it again as a notification (the 0.4 path)", "effective", g.Effective)
		return PolicyResult{Outcome: grant.OutcomeNotification}
	default:
		res := PolicyResult{Outcome: grant.OutcomeUnanswered, Reason: policyErrorReason(err)}
		if ctx.Err() == nil && c.peer.Err() == nil {
			// Otherwise the connect fails, and says so itself.
			log.Warn("the initial policy was not answered; MCPL's privileged surface stays off, tools work", "reason", res.Reason)
			if res.Held = c.heldRequests(); len(res.Held) > 0 {
				log.Warn("the server's own requests were waiting on this host when the policy went unanswered: a server that waits for their answers before it reads the policy deadlocks there",
					"held", res.Held)
			}
		}
		return res
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
		return fmt.Sprintf("error %d: %s", ce.Answer.Code, strings.TrimSpace(ce.Answer.Message))
	case wire.NoResponse:
		switch ce.Cause {
		case wire.CauseDeadline:
			return "no answer within " + wire.ShortDuration(ce.Timeout)
		case wire.CauseCanceled:
			return "no answer: the request was abandoned"
		}
		return "no answer: the connection closed"
	case wire.BadResponse:
		return "the answer was not a policy receipt"
	}
	return "the request was not sent"
}

// live reports whether the connection is still open. Its grant holds only
// while it is: the moment the connection ends, the grant is gone, before
// the connection's goroutines have wound down.
func (c *conn) live() bool { return c.peer.Err() == nil }

// watch waits for the connection to end, drops it and its grant, and
// reconnects when that is on.
func (s *Session) watch(c *conn) {
	defer s.running.done()
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
		s.callback(true, func() { s.cfg.OnDisconnect(s, recon) })
	}
	if recon {
		s.redialLoop()
	}
}

func emptyGrant() grant.Grant {
	return grant.Grant{Effective: []string{}, Denied: []grant.Denial{}}
}
