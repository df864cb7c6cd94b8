// Package session is one MCPL server connection as the host sees it: the
// MCP handshake, the policy exchange that establishes the capability grant,
// admission of the server's privileged methods against the grant current
// when each arrives, push/event, and reconnecting (SPEC §3, §5, §6, §9, §12,
// §14.1, §14.5).
//
// A Session outlives its connections: with reconnect on, each new
// connection repeats initialize and the policy exchange from nothing, and an
// old grant is never restored.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Config describes one server connection.
type Config struct {
	// ID names the server in texts and logs.
	ID string
	// Dial opens a fresh stream to the server: it spawns the process or
	// dials the URL. Each connect and reconnect calls it.
	Dial func(ctx context.Context) (transport.Stream, error)
	// Policy is host policy for this server.
	Policy grant.Policy
	// Implemented lists the capability paths this host implements: it is
	// what the host advertises, and no other path is ever granted. Nil
	// means DefaultImplemented.
	Implemented []string
	// RequestTimeout is the default deadline of a request; 0 means none.
	RequestTimeout time.Duration
	// Reconnect redials after an unexpected close.
	Reconnect Reconnect
	// Handler answers the privileged methods the session admits, other
	// than push/event (which OnPushEvent receives). Methods it does not
	// handle are answered "method not found". Nil handles none.
	Handler wire.Handler
	// OnPushEvent receives each admitted, first-seen push event. It is
	// called from the connection's dispatch goroutine and must not block.
	OnPushEvent func(PushEvent)
	// OnInbound, if set, is told of every privileged method the server
	// sends, admitted or not, as it is decided. It must not block.
	OnInbound func(Inbound)
	// OnConnect, if set, is called after each connection's policy exchange
	// has settled (the first connect and every reconnect), from the
	// goroutine that connected. The session is ready for calls then.
	OnConnect func(*Session)
	// OnDisconnect, if set, is called when a connection ends other than by
	// Close, with whether the session will reconnect.
	OnDisconnect func(s *Session, willReconnect bool)
	// Logger receives operator detail; nil means slog.Default().
	Logger *slog.Logger
	// ClientName is the clientInfo name (default "mcplhost").
	ClientName, ClientVersion string
	// MaxHeld bounds the messages held while the policy exchange settles,
	// the one being decided included (0 means 1000; at least 2). Beyond
	// it a request is refused at once and a notification dropped.
	MaxHeld int
}

// Reconnect configures redialing.
type Reconnect struct {
	Enabled bool
	// Initial is the first delay (0 means 5s); it doubles after each
	// failure up to Max (0 means 300s). Each delay varies by ±25%.
	Initial, Max time.Duration
}

// DefaultImplemented is what this host implements today.
var DefaultImplemented = []string{
	"tools",
	"pushEvents",
	"channels.register",
	"channels.incoming",
}

// Timeouts of the handshake.
const (
	InitializeTimeout = 30 * time.Second
	PolicyTimeout     = 15 * time.Second
)

// PushEvent is an admitted push event.
type PushEvent struct {
	Server string
	Params protocol.PushEventParams
	Raw    json.RawMessage
}

// Inbound records one privileged message from the server and what
// admission decided.
type Inbound struct {
	Method   string
	Request  bool // false for a notification
	Admitted bool
	Reason   string // why it was rejected, when it was
	Params   json.RawMessage
}

// Policy outcomes of the exchange (SPEC §5.3, §6.7).
const (
	OutcomeAccepted     = "accepted"     // {accepted:true}, nothing degraded
	OutcomeDegraded     = "degraded"     // {accepted:true} with unavailable features
	OutcomeRefused      = "refused"      // {accepted:false, fallback}
	OutcomeNotification = "notification" // a 0.4 server took the policy as a notification
	OutcomeUnanswered   = "unanswered"   // no answer, or an error: MCPL stays off
)

// PolicyResult is how the policy exchange went on the current connection.
type PolicyResult struct {
	Outcome  string
	Fallback string // for OutcomeRefused
	Reason   string // the server's reason, or why it is unanswered
	Receipt  *protocol.PolicyReceipt
}

// State is a snapshot of the session.
type State struct {
	Connected bool
	// ServerInfo and MCPL are from the current connection's initialize.
	Init protocol.InitializeResult
	// Advertisement is MCPL as understood; nil for a plain MCP server.
	Advertisement *grant.Advertisement
	// Policy is nil until the exchange settles, and for a plain MCP server.
	Policy *PolicyResult
	// Grant is the effective grant (empty when MCPL is off).
	Grant grant.Grant
}

// Session is one server, across its connections.
type Session struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	conn      *conn // the current connection, nil between connections
	closed    bool  // Close was called
	reconnect bool  // reconnecting now (or will be)
	state     State

	dedupe dedupe

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ErrClosed is returned by Connect when the session was closed meanwhile.
var ErrClosed = errors.New("session: closed")

// Connect connects to the server and settles the policy exchange. Without
// reconnect, a failed connect is an error. With reconnect, it returns a
// session that keeps trying in the background; its calls meanwhile fail as
// not sent, saying this host is reconnecting.
func Connect(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.Implemented == nil {
		cfg.Implemented = DefaultImplemented
	}
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = 1000
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "mcplhost"
	}
	if cfg.ClientVersion == "" {
		cfg.ClientVersion = "0.1.0"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Session{cfg: cfg, log: log.With("server", cfg.ID), reconnect: cfg.Reconnect.Enabled}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	err := s.connect(ctx)
	if err == nil {
		return s, nil
	}
	if !cfg.Reconnect.Enabled || errors.Is(err, ErrRefusedClose) {
		s.cancel()
		return nil, err
	}
	s.log.Warn("initial connect failed; will retry", "error", err.Error())
	s.wg.Add(1)
	go s.redial()
	return s, nil
}

// Close ends the session: the connection closes (pending calls fail with
// the "this host closed its connection" texts) and it never reconnects.
func (s *Session) Close() error {
	s.mu.Lock()
	s.closed = true
	s.reconnect = false
	c := s.conn
	s.mu.Unlock()
	s.cancel()
	if c != nil {
		c.peer.Close()
	}
	s.wg.Wait()
	return nil
}

// ID returns the server id.
func (s *Session) ID() string { return s.cfg.ID }

// State returns a snapshot. A connection that has ended is reported as
// gone, with no grant, from the moment it ends.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.Connected = s.conn != nil && s.conn.live()
	if s.conn != nil && !st.Connected {
		st.Grant = emptyGrant()
		st.Policy = nil
	}
	return st
}

// Grant returns the effective grant now: none while there is no open
// connection.
func (s *Session) Grant() grant.Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && !s.conn.live() {
		return emptyGrant()
	}
	return s.state.Grant
}

// Reconnecting reports whether this host will reconnect to the server
// after a drop (reconnect is on and the session is not closed).
func (s *Session) Reconnecting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconnect && !s.closed
}

// Call sends a request on the current connection. Between connections it
// fails as not sent, in the words a closed connection uses.
func (s *Session) Call(ctx context.Context, method string, params, result any, opts ...wire.CallOption) error {
	c, err := s.current(method)
	if err != nil {
		return err
	}
	return c.peer.Call(ctx, method, params, result, opts...)
}

// Notify sends a notification on the current connection. Between
// connections it fails as not sent, as Call does.
func (s *Session) Notify(ctx context.Context, method string, params any) error {
	c, err := s.current(method)
	if err != nil {
		return err
	}
	return c.peer.Notify(ctx, method, params)
}

// current returns the current connection, or, between connections, the
// not-sent error a request for method gets: this host's own close, or a
// closed connection it is or is not reconnecting.
func (s *Session) current(method string) (*conn, error) {
	s.mu.Lock()
	c, closed, recon := s.conn, s.closed, s.reconnect
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if closed {
		return nil, &wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseHostClosed, Server: s.cfg.ID, Method: method}
	}
	ce := wire.NotSentError(s.cfg.ID, recon)
	ce.Method = method
	return nil, ce
}
