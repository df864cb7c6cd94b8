package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Conn is one connection to a host: its policy, and the methods that send
// to the host. A Conn is safe for concurrent use. Reach it from a handler
// with ConnFromContext, or in Options.OnConnect.
type Conn struct {
	s    *Server
	peer *wire.Peer
	log  *slog.Logger

	ctx    context.Context // ends when the connection does
	cancel context.CancelFunc
	wg     sync.WaitGroup // OnConnect, tool calls, a closing refusal

	ready        chan struct{} // closed when a policy is first established
	readyOnce    sync.Once
	refusedClose chan struct{} // closed after a refusal naming fallback close
	refuseOnce   sync.Once

	// running holds the requests whose handlers run in goroutines of
	// their own (tool calls, push/render), by id, while they run: what
	// the host's notifications/cancelled can reach.
	runMu   sync.Mutex
	running map[string]*running

	mu       sync.Mutex
	state    policyState
	policy   *Policy // nil until established, and after a refusal
	init     *protocol.InitializeParams
	channels []protocol.ChannelDescriptor // registered and accepted, in order
}

type policyState int

const (
	statePending     policyState = iota // no policy Request yet
	stateEstablished                    // the last policy Request was accepted
	stateRefused                        // the last policy Request was refused
)

func newConn(s *Server, ctx context.Context) *Conn {
	c := &Conn{s: s, log: s.log, ready: make(chan struct{}), refusedClose: make(chan struct{}), running: make(map[string]*running)}
	c.ctx, c.cancel = context.WithCancel(context.WithValue(ctx, connKey{}, c))
	return c
}

type connKey struct{}

// ConnFromContext returns the connection a handler's ctx belongs to: every
// handler the Server calls (tools, channel handlers, CheckPolicy, and
// OnConnect) gets a ctx that carries it.
func ConnFromContext(ctx context.Context) (*Conn, bool) {
	c, ok := ctx.Value(connKey{}).(*Conn)
	return c, ok
}

// goFunc runs f in a goroutine the connection waits for before Serve
// returns.
func (c *Conn) goFunc(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// end ends the connection's context.
func (c *Conn) end() { c.cancel() }

func (c *Conn) refuseClose() { c.refuseOnce.Do(func() { close(c.refusedClose) }) }

// Ready is closed once the host has established a policy: the first
// featureSets/update Request this server accepted. It stays open while the
// policy is pending or refused, and on a connection that ends first (select
// on the connection's ctx too). A later policy may still narrow what is
// granted: check Policy, or let the Conn methods do it.
func (c *Conn) Ready() <-chan struct{} { return c.ready }

// Policy returns the policy in force and whether one is established. Until
// the host's first policy Request is accepted, and after a refusal, it is
// the empty policy and false: nothing is granted. A policy Request that
// widens the grant applies once its receipt is written, before the server
// handles the host's next message (SPEC §6.7); one that narrows it applies
// at once.
func (c *Conn) Policy() (Policy, bool) { return c.currentPolicy() }

func (c *Conn) currentPolicy() (Policy, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.policy == nil {
		return Policy{Effective: []string{}, Denied: []string{}, Disabled: []string{}}, false
	}
	return *c.policy, c.state == stateEstablished
}

func (c *Conn) policyState() policyState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// setPolicy installs p in state st; establishing it closes Ready.
func (c *Conn) setPolicy(p *Policy, st policyState) {
	c.mu.Lock()
	c.policy, c.state = p, st
	c.mu.Unlock()
	if st == stateEstablished {
		c.readyOnce.Do(func() { close(c.ready) })
	}
}

// Initialize returns the host's initialize request, and false before it
// has arrived.
func (c *Conn) Initialize() (protocol.InitializeParams, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.init == nil {
		return protocol.InitializeParams{}, false
	}
	return *c.init, true
}

// Channels returns the channels this connection registered that the host
// accepted, as channels/register and channels/changed left them.
func (c *Conn) Channels() []protocol.ChannelDescriptor {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.channels)
}

// Close ends the connection; its Serve returns nil. It does not wait for
// the connection to end, so a handler may call it.
func (c *Conn) Close() error {
	c.cancel()
	return nil
}

// serve is the connection's wire handler. It is called in arrival order;
// tool calls and push/render alone are handed to a goroutine each, so a
// slow tool holds up nothing else, and the host's notifications/cancelled
// reaches them while they run.
func (c *Conn) serve(ctx context.Context, req *wire.Request) (any, error) {
	ctx = context.WithValue(ctx, connKey{}, c)
	switch req.Method {
	case protocol.MethodInitialize:
		var p protocol.InitializeParams
		if len(req.Params) > 0 {
			// Tolerant: a host's odd initialize params are no reason to
			// refuse it; what could be read is kept.
			json.Unmarshal(req.Params, &p)
		}
		c.mu.Lock()
		c.init = &p
		c.mu.Unlock()
		return c.s.initializeResult(p.ProtocolVersion), nil
	case protocol.MethodInitialized:
		return nil, nil
	case protocol.MethodPing:
		return struct{}{}, nil
	case protocol.MethodCancelled:
		if !req.IsNotification() {
			return nil, wire.ErrMethodNotFound
		}
		c.cancelled(req)
		return nil, nil
	case protocol.MethodFeatureSetsUpdate:
		return c.featureSetsUpdate(ctx, req)
	case protocol.MethodToolsList:
		return c.s.listTools(), nil
	case protocol.MethodToolsCall:
		return c.callTool(ctx, req)
	case protocol.MethodChannelsOpen:
		return c.channelOpen(ctx, req)
	case protocol.MethodChannelsClose:
		return c.channelClose(ctx, req)
	case protocol.MethodChannelsPublish:
		return c.channelPublish(ctx, req)
	case protocol.MethodChannelsList:
		return c.channelList(req)
	case protocol.MethodChannelsTyping:
		return c.channelTyping(ctx, req)
	case protocol.MethodChannelsAcknowledge:
		return c.channelAcknowledge(ctx, req)
	case protocol.MethodChannelsOutgoingChunk, protocol.MethodChannelsOutgoingComplete:
		return c.channelOutgoing(ctx, req)
	case protocol.MethodPushRender:
		return c.pushRender(ctx, req)
	}
	return nil, wire.ErrMethodNotFound
}
