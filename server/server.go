package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/advert"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Options configures a Server. The zero value is usable: an MCPL 0.5
// server that advertises no privileged capability and declares no feature
// set, like examples/echo.
type Options struct {
	// Instructions, if not empty, is sent in the initialize answer.
	Instructions string

	// Capabilities lists the MCPL capability paths the server advertises,
	// as dot paths from SPEC §6.2 ("pushEvents", "channels.register",
	// "contextHooks.beforeInference.observe"). They are advertised as the
	// nested object of SPEC §5.1, each leaf true; a path that has
	// sub-capabilities of its own ("inferenceRequest") is advertised as an
	// object, never as true, since true would claim every leaf beneath it;
	// and since an object advertises its own path, a path's ancestor that
	// is a capability itself ("inferenceRequest" of
	// "inferenceRequest.streaming") is advertised with it.
	// "tools" is MCP's own capability: it is advertised, as
	// capabilities.tools, when a tool is added, whatever this says.
	// channels.typing, channels.acknowledge and channels.streaming are
	// advertised, after these, when their handler is set
	// (HandleChannelTyping, HandleChannelAcknowledge, HandleOutgoing), as
	// well as when this names them. A path outside the vocabulary panics in
	// New.
	Capabilities []string

	// FeatureSets are the server's declared feature sets (SPEC §6.1),
	// advertised in the 0.5 record form {name: {description, uses}}. Each
	// needs a name, a description and a uses list of vocabulary paths, or
	// New panics. A set whose uses the host does not grant is reported
	// degraded in the policy receipt.
	FeatureSets []FeatureSet

	// OnConnect, if set, is called once per connection, in a goroutine of
	// its own, as the connection starts. ctx ends when the connection
	// does, and the connection's Serve returns only after OnConnect has.
	// It is the place for a connection's own work: wait on c.Ready(), then
	// register channels and deliver messages until ctx ends.
	OnConnect func(ctx context.Context, c *Conn)

	// CheckPolicy, if set, is called with each featureSets/update Request
	// once the SDK has computed its receipt (accepted, or degraded with
	// the unavailable feature sets). It may add to or edit the receipt (a
	// note, an effect). Returning an error refuses the policy: a *Refusal
	// names its fallback and reason; any other error refuses with fallback
	// "mcp-only" and the error's text as the reason. It is called from the
	// connection's dispatch goroutine and must not wait on the host.
	CheckPolicy func(ctx context.Context, p Policy, receipt *protocol.PolicyReceipt) error

	// Logger receives operator detail. Nil means slog.Default(). A server
	// on stdio must not log to stdout, which carries the protocol.
	Logger *slog.Logger

	// MaxMessageSize bounds one message the server reads, on every
	// transport (0 means 16 MiB). A larger message ends the connection.
	MaxMessageSize int

	// PingInterval is how often a WebSocket connection is pinged (0 means
	// 30s; negative disables pings and the idle close), and IdleTimeout
	// closes one from which nothing, not even a pong, has arrived for that
	// long (0 means 60s).
	PingInterval, IdleTimeout time.Duration
}

// FeatureSet is one declared feature set (SPEC §6.1, §6.2).
type FeatureSet struct {
	Name        string
	Description string
	// Uses are the capability paths the set needs, from the vocabulary of
	// SPEC §6.2.
	Uses []string
}

// Server is an MCPL server: what it declares (its name, version,
// capabilities, feature sets and tools) and its handlers. One Server serves
// any number of connections, each with its own Conn and policy. Add tools
// and handlers before serving; they are safe to add later, but a
// connection's host learns of a tool only when it lists them.
type Server struct {
	name, version string
	opts          Options
	log           *slog.Logger

	mu      sync.RWMutex
	tools   []*tool
	byName  map[string]*tool
	open    func(context.Context, OpenRequest) (protocol.ChannelDescriptor, error)
	close   func(context.Context, string) error
	publish func(context.Context, PublishRequest) (Posted, error)
	// The handlers whose setting advertises their capability.
	typing      func(context.Context, TypingRequest)
	acknowledge func(context.Context, AcknowledgeRequest) (AcknowledgeResult, error)
	outgoing    func(context.Context, OutgoingEvent)
	render      func(context.Context, RenderRequest) (RenderResult, error)

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
}

// New returns a Server named name at version, as its serverInfo says. opts
// may be nil; it is copied. New panics when opts declares a capability path
// or feature set that is not valid: that is a programmer's error.
func New(name, version string, opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
		o.Capabilities = slices.Clone(o.Capabilities)
		o.FeatureSets = slices.Clone(o.FeatureSets)
	}
	if err := validate(o); err != nil {
		panic(err)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		name:    name,
		version: version,
		opts:    o,
		log:     log,
		byName:  make(map[string]*tool),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// validate checks the declarations New was given.
func validate(o Options) error {
	for _, p := range o.Capabilities {
		if !grant.Known(p) {
			return fmt.Errorf("server: capability %q is not a path of the MCPL vocabulary (SPEC §6.2): %s",
				p, strings.Join(grant.Vocabulary(), ", "))
		}
		if parent := advert.Orphan(p, o.Capabilities); parent != "" {
			return fmt.Errorf("server: capability %q needs its parent %q declared too: the object that advertises it advertises the parent (SPEC §5.1)", p, parent)
		}
	}
	seen := map[string]bool{}
	for _, fs := range o.FeatureSets {
		switch {
		case fs.Name == "":
			return errors.New("server: a feature set has no name")
		case seen[fs.Name]:
			return fmt.Errorf("server: feature set %q is declared twice", fs.Name)
		case fs.Description == "":
			return fmt.Errorf("server: feature set %q has no description (SPEC §6.2 requires one)", fs.Name)
		case len(fs.Uses) == 0:
			return fmt.Errorf("server: feature set %q has no uses; a host disables it as invalid_uses", fs.Name)
		}
		seen[fs.Name] = true
		for _, u := range fs.Uses {
			if !grant.Known(u) {
				return fmt.Errorf("server: feature set %q uses %q, which is not a capability path (SPEC §6.2); a host disables it as invalid_uses", fs.Name, u)
			}
		}
	}
	return nil
}

// Name returns the server's name.
func (s *Server) Name() string { return s.name }

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("server: closed")

// ErrRefusedClose is returned by Serve when this server refused the host's
// policy naming fallback "close" (SPEC §6.7): having sent the receipt, it
// ended the connection.
var ErrRefusedClose = errors.New("server: refused the host's policy with fallback close; connection ended")

// ServeConn serves one connection over conn, newline-delimited JSON-RPC
// (MCP's stdio framing) over any byte stream: a net.Conn, a pipe. It owns
// conn and closes it. It returns nil when the host ended the connection
// cleanly (end of stream) or Conn.Close ended it, ctx's error when ctx
// ended first, ErrServerClosed after Close, ErrRefusedClose after a
// refusal naming fallback "close", or the transport's error. Before
// returning it waits for the connection's OnConnect and tool calls to
// return; their ctx has ended by then. Every handler's ctx carries ctx's
// values.
func (s *Server) ServeConn(ctx context.Context, conn io.ReadWriteCloser) error {
	return s.serve(ctx, transport.NewLineStream(conn, conn, conn, s.opts.MaxMessageSize))
}

// serve runs one connection over st until it ends, as ServeConn says.
func (s *Server) serve(ctx context.Context, st transport.Stream) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	if s.ctx.Err() != nil {
		st.Close()
		return ErrServerClosed
	}

	c := newConn(s, ctx)
	c.peer = wire.NewPeer(st, wire.Options{
		Name:    "host",
		Handler: wire.HandlerFunc(c.serve),
		Context: ctx,
		Logger:  s.log,
	})
	if s.opts.OnConnect != nil {
		c.goFunc(func() { s.opts.OnConnect(c.ctx, c) })
	}

	var err error
	closeHere := true
	select {
	case <-c.peer.Done():
		// The host ended it: a request after it reads as a closed
		// connection, not as one this side closed.
		closeHere = false
		err = c.peer.Err()
		if errors.Is(err, io.EOF) {
			err = nil
		}
	case <-c.refusedClose:
		err = ErrRefusedClose
	case <-c.ctx.Done():
		switch {
		case s.ctx.Err() != nil:
			err = ErrServerClosed
		case parent.Err() != nil:
			err = parent.Err()
		}
		// Otherwise Conn.Close ended it: nil.
	}
	c.end()
	if closeHere {
		c.peer.Close()
	}
	c.wg.Wait()
	return err
}

// ServeStdio serves one connection over this process's stdin and stdout,
// and returns when stdin closes (nil), or as ServeConn does. Nothing else may
// write to stdout meanwhile.
//
// A read from stdin cannot be interrupted portably: when ctx ends first, a
// goroutine stays blocked reading stdin until it closes or the process
// exits.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.serveIO(ctx, os.Stdin, os.Stdout)
}

// serveIO serves one connection reading r and writing w, one message per
// line. r is copied through a pipe so that ending the connection never
// waits on a read of r that cannot be interrupted.
func (s *Server) serveIO(ctx context.Context, r io.Reader, w io.Writer) error {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err) // nil: end of stream
	}()
	return s.serve(ctx, transport.NewLineStream(pr, w, pr, s.opts.MaxMessageSize))
}

// ServeHTTP upgrades the request to a WebSocket and serves one connection
// over it until it ends, one JSON-RPC message per text frame: one
// connection per request. Mount the Server on a mux as any handler. The
// request's context values reach every handler.
// http.Server.Shutdown does not end hijacked connections; register Close
// with http.Server.RegisterOnShutdown to end them.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := transport.AcceptWebSocket(w, r, transport.WebSocketOptions{
		MaxMessageSize: s.opts.MaxMessageSize,
		PingInterval:   s.opts.PingInterval,
		IdleTimeout:    s.opts.IdleTimeout,
		Logger:         s.log,
	})
	if err != nil {
		s.log.Info("websocket upgrade failed", slog.String("remote", r.RemoteAddr), slog.String("error", err.Error()))
		return
	}
	if err := s.serve(r.Context(), ws); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Info("websocket connection ended", slog.String("remote", r.RemoteAddr), slog.String("error", err.Error()))
	}
}

// Close ends every connection the Server is serving, and every later Serve
// returns ErrServerClosed at once. It does not wait for them to end.
func (s *Server) Close() error {
	s.cancel()
	return nil
}

func answeredVersion(asked string) string {
	if slices.Contains(protocol.LegacyVersions, asked) {
		return asked
	}
	return protocol.LegacyVersions[0]
}

// initializeResult is the server's answer to an initialize that asked for
// protocol version asked: that version when it is one of MCP's
// initialize revisions (protocol.LegacyVersions), else the newest of
// them, as MCP's lifecycle says. The SDK serves every one of them alike:
// what changed between them (structured output, resource links, titles)
// is what a handler chooses to send.
func (s *Server) initializeResult(asked string) protocol.InitializeResult {
	caps := protocol.ServerCapabilities{Experimental: map[string]json.RawMessage{}}
	s.mu.RLock()
	if len(s.tools) > 0 {
		caps.Tools = json.RawMessage(`{}`)
	}
	paths := s.advertised()
	s.mu.RUnlock()
	caps.Experimental["mcpl"] = advertisement(paths, s.opts.FeatureSets)
	return protocol.InitializeResult{
		ProtocolVersion: answeredVersion(asked),
		Capabilities:    caps,
		ServerInfo:      &protocol.Implementation{Name: s.name, Version: s.version},
		Instructions:    s.opts.Instructions,
	}
}
