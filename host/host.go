// Package host runs MCPL servers for an application: it connects the
// configured servers, negotiates each one's capability grant, keeps the
// registry of live servers, names their tools "<prefix>--<tool>", and runs
// every tool call (the model's, a script's, an operator's) through one
// path. It is what a Go program that embeds an MCPL host imports, with
// package config for what to run and package grant for the grant's
// vocabulary.
//
//	h := host.New(host.Options{})
//	defer h.Close()
//	h.Start(cfg) // a *config.Config, from config.Load
//	<-h.Settled()
//	res, err := h.CallTool(ctx, "chat--send_message", args)
//
// A failed call is a *ToolError: its Text is what an agent reads (what
// happened, whether anything ran, what works from there; a contract, pinned
// verbatim by tests), its Outcome what a program decides on, and it wraps
// the cause (ErrConnectionClosed, a *protocol.Error answer,
// ErrNotConnected, ...). Operator detail goes to Options.Logger.
//
// The registry holds a server once its handshake is done. While a connect is
// in flight (at start, at runtime or in a restart) its id is marked: a call
// to its tools reads the "connecting" text, and another connect, restart or
// disconnect of that id is refused before it changes anything. A server
// whose connection ends with no reconnect to come leaves the registry; one
// that is reconnecting stays, and its calls fail as not sent, saying so.
//
// The host grants a server only what it serves (docs/admission.md): MCP's
// tools, and the channel capabilities its channel layer consumes
// (channels.register, channels.incoming, channels.lifecycle,
// channels.publish). Channel decisions and the inbound-message inbox live
// in Options.Store, each decision durable before it takes effect; the
// channel tools (channel_list, channel_open, channel_close,
// channel_decline, channel_publish) are the host's own, called through
// CallTool like any other.
//
// The configuration's agents (docs/agents.md) run from Start to Close:
// inbound traffic wakes them, they think with their models, call tools
// through the same path, and speak into channels; their turns go to the
// store and to Options.Transcript. While they run, the host also serves
// push events, context hooks, the inference lifecycle, model/info, and
// the inference/request its routes allow.
//
// The JSON-RPC peer, the transports and the per-connection session it is
// built on are internal (docs/api.md).
package host

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/jsonschema-go/jsonschema"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/fetchref"
	"github.com/mcpl-go/mcpl/internal/hooks"
	"github.com/mcpl-go/mcpl/internal/inbox"
	"github.com/mcpl-go/mcpl/internal/inference"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/internal/metrics"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// Options tunes a Host.
type Options struct {
	// Logger receives operator detail; nil means slog.Default().
	Logger *slog.Logger
	// LookupEnv reads environment variables (a server's token); nil means
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// RefsDir is where fetch_reference saves the payloads it fetches
	// (created 0700 when first used); "" leaves it nowhere to save, so it
	// refuses, saying so.
	RefsDir string
	// Store keeps channel decisions and the inbound-message inbox across
	// restarts (store/sqlite opens a file); nil means a store in memory,
	// which lasts as long as the host. New replays it. The caller closes a
	// store it gave, after Close.
	Store store.Store
	// Transcript, if set, receives every agent's turns as JSON lines
	// (docs/transcript.md); they are kept in Store as well.
	Transcript io.Writer
	// ShutdownGrace is how long Close lets the agents' turns in flight end
	// by themselves before it cuts them short; 0 cuts them short at once.
	ShutdownGrace time.Duration
	// Metrics, if set, is where the host registers its Prometheus metrics
	// (docs/status.md); nil keeps none. New fails when they can't be
	// registered there (a second host on the same registerer, say).
	Metrics prometheus.Registerer
	// RenderTimeout bounds each push/render of a deferred batch (RFC-006
	// §5.3); 0 means DefaultRenderTimeout.
	RenderTimeout time.Duration
	// CoalesceSubjects bounds the coalesced subjects tracked for each
	// server (RFC-006 §11); 0 means 1024. Past it an occurrence of a new
	// subject is delivered as it would be without coalescing, never
	// refused (docs/coalescing.md).
	CoalesceSubjects int
	// Now is the host's clock for what it keeps: the receipt time of
	// inbound messages and decisions, the inbox's retention (prune.go),
	// the store's health; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Host runs a set of servers.
type Host struct {
	log      *slog.Logger
	lookup   func(string) (string, bool)
	channels *channels.Registry
	refs     *content.Refs // the references servers delivered (RFC-005)
	fetcher  *fetchref.Fetcher
	store    store.Store
	ownStore store.Store      // a store New made, closed by Close
	health   *storeHealth     // what the store's writes found (StoreHealth)
	now      func() time.Time // Options.Now
	limits   *lograte.Limiter
	inbox    *inbox.Inbox // the inbox's one writer
	dups     *duplicates  // what it deduplicated, counted and logged
	// connected is when each server's current connection came up.
	connected map[string]time.Time
	// suggested are the servers' accepted suggested treatment rules.
	suggested suggestions
	// transcript writes the agents' turns, and hands them to activity.
	transcript *agent.Transcript
	activity   activity          // what the agents did, for Agents and metrics
	metrics    *metrics.Metrics  // nil without Options.Metrics
	grace      time.Duration     // Options.ShutdownGrace
	hooks      *hooks.Runner     // context hooks and inference/lifecycle
	coalescer  *coalescer        // RFC-006 (coalesce.go)
	infer      *inference.Server // inference/request

	mu         sync.Mutex
	servers    map[string]*server // the registry: handshake done
	connecting map[string]bool    // a connect is in flight
	prefixes   map[string]string  // id -> tool prefix, for registered and connecting ids
	// gone holds the tool prefixes of servers that were configured or
	// connected and are no longer in the registry, with nothing to bring
	// them back, so that a call to one reads that it is gone rather than
	// that no such tool exists. A connect of the id, or of a prefix that
	// meets one here, takes it out.
	gone  map[string]string
	order []string // ids in the order they were configured or connected
	// records are every server configured or connected, registered or
	// not, until Disconnect; listed their ids in order (serverrecord.go).
	records map[string]*serverRecord
	listed  []string
	closed  bool
	// agents are the agents Start started; nil when none.
	agents *agentSet

	startWG  sync.WaitGroup // Start's connects, for Settled
	inflight sync.WaitGroup // every connect in flight: Start's, Connect's, Restart's
	settled  chan struct{}
	bg       sync.WaitGroup  // background work: tool refreshes, Settled's closer
	ctx      context.Context // ends at Close; every connect and refresh ends with it
	cancel   context.CancelFunc
	settleOn sync.Once
}

// server is one registered server.
type server struct {
	cfg     config.Server
	sess    *session.Session // set once, under Host.mu, as the server is registered
	ended   bool             // under Host.mu: its connection ended with no reconnect to come
	refresh refresher

	mu    sync.Mutex
	tools []protocol.Tool // as listed, filtered by the tool policy
	// outputs are the compiled output schemas of tools, by name
	// (outputschema.go).
	outputs map[string]*jsonschema.Resolved
	// calls are its tool calls in flight, by progress token (progress.go).
	calls map[string]*CallInFlight
}

// New returns a host with no servers connected, its channel decisions
// replayed from opts.Store. It fails when the store can't be read.
func New(opts Options) (*Host, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	h := &Host{
		log:        log,
		lookup:     lookup,
		servers:    map[string]*server{},
		connecting: map[string]bool{},
		prefixes:   map[string]string{},
		gone:       map[string]string{},
		connected:  map[string]time.Time{},
		records:    map[string]*serverRecord{},
		settled:    make(chan struct{}),
	}
	st := opts.Store
	if st == nil {
		st = store.NewMemory()
		h.ownStore = st
	}
	h.now = opts.Now
	if h.now == nil {
		h.now = time.Now
	}
	// Every write goes through the store's health watch (StoreHealth).
	h.health = &storeHealth{log: log, now: h.now}
	st = healthStore{Store: st, health: h.health}
	h.store = st
	h.grace = opts.ShutdownGrace
	if opts.Metrics != nil {
		m, err := metrics.New(opts.Metrics, h.metricsSnapshot)
		if err != nil {
			return nil, fmt.Errorf("host: registering its metrics: %w", err)
		}
		h.metrics, h.activity.metrics = m, m
	}
	h.transcript = agent.NewTappedTranscript(opts.Transcript, h.activity.record)
	// The inbox's one writer: channels/incoming and push/event alike go
	// through it, in receipt order, and each commit wakes the agents once.
	// Its duplicates are counted and logged (duplicates.go).
	h.dups = newDuplicates(log, h.metrics)
	in, err := inbox.New(inbox.Options{Store: st, Logger: log, OnCommit: func(int64) { h.wakeAgents() }, OnDuplicates: h.dups.seen})
	if err != nil {
		return nil, err
	}
	h.inbox = in
	if h.coalescer, err = newCoalescer(context.Background(), h, st, opts); err != nil {
		h.inbox.Close()
		return nil, err
	}
	reg, err := channels.New(channels.Options{
		Store:    st,
		Logger:   log,
		Describe: func(server string, err error) string { return requestFailed(server, err).Text },
		OnNotice: func(n channels.Notice) {
			log.Info("channel notice", "kind", string(n.Kind), "cause", n.Cause, "server", n.Server, "agent", n.Agent, "channels", len(n.Channels), "reason", n.Reason)
			if set := h.running(); set != nil {
				set.rt.Notice(n)
			}
		},
		OnRegistered: h.wakeAgents,
		Inbox:        h.inbox,
		Coalescer:    h.coalescer,
		Now:          h.now,
	})
	if err != nil {
		h.inbox.Close()
		return nil, err
	}
	h.channels = reg
	h.hooks = hooks.New(hooks.Options{Logger: log})
	h.infer = inference.New(inference.Options{Logger: log, Route: h.routeInference})
	h.limits = lograte.New(log, "")
	h.refs = content.NewRefs(0)
	h.fetcher = fetchref.New(fetchref.Options{Refs: h.refs, Server: h.fetchServer, Dir: opts.RefsDir, Logger: log})
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

// Start starts cfg's agents, then connects every server in cfg,
// concurrently, and returns at once. A server that fails to connect is
// logged (with reconnect on, its session keeps trying in the background)
// while the others come up. Settled is closed once every one of these
// connects has finished, either way. Start fails, connecting nothing, when
// an agent can't start (its script file can't be read, say), and when
// agents were started before.
func (h *Host) Start(cfg *config.Config) error {
	set, err := h.startAgents(cfg)
	if err != nil {
		h.settleOn.Do(func() { close(h.settled) })
		return err
	}
	h.mu.Lock()
	if h.closed || h.agents != nil {
		closed := h.closed
		h.mu.Unlock()
		if set != nil {
			set.rt.Close()
		}
		if closed {
			return ErrHostClosed
		}
		return errors.New("host: Start was called twice")
	}
	h.agents = set
	h.mu.Unlock()
	for _, s := range cfg.Servers {
		s = s.WithDefaults()
		// Mark each id before returning, so a call made at once reads
		// that its server is connecting rather than unknown.
		h.mu.Lock()
		err := h.admitLocked(s, "")
		if err == nil {
			h.markLocked(s)
			h.startWG.Add(1)
		}
		h.mu.Unlock()
		if err != nil {
			h.log.Error("server not connected", "server", s.ID, "error", err.Error())
			continue
		}
		go func() {
			defer h.startWG.Done()
			if err := h.connectMarked(h.ctx, s); err != nil && h.ctx.Err() == nil {
				h.log.Error("server failed to connect", "server", s.ID, "error", err.Error())
			}
		}()
	}
	if set != nil {
		// The inbox's pruning (prune.go): at start, then hourly.
		h.goBackground(h.pruneLoop)
	}
	settle := func() {
		h.startWG.Wait()
		h.settleOn.Do(func() { close(h.settled) })
	}
	if !h.goBackground(settle) {
		// Closed: Start connected nothing, so nothing is left to settle.
		settle()
	}
	return nil
}

// Settled is closed when the connects Start began have all finished.
func (h *Host) Settled() <-chan struct{} { return h.settled }

// Connect connects one server and adds it to the registry. It refuses an
// id that is registered (ErrAlreadyConnected) or has a connect in flight
// (ErrConnectInFlight), and a tool prefix that meets another server's,
// before it changes anything; after Close it fails with ErrHostClosed.
// When ctx ends before the connect is done, it returns ctx's error and
// registers nothing, reconnect or not. With reconnect on, a connect that
// fails otherwise still registers the server and returns nil: its session
// keeps retrying, and calls meanwhile read that it is reconnecting. cfg
// gets the defaults a file's server gets (config.Server.WithDefaults).
func (h *Host) Connect(ctx context.Context, cfg config.Server) error {
	cfg = cfg.WithDefaults()
	h.mu.Lock()
	if err := h.admitLocked(cfg, ""); err != nil {
		h.mu.Unlock()
		return err
	}
	h.markLocked(cfg)
	h.mu.Unlock()
	return h.connectMarked(ctx, cfg)
}

// admitLocked checks that cfg may be connected. replacing names the id a
// restart replaces, which does not count against it.
func (h *Host) admitLocked(cfg config.Server, replacing string) error {
	switch {
	case h.closed:
		return ErrHostClosed
	case h.connecting[cfg.ID]:
		return &ServerError{ID: cfg.ID, Err: ErrConnectInFlight}
	case cfg.ID != replacing && h.servers[cfg.ID] != nil:
		return &ServerError{ID: cfg.ID, Err: ErrAlreadyConnected}
	}
	var existing []config.PrefixOwner
	for id, p := range h.prefixes {
		if id != cfg.ID {
			existing = append(existing, config.PrefixOwner{ID: id, Prefix: p})
		}
	}
	return config.CheckPrefix(cfg.ID, cfg.ToolPrefix, existing)
}

// markLocked marks cfg's id as connecting; the connect that follows must
// be connectMarked, which clears the mark.
func (h *Host) markLocked(cfg config.Server) {
	h.inflight.Add(1)
	h.connecting[cfg.ID] = true
	h.prefixes[cfg.ID] = cfg.ToolPrefix
	h.enterLocked(cfg.ID, StateConnecting).prefix = cfg.ToolPrefix
	delete(h.gone, cfg.ID)
	for id, p := range h.gone {
		if config.PrefixesMeet(p, cfg.ToolPrefix) {
			delete(h.gone, id)
		}
	}
	if !slices.Contains(h.order, cfg.ID) {
		h.order = append(h.order, cfg.ID)
	}
}

// connectMarked connects a server whose id is marked as connecting, and
// clears the mark either way. Close ends it, and waits for it.
func (h *Host) connectMarked(ctx context.Context, cfg config.Server) error {
	defer h.inflight.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.ctx, cancel)()
	srv := &server{cfg: cfg}
	// The first listing, below, counts as a refresh running from now: a
	// list_changed or a reconnect meanwhile waits for it rather than
	// listing beside it, where an older listing could land last.
	srv.refresh.running = true
	for _, n := range grantPolicy(cfg).Notes(implementedFor(cfg, h.running())) {
		list := "enable"
		if n.Disable {
			list = "disable"
		}
		h.log.Warn("a capability pattern in host policy does nothing here", "server", cfg.ID,
			"list", list, "pattern", n.Pattern, "problem", string(n.Problem), "paths", n.Paths)
	}
	sess, err := session.Connect(ctx, h.sessionConfig(srv))
	h.mu.Lock()
	delete(h.connecting, cfg.ID)
	if err != nil || h.closed {
		h.leaveLocked(cfg.ID)
		closed := h.closed
		if err != nil && !closed {
			h.failLocked(cfg.ID, StateFailed, err.Error())
		}
		h.mu.Unlock()
		if err == nil {
			sess.Close()
			sess.Wait()
		}
		if closed {
			// Close ended the connect (its context error says only that).
			return ErrHostClosed
		}
		return err
	}
	if srv.ended {
		// The connection ended for good before the server could be
		// registered: it would sit in the registry dead.
		h.leaveLocked(cfg.ID)
		err := fmt.Errorf("MCPL server %q: the connection ended as soon as it was made", cfg.ID)
		h.failLocked(cfg.ID, StateDisconnected, err.Error())
		h.mu.Unlock()
		sess.Close()
		sess.Wait()
		return err
	}
	srv.sess = sess
	h.servers[cfg.ID] = srv
	if sess.State().Connected {
		h.enterLocked(cfg.ID, StateConnected)
	} else {
		// Its first connect failed, and the session redials.
		h.enterLocked(cfg.ID, StateReconnecting)
	}
	h.mu.Unlock()
	// The first listing is done before Connect returns, so the server's
	// tools are there for the next call. A session still retrying its
	// first connect lists them when it connects (OnConnect). A listing the
	// caller's ctx cut short is done again in the background.
	if sess.State().Connected && !h.refreshNow(ctx, srv, sess) && ctx.Err() != nil {
		srv.refresh.request()
	}
	if srv.refresh.again() {
		h.refreshLoop(srv, sess)
	}
	return nil
}

func (h *Host) sessionConfig(srv *server) session.Config {
	cfg := srv.cfg
	h.coalescer.bind(cfg)
	return session.Config{
		ID:             cfg.ID,
		Dial:           func(ctx context.Context) (transport.Stream, error) { return h.dial(ctx, cfg) },
		Policy:         grantPolicy(cfg),
		Implemented:    implementedFor(cfg, h.running()),
		Coalescing:     coalescingFor(h.running()),
		OnPushEvent:    h.acceptPushEvent,
		RequestTimeout: cfg.TimeoutFor(""),
		Discover:       true,
		Version:        cfg.ProtocolVersion,
		Reconnect:      reconnect(cfg),
		Handler:        wire.HandlerFunc(func(ctx context.Context, req *wire.Request) (any, error) { return h.serveInbound(ctx, srv, req) }),
		Bind: func(s *session.Session) {
			h.channels.AddServer(cfg.ID, sessionConn{s}, channelConfig(cfg))
		},
		Logger:   h.log,
		Observer: h.metrics.Server(cfg.ID),
		OnConnect: func(s *session.Session) {
			h.mu.Lock()
			h.connected[cfg.ID] = time.Now()
			if h.servers[cfg.ID] == srv {
				h.enterLocked(cfg.ID, StateConnected)
			}
			h.mu.Unlock()
			h.warnUnhonoured(cfg, s)
			h.acceptSuggestions(cfg, s)
			h.channels.Connected(cfg.ID)
			h.wakeAgents()
			// Every connection lists the tools: until the server is
			// registered, connectMarked does; after that, this does. The
			// first connection is not always the first connect's: with
			// reconnect on, a failed first connect is retried, and the
			// retry lists them here.
			h.mu.Lock()
			registered := srv.sess != nil
			h.mu.Unlock()
			if registered {
				h.refreshLater(srv, s)
			}
		},
		OnDisconnect: func(s *session.Session, willReconnect bool) {
			h.mu.Lock()
			delete(h.connected, cfg.ID)
			if willReconnect && h.servers[cfg.ID] == srv {
				h.failLocked(cfg.ID, StateReconnecting, "the connection was lost; reconnecting")
			}
			h.mu.Unlock()
			// The server's registrations end with its connection; after a
			// reconnect it registers them again. Decisions stay.
			h.channels.Disconnected(cfg.ID, !willReconnect)
			if !willReconnect {
				h.dropIfCurrent(srv)
			}
		},
	}
}

// warnUnhonoured says at connect what of a server's config its grant
// leaves without effect, so an option isn't silently ignored:
// channels.acknowledgeSeen needs channels.acknowledge.
func (h *Host) warnUnhonoured(cfg config.Server, s *session.Session) {
	if cfg.Channels.AcknowledgeSeen != "" && !s.Grant().Has("channels.acknowledge") {
		h.log.Warn("channels.acknowledgeSeen is set for this server, but its grant has no channels.acknowledge (the server doesn't offer it, or policy denies it), so no seen-acknowledgment is sent",
			"server", cfg.ID)
	}
}

// dial opens a server's stream: its process, its WebSocket, or its
// Streamable HTTP stream (an http:// or https:// URL).
func (h *Host) dial(ctx context.Context, cfg config.Server) (transport.Stream, error) {
	s, err := h.dialOnce(ctx, cfg)
	if err != nil {
		h.noteFailure(cfg.ID, err)
	}
	return s, err
}

// dialOnce is dial without noting a failure in the server's record.
func (h *Host) dialOnce(ctx context.Context, cfg config.Server) (transport.Stream, error) {
	if cfg.URL == "" {
		return transport.Spawn(command(cfg), transport.StdioOptions{Logger: h.log.With("server", cfg.ID)})
	}
	var tok string
	if cfg.TokenEnv != "" {
		var err error
		if tok, err = cfg.Token(h.lookup); err != nil {
			return nil, err
		}
	}
	log := h.log.With("server", cfg.ID)
	if transport.IsHTTPURL(cfg.URL) {
		return transport.DialStreamableHTTP(ctx, cfg.URL, transport.HTTPOptions{Logger: log, Token: tok})
	}
	return transport.DialWebSocket(ctx, cfg.URL, transport.WebSocketOptions{Logger: log, Token: tok, TokenParam: cfg.TokenParam})
}

// dropIfCurrent removes a server whose connection ended for good, if it is
// still the registered one. Its connection can end before connectMarked
// has registered it (the session calls OnDisconnect from its own
// goroutine): then connectMarked does not.
func (h *Host) dropIfCurrent(srv *server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// One not registered yet is left out by connectMarked.
	srv.ended = true
	if h.servers[srv.cfg.ID] == srv {
		delete(h.servers, srv.cfg.ID)
		h.leaveLocked(srv.cfg.ID)
		h.failLocked(srv.cfg.ID, StateDisconnected, "the connection ended, and it will not reconnect")
		h.records[srv.cfg.ID].reconnects = srv.sess.Reconnects()
		h.log.Info("server left the registry: its connection ended and it will not reconnect", "server", srv.cfg.ID)
	}
}

// leaveLocked forgets a server that is no longer registered nor
// connecting, keeping its prefix in gone so that its calls read that it is
// gone.
func (h *Host) leaveLocked(id string) {
	if p, ok := h.prefixes[id]; ok {
		h.gone[id] = p
	}
	delete(h.prefixes, id)
	h.order = remove(h.order, id)
}

// Restart disconnects a server and connects it again, with newCfg when not
// nil. Calls to its tools meanwhile read the "connecting" text, never that
// it is gone.
func (h *Host) Restart(ctx context.Context, id string, newCfg *config.Server) error {
	h.mu.Lock()
	if h.connecting[id] {
		h.mu.Unlock()
		return &ServerError{ID: id, Err: ErrConnectInFlight}
	}
	old := h.servers[id]
	if old == nil {
		h.mu.Unlock()
		return &ServerError{ID: id, Err: ErrNotConnected}
	}
	cfg := old.cfg
	if newCfg != nil {
		cfg = newCfg.WithDefaults()
		if cfg.ID != id {
			h.mu.Unlock()
			return fmt.Errorf("a restart of %q cannot change its id to %q", id, cfg.ID)
		}
	}
	if err := h.admitLocked(cfg, id); err != nil {
		h.mu.Unlock()
		return err
	}
	delete(h.servers, id)
	delete(h.connected, id) // its OnDisconnect doesn't run for a Close
	h.markLocked(cfg)
	h.mu.Unlock()
	old.sess.Close()
	old.sess.Wait()
	h.channels.Disconnected(id, true)
	return h.connectMarked(ctx, cfg)
}

// Disconnect closes a server and removes it from the registry.
func (h *Host) Disconnect(id string) error {
	h.mu.Lock()
	if h.connecting[id] {
		h.mu.Unlock()
		return &ServerError{ID: id, Err: ErrConnectInFlight}
	}
	srv := h.servers[id]
	if srv == nil {
		h.mu.Unlock()
		return &ServerError{ID: id, Err: ErrNotConnected}
	}
	delete(h.servers, id)
	delete(h.connected, id) // its OnDisconnect doesn't run for a Close
	h.leaveLocked(id)
	h.forgetLocked(id)
	h.mu.Unlock()
	srv.sess.Close()
	srv.sess.Wait()
	h.channels.Disconnected(id, true)
	return nil
}

// Close closes every server, ends the connects in flight, and waits for
// them and for the host's goroutines. Calls then read that their servers
// are gone; connects are refused.
func (h *Host) Close() error {
	// The agents stop first, while the servers are still there: no turn
	// starts, the turns in flight have Options.ShutdownGrace to end by
	// themselves, then what is left is cut short and recorded if it did
	// anything. What the lifecycle drain below tells them is recorded for
	// their next start.
	h.mu.Lock()
	set := h.agents
	h.mu.Unlock()
	if set != nil {
		set.rt.Stop(h.grace)
	}
	h.mu.Lock()
	h.closed = true
	servers := make([]*server, 0, len(h.servers))
	for id, s := range h.servers {
		servers = append(servers, s)
		h.leaveLocked(id)
	}
	h.servers = map[string]*server{}
	h.mu.Unlock()
	// Lifecycle work in flight finishes first (it needs the sessions),
	// within channels.DrainTimeout.
	h.channels.Close()
	if set != nil {
		// The notices the drain gave agents whose loops had ended are
		// recorded, for their next start.
		set.rt.Close()
	}
	// The inbox commits what it holds; a wedged store doesn't hold Close
	// past channels.AbandonTimeout for it.
	closed := make(chan struct{})
	go func() {
		h.inbox.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(channels.AbandonTimeout):
		h.log.Error("host closed with inbound messages abandoned: the store did not answer in time")
	}
	h.cancel()
	// A connect that ends now finds the host closed and closes its own
	// session.
	h.inflight.Wait()
	// In parallel: each close may wait a grace period for a process that
	// does not exit, and N such servers take one period, not N.
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			s.sess.Close()
			s.sess.Wait()
		})
	}
	wg.Wait()
	h.bg.Wait()
	h.health.close()
	h.limits.Close()
	h.dups.close()
	if h.ownStore != nil {
		return h.ownStore.Close()
	}
	return nil
}

// wakeAgents tells the agents the inbox has new messages, or that what a
// waiting message waits on changed (a registration, a connection).
func (h *Host) wakeAgents() {
	if set := h.running(); set != nil {
		set.rt.Wake()
	}
}

// connectedSince is when server's current connection came up; zero when
// it is not connected.
func (h *Host) connectedSince(server string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.connected[server]
}

// goBackground runs f on a goroutine Close waits for, unless the host is
// closed; it reports whether it did.
func (h *Host) goBackground(f func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		f()
	}()
	return true
}

// serveInbound answers what a server sends that the session passes on:
// its channel methods, inference/request and model/info (the session
// admitted them against the grant current at receipt) and
// tools/list_changed.
func (h *Host) serveInbound(ctx context.Context, srv *server, req *wire.Request) (any, error) {
	if res, err, ok := h.channels.Serve(ctx, srv.cfg.ID, req); ok {
		return res, err
	}
	switch req.Method {
	case protocol.MethodInferenceRequest:
		return h.serveInference(srv, req)
	case protocol.MethodModelInfo:
		return h.modelInfo()
	}
	if req.Method == protocol.MethodProgress {
		h.onProgress(srv, req)
		return nil, nil
	}
	if req.Method == protocol.MethodToolsListChanged {
		h.mu.Lock()
		sess := srv.sess
		h.mu.Unlock()
		if sess != nil {
			h.refreshLater(srv, sess)
		}
		return nil, nil
	}
	return nil, wire.ErrMethodNotFound
}

func remove(l []string, s string) []string {
	out := l[:0]
	for _, x := range l {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
