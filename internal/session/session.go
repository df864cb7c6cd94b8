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
	"io/fs"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Config describes one server connection.
type Config struct {
	// ID names the server in errors and logs.
	ID string
	// Dial opens a fresh stream to the server: it spawns the process or
	// dials the URL. Each connect and reconnect calls it.
	Dial func(ctx context.Context) (transport.Stream, error)
	// Policy is host policy for this server.
	Policy grant.Policy
	// Implemented lists the capability paths this host implements: it is
	// what the host advertises, and no other path is ever granted. A path
	// belongs here only when something consumes it (SPEC §5.4: a grant is
	// a promise). Nil means DefaultImplemented().
	Implemented []string
	// Coalescing, when not nil, is advertised as the eventCoalescing
	// member of the host's experimental.mcpl (RFC-006 §10): set it only
	// when the consumer of every part it says is wired (principle 9).
	Coalescing *protocol.EventCoalescing
	// RequestTimeout is the default deadline of a request; 0 means none.
	RequestTimeout time.Duration
	// InitializeTimeout and PolicyTimeout bound the handshake's two
	// requests (0 means DefaultInitializeTimeout and DefaultPolicyTimeout).
	InitializeTimeout, PolicyTimeout time.Duration
	// Discover opens each connection with server/discover, to meet a
	// server of MCP 2026-07-28 at that revision (version.go); without it
	// every connection opens with initialize. DiscoverTimeout bounds it (0
	// means DefaultDiscoverTimeout).
	Discover        bool
	DiscoverTimeout time.Duration
	// Version, when set, pins the MCP revision: 2026-07-28 is met through
	// server/discover alone, an earlier one through initialize alone,
	// offering it and accepting no other answer. "" negotiates.
	Version string
	// Reconnect redials after an unexpected close.
	Reconnect Reconnect
	// Handler answers the privileged methods the session admits, other
	// than push/event (which OnPushEvent answers), and the server's other
	// requests and notifications (tools/list_changed; ping the session
	// answers itself). Methods it does not handle are answered "method
	// not found". Nil handles none.
	// It is called from the connection's dispatch goroutine, in arrival
	// order, and, for the privileged messages held until the policy
	// settled, from the goroutine that connected, in their arrival order:
	// the two may run at once, and a ping may overtake a held message.
	// Neither it nor OnPushEvent may call Close (Close waits for the
	// connection, which waits for them); they may start a goroutine that
	// does.
	Handler wire.Handler
	// OnPushEvent answers each admitted push event whose eventId is new to
	// the session: accepted, or declined (Accepted false with a Reason),
	// with an InferenceID when the event started one. The server's answer
	// waits for it, so it can make the event durable before the server
	// hears it was accepted; it is called as Handler is, and the messages
	// behind the event wait too, so it does only what must come before the
	// answer. Its answer is remembered for the eventId (SPEC §9.4: a retry
	// gets the same answer). A *protocol.Error is sent as that error (a
	// refusal of the event as sent, such as one whose content shows
	// nothing); any other error is answered as an internal error; neither
	// is remembered, so a retry is handled anew. Nil declines every event.
	OnPushEvent func(ctx context.Context, ev PushEvent) (protocol.PushEventResult, error)
	// OnInbound, if set, is told of every privileged message the server
	// sends, admitted or not, once it is answered. It must not block.
	OnInbound func(Inbound)
	// OnConnect, if set, is called after each connection's policy exchange
	// has settled and what the server sent before its policy answer has
	// been answered (the first connect and every reconnect), from the
	// goroutine that connected. The session is ready for calls then. It may
	// call Close. OnDisconnect for the same connection comes after it.
	OnConnect func(*Session)
	// OnDisconnect, if set, is called when a connection ends other than by
	// Close, with whether the session will reconnect. It may call Close.
	OnDisconnect func(s *Session, willReconnect bool)
	// Bind, if set, is called once with the session before its first
	// connect, so that a consumer of its inbound methods (the channel
	// registry, which calls back into it) has it before they arrive.
	Bind func(*Session)
	// Logger receives operator detail; nil means slog.Default().
	Logger *slog.Logger
	// ClientName is the clientInfo name (default "mcplhost").
	ClientName, ClientVersion string
	// MaxHeld bounds the privileged messages held while the policy
	// exchange settles (0 means 1000). Beyond it a request is refused at
	// once and a notification dropped.
	MaxHeld int
	// Observer, if set, is told how each request on each connection ended
	// (wire.Options.Observer).
	Observer wire.Observer
}

// Reconnect configures redialing.
type Reconnect struct {
	Enabled bool
	// Initial is the first delay (0 means 5s); it doubles after each
	// failure up to Max (0 means 300s). Each delay varies by ±25%.
	Initial, Max time.Duration
}

// DefaultImplemented returns what this host implements until the channel
// and agent layers wire their consumers: MCP's tools only (the host passes
// its own list).
func DefaultImplemented() []string { return []string{"tools"} }

// Default timeouts of the handshake.
const (
	DefaultInitializeTimeout = 30 * time.Second
	DefaultPolicyTimeout     = 15 * time.Second
)

// PushEvent is an admitted push event.
type PushEvent struct {
	Server string
	Params protocol.PushEventParams
	Raw    json.RawMessage
}

// Inbound records one privileged message from the server, what admission
// decided, and what the server was answered.
type Inbound struct {
	Method   string
	Request  bool // false for a notification
	Admitted bool
	Reason   string // why it was rejected, when it was
	Params   json.RawMessage
	// Answer is the answer the server was sent, as JSON: a result, or an
	// error object {"code","message","data"}. Nil for a notification.
	Answer json.RawMessage
	// AnswerIsError says whether Answer is an error object.
	AnswerIsError bool
}

// PolicyResult is how the policy exchange went on the current connection.
type PolicyResult struct {
	Outcome  grant.PolicyOutcome
	Fallback string // for OutcomeRefused
	Reason   string // the server's reason, or why it is unanswered
	Receipt  *protocol.PolicyReceipt
	// Held lists the methods of the server's own requests that were held,
	// waiting for the policy, when it went unanswered: a server that waits
	// on its own request before it reads the policy deadlocks there.
	Held []string
}

// State is a snapshot of the session.
type State struct {
	Connected bool
	// ServerInfo and MCPL are from the current connection's initialize
	// (for a 2026-07-28 server, from its server/discover answer).
	Init protocol.InitializeResult
	// Version is the MCP revision the connection speaks: the one the
	// server answered, or the one offered when its answer named none.
	Version string
	// Modern says the connection speaks 2026-07-28, stateless.
	Modern bool
	// ServerVersions are the revisions the server said it speaks, when it
	// said (server/discover, or a refusal's data.supported).
	ServerVersions []string
	// Advertisement is MCPL as understood; nil for a plain MCP server.
	Advertisement *grant.Advertisement
	// Policy is nil until the exchange settles, and for a plain MCP server.
	Policy *PolicyResult
	// Grant is the effective grant (Effective empty when MCPL is off).
	Grant grant.Grant
}

// Session is one server, across its connections.
type Session struct {
	cfg  Config
	log  *slog.Logger
	base context.Context // Connect's ctx without its end: handlers' values

	mu        sync.Mutex
	conn      *conn // the current connection, nil between connections
	last      *conn // the last connection installed, kept after it ends
	closed    bool  // Close was called
	reconnect bool  // reconnecting now (or will be)
	state     State
	// nextDial is when redialLoop's next attempt is due while it waits
	// for it; zero otherwise (an attempt under way, or none coming).
	nextDial time.Time

	dedupe dedupe
	limits *lograte.Limiter // the lines a server can make repeat

	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	running routines // the session's goroutines: Close waits for them

	reconnects atomic.Int64 // reconnects that succeeded
	// legacy is set once the server has answered initialize: its
	// reconnects skip server/discover.
	legacy atomic.Bool
	// modernSeen is set once the server has answered server/discover.
	modernSeen atomic.Bool
}

// probing reports whether the next connection opens with server/discover.
func (s *Session) probing() bool {
	if s.cfg.Version != "" {
		return protocol.Modern(s.cfg.Version)
	}
	return s.cfg.Discover && !s.legacy.Load()
}

// ErrClosed is returned by Connect when the session was closed meanwhile.
var ErrClosed = errors.New("session: closed")

// Connect connects to the server and settles the policy exchange. Without
// reconnect, a failed connect is an error. With reconnect, it returns a
// session that keeps trying in the background; its calls meanwhile fail as
// not sent, as on a closed connection that is reconnecting. Either way,
// when ctx ends before the connect succeeds, Connect returns ctx's error
// and leaves nothing running.
//
// The values of ctx (not its deadline or cancellation) reach Handler and
// OnPushEvent on every connection, reconnects included.
func Connect(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.Implemented == nil {
		cfg.Implemented = DefaultImplemented()
	}
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = 1000
	}
	if cfg.InitializeTimeout <= 0 {
		cfg.InitializeTimeout = DefaultInitializeTimeout
	}
	if cfg.PolicyTimeout <= 0 {
		cfg.PolicyTimeout = DefaultPolicyTimeout
	}
	if cfg.DiscoverTimeout <= 0 {
		cfg.DiscoverTimeout = DefaultDiscoverTimeout
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
	s := &Session{cfg: cfg, log: log.With("server", cfg.ID), reconnect: cfg.Reconnect.Enabled, base: context.WithoutCancel(ctx)}
	s.limits = lograte.New(s.log, cfg.ID)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.running.init()
	if cfg.Bind != nil {
		cfg.Bind(s)
	}
	err := s.connect(ctx, false)
	switch {
	case err == nil:
		return s, nil
	case ctx.Err() != nil:
		s.cancel()
		s.limits.Close()
		return nil, ctx.Err()
	case !cfg.Reconnect.Enabled || errors.Is(err, ErrRefusedClose):
		s.cancel()
		s.limits.Close()
		return nil, err
	case errors.Is(err, ErrVersion):
		s.log.Warn("the server shares no MCP protocol version with this host, so it is not retried", "error", err.Error())
		s.cancel()
		s.limits.Close()
		return nil, err
	case missingProgram(err):
		s.log.Warn("the server's command does not exist, so it is not retried; correct the configuration and restart the host", "error", err.Error())
		s.cancel()
		s.limits.Close()
		return nil, err
	}
	s.log.Warn("initial connect failed; will retry", "error", err.Error())
	s.running.add()
	go func() {
		defer s.running.done()
		s.redialLoop()
	}()
	return s, nil
}

// missingProgram reports whether err is a server's command (or its
// directory) that does not exist: a mistake in the configuration that no
// redial mends, so even with reconnect on, the first connect fails for
// good (the host lists the server failed); a restart after the fix tries
// again.
func missingProgram(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
}

// Close ends the session: the connection closes (pending calls fail as
// closed on this side) and it never reconnects. It waits for the session's
// goroutines, except one running OnConnect or OnDisconnect: so a callback
// may call Close. A callback that had begun may still be running when
// Close returns; Wait waits for it too.
func (s *Session) Close() error {
	s.mu.Lock()
	s.closed = true
	s.reconnect = false
	c := s.conn
	var listening chan struct{}
	if c != nil {
		listening = c.listening
	}
	s.mu.Unlock()
	s.cancel()
	if listening != nil {
		// Its subscriptions/listen ends with s.ctx, as a request this
		// side abandoned, rather than as one the close left pending.
		t := time.NewTimer(time.Second)
		select {
		case <-listening:
		case <-t.C:
		}
		t.Stop()
	}
	if c != nil {
		c.peer.Close()
	}
	s.running.wait(false)
	s.limits.Close()
	return nil
}

// Wait blocks until every goroutine of the session has ended and no
// callback is running. Call it after Close, and never from a callback (it
// would wait for itself).
func (s *Session) Wait() { s.running.wait(true) }

// callback runs f, a callback of Config, unless Close has been called.
// tracked says whether the calling goroutine is one Close waits for: while
// f runs it is not, so f may call Close; Wait waits for f either way.
func (s *Session) callback(tracked bool, f func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.running.enter(tracked)
	s.mu.Unlock()
	defer s.running.leave(tracked)
	f()
}

// routines counts the session's goroutines, as a sync.WaitGroup does, with
// those running a callback apart: Close waits for the others, Wait for all.
type routines struct {
	mu      sync.Mutex
	n       int // goroutines, less those in a callback
	inCall  int // callbacks running
	changed *sync.Cond
}

func (r *routines) init() { r.changed = sync.NewCond(&r.mu) }

func (r *routines) add() {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
}

func (r *routines) done() {
	r.mu.Lock()
	r.n--
	r.changed.Broadcast()
	r.mu.Unlock()
}

// enter marks a callback running; a tracked goroutine leaves the count
// Close waits for meanwhile.
func (r *routines) enter(tracked bool) {
	r.mu.Lock()
	if tracked {
		r.n--
	}
	r.inCall++
	r.changed.Broadcast()
	r.mu.Unlock()
}

func (r *routines) leave(tracked bool) {
	r.mu.Lock()
	if tracked {
		r.n++
	}
	r.inCall--
	r.changed.Broadcast()
	r.mu.Unlock()
}

// wait waits until no goroutine is left but those in a callback, or, with
// all, none at all.
func (r *routines) wait(all bool) {
	r.mu.Lock()
	for r.n > 0 || (all && r.inCall > 0) {
		r.changed.Wait()
	}
	r.mu.Unlock()
}

// ID returns the server id.
func (s *Session) ID() string { return s.cfg.ID }

// State returns a snapshot, the caller's own: it shares no memory with
// what admission decides by. A connection that has ended is reported as
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
	st.Grant = st.Grant.Clone()
	st.ServerVersions = slices.Clone(st.ServerVersions)
	if st.Init.ServerInfo != nil {
		info := *st.Init.ServerInfo
		st.Init.ServerInfo = &info
	}
	st.Init.Capabilities.Experimental = maps.Clone(st.Init.Capabilities.Experimental)
	if st.Advertisement != nil {
		ad := st.Advertisement.Clone()
		st.Advertisement = &ad
	}
	if st.Policy != nil {
		p := *st.Policy
		p.Held = slices.Clone(p.Held)
		if p.Receipt != nil {
			r := *p.Receipt
			r.UnavailableFeatures = slices.Clone(r.UnavailableFeatures)
			for i := range r.UnavailableFeatures {
				u := &r.UnavailableFeatures[i]
				u.MissingCapabilities = slices.Clone(u.MissingCapabilities)
			}
			r.MissingCapabilities = slices.Clone(r.MissingCapabilities)
			r.Notes = slices.Clone(r.Notes)
			p.Receipt = &r
		}
		st.Policy = &p
	}
	return st
}

// Grant returns the effective grant now, the caller's own copy: none while
// there is no open connection.
func (s *Session) Grant() grant.Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && !s.conn.live() {
		return emptyGrant()
	}
	return s.state.Grant.Clone()
}

// NextAttempt is when the next reconnect attempt is due, while the
// session waits out its backoff before it; zero while an attempt is under
// way or none is coming.
func (s *Session) NextAttempt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextDial
}

// Reconnecting reports whether this host will reconnect to the server
// after a drop (reconnect is on and the session is not closed).
func (s *Session) Reconnecting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconnect && !s.closed
}

// Call sends a request on the current connection. Between connections it
// fails as not sent, as on a closed connection.
func (s *Session) Call(ctx context.Context, method string, params, result any, opts ...wire.CallOption) error {
	c, err := s.current(method)
	if err != nil {
		return err
	}
	if c.modern != "" {
		return c.modernCall(ctx, method, params, result, opts...)
	}
	return c.peer.Call(ctx, method, params, result, opts...)
}

// LastEnd says how the last connection ended: closedHere when this side
// closed it (Close, or because the server sent a message over the size
// limit, stopped reading, or broke the transport's rules), and the cause
// (wire.Peer.Err: a *transport.TooLargeError, a *wire.StallError, a
// *transport.PeerFaultError, io.EOF, ...). cause is nil while the
// connection is open, and before there was one. It is known as soon as
// State says the connection is gone.
func (s *Session) LastEnd() (closedHere bool, cause error) {
	s.mu.Lock()
	c := s.last
	s.mu.Unlock()
	if c == nil {
		return false, nil
	}
	return c.peer.ClosedHere(), c.peer.Err()
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

// Reconnects returns how many times the session has reconnected after a
// drop.
func (s *Session) Reconnects() int64 { return s.reconnects.Load() }

// Connected says the session has a live connection, as State().Connected
// does, without copying the rest of the state.
func (s *Session) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil && s.conn.live()
}

// Queued returns how many of the server's messages wait for this host's
// handler on the current connection (0 between connections).
func (s *Session) Queued() int {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return 0
	}
	return c.peer.Queued()
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
		return nil, &wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseClosedHere, Server: s.cfg.ID, Method: method}
	}
	return nil, wire.NotSentError(s.cfg.ID, method, recon)
}
