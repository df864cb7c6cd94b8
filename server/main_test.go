package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// TestMain fails the run if a test left a goroutine behind: a connection's
// reader, an OnConnect, a tool call, a WebSocket's pinger, a session's
// watcher.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait in these tests: a hang fails, it does not stall
// the run.
const waitFor = 10 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// host is the other end of a server connection: a bare wire peer standing
// in for an MCPL host, which answers channels/register, channels/incoming
// and push/event, and records what arrives.
type host struct {
	t    *testing.T
	peer *wire.Peer
	// served receives Serve's return.
	served chan error

	mu       sync.Mutex
	received []*wireMsg
	arrived  chan struct{} // closed and replaced on each arrival
}

type wireMsg struct {
	Method string
	Params json.RawMessage
}

// start serves s on one end of a pipe and returns the host on the other.
// The test's cleanup closes the host and waits for Serve to return.
func start(t *testing.T, s *server.Server) *host {
	t.Helper()
	return startCtx(t, context.Background(), s)
}

func startCtx(t *testing.T, ctx context.Context, s *server.Server) *host {
	t.Helper()
	a, b := transport.Pipe(0)
	h := &host{t: t, served: make(chan error, 1), arrived: make(chan struct{})}
	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodChannelsRegister, func(_ context.Context, req *wire.Request) (any, error) {
		h.record(req)
		var p protocol.ChannelsRegisterParams
		json.Unmarshal(req.Params, &p)
		res := protocol.ChannelResults{Results: []protocol.ChannelResult{}}
		for _, d := range p.Channels {
			ok := d.ID != "refuse-me"
			r := protocol.ChannelResult{ID: d.ID, Accepted: ok}
			if !ok {
				r.Reason = "capability_denied"
			}
			res.Results = append(res.Results, r)
		}
		return res, nil
	})
	mux.HandleFunc(protocol.MethodChannelsChanged, func(_ context.Context, req *wire.Request) (any, error) {
		h.record(req)
		var p protocol.ChannelsChangedParams
		json.Unmarshal(req.Params, &p)
		res := protocol.ChannelResults{Results: []protocol.ChannelResult{}}
		for _, d := range append(p.Added, p.Updated...) {
			res.Results = append(res.Results, protocol.ChannelResult{ID: d.ID, Accepted: true})
		}
		return res, nil
	})
	mux.HandleFunc(protocol.MethodChannelsIncoming, func(_ context.Context, req *wire.Request) (any, error) {
		h.record(req)
		var p protocol.ChannelsIncomingParams
		json.Unmarshal(req.Params, &p)
		res := protocol.ChannelsIncomingResult{Results: []protocol.IncomingResult{}}
		for _, m := range p.Messages {
			res.Results = append(res.Results, protocol.IncomingResult{MessageID: m.MessageID, Accepted: true, ConversationID: "conv-1"})
		}
		return res, nil
	})
	mux.HandleFunc(protocol.MethodPushEvent, func(_ context.Context, req *wire.Request) (any, error) {
		h.record(req)
		return protocol.PushEventResult{Accepted: true, InferenceID: "inf-1"}, nil
	})
	h.peer = wire.NewPeer(a, wire.Options{Name: "server", Handler: mux, Logger: quiet, Timeout: waitFor})
	go func() { h.served <- server.ServeStream(s, ctx, b) }()
	t.Cleanup(func() {
		h.peer.Close()
		select {
		case <-h.served:
		case <-time.After(waitFor):
			t.Error("Serve did not return after the host closed")
		}
	})
	return h
}

func (h *host) record(req *wire.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.received = append(h.received, &wireMsg{Method: req.Method, Params: req.Params})
	close(h.arrived)
	h.arrived = make(chan struct{})
}

// got returns what the host has received so far.
func (h *host) got() []*wireMsg {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*wireMsg(nil), h.received...)
}

// waitN waits until the host has received n messages.
func (h *host) waitN(n int) []*wireMsg {
	h.t.Helper()
	deadline := time.After(waitFor)
	for {
		h.mu.Lock()
		got, ch := append([]*wireMsg(nil), h.received...), h.arrived
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("host received %d messages, want %d", len(got), n)
		}
	}
}

// call sends a request and decodes its result, failing the test on error.
func (h *host) call(method string, params, result any) {
	h.t.Helper()
	if err := h.peer.Call(context.Background(), method, params, result); err != nil {
		h.t.Fatalf("%s: %v", method, err)
	}
}

// callErr sends a request that must fail with a JSON-RPC error, and returns
// it.
func (h *host) callErr(method string, params any) *wire.CallError {
	h.t.Helper()
	err := h.peer.Call(context.Background(), method, params, nil)
	var ce *wire.CallError
	if !errors.As(err, &ce) || ce.Outcome != wire.ErrorResponse {
		h.t.Fatalf("%s: got %v, want an error answer", method, err)
	}
	return ce
}

// initialize runs the MCP handshake and returns the server's answer.
func (h *host) initialize() protocol.InitializeResult {
	h.t.Helper()
	var res protocol.InitializeResult
	h.call(protocol.MethodInitialize, protocol.InitializeParams{
		ProtocolVersion: protocol.ProtocolVersion,
		ClientInfo:      protocol.Implementation{Name: "test-host", Version: "1"},
	}, &res)
	if err := h.peer.Notify(context.Background(), protocol.MethodInitialized, nil); err != nil {
		h.t.Fatal(err)
	}
	// A round trip: the notification has been handled. (A message that
	// arrives while the server's peer is closing trips a data race in
	// wire's inbox.push, which reads q.closed after unlocking; tests that
	// close the server keep the host quiet meanwhile.)
	h.call(protocol.MethodPing, nil, nil)
	return res
}

// policy sends a policy Request and returns the receipt as raw JSON.
func (h *host) policy(effective []string, enabled, disabled []string) json.RawMessage {
	h.t.Helper()
	var raw json.RawMessage
	h.call(protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{
		EffectiveCapabilities: effective, DeniedCapabilities: []string{}, Enabled: enabled, Disabled: disabled,
	}, &raw)
	// The server applies an expansion once the receipt is written; a
	// round trip makes sure it has, as any later message of the host's
	// would find it.
	h.call(protocol.MethodPing, nil, nil)
	return raw
}

// connOf returns the Conn the server gave this connection, by way of
// OnConnect's channel.
func recvConn(t *testing.T, ch <-chan *server.Conn) *server.Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(waitFor):
		t.Fatal("OnConnect was not called")
		return nil
	}
}

// closed reports whether ch is closed now.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitClosed fails unless ch closes in time.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("%s did not happen", what)
	}
}
