package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// sessionHost records what a session admits from the server.
type sessionHost struct {
	mu       sync.Mutex
	inbound  []session.Inbound
	pushes   []session.PushEvent
	incoming []protocol.IncomingMessage
}

func (h *sessionHost) config(id string, dial func(context.Context) (transport.Stream, error)) session.Config {
	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodChannelsRegister, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsRegisterParams
		json.Unmarshal(req.Params, &p)
		res := protocol.ChannelResults{Results: []protocol.ChannelResult{}}
		for _, d := range p.Channels {
			res.Results = append(res.Results, protocol.ChannelResult{ID: d.ID, Accepted: true})
		}
		return res, nil
	})
	mux.HandleFunc(protocol.MethodChannelsIncoming, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsIncomingParams
		json.Unmarshal(req.Params, &p)
		res := protocol.ChannelsIncomingResult{Results: []protocol.IncomingResult{}}
		h.mu.Lock()
		for _, m := range p.Messages {
			h.incoming = append(h.incoming, m)
			res.Results = append(res.Results, protocol.IncomingResult{MessageID: m.MessageID, Accepted: true, ConversationID: "conv-1"})
		}
		h.mu.Unlock()
		return res, nil
	})
	return session.Config{
		ID:   id,
		Dial: dial,
		// What this test host consumes: the mux's channel methods and the
		// push recorder below.
		Implemented: []string{"tools", "pushEvents", "channels.register", "channels.incoming", "channels.lifecycle"},
		Handler:     mux,
		OnPushEvent: func(_ context.Context, e session.PushEvent) (protocol.PushEventResult, error) {
			h.mu.Lock()
			h.pushes = append(h.pushes, e)
			h.mu.Unlock()
			return protocol.PushEventResult{Accepted: true}, nil
		},
		OnInbound: func(in session.Inbound) {
			h.mu.Lock()
			h.inbound = append(h.inbound, in)
			h.mu.Unlock()
		},
		Logger:         quiet,
		RequestTimeout: waitFor,
	}
}

// TestSessionWebSocket connects a session (the host) to an SDK server over
// WebSocket on 127.0.0.1: the policy exchange ends degraded for the one
// feature set the host cannot grant; the server's work waits for it, then
// its channel registration, message and push event (sent twice with one id)
// are admitted; the host's channels/open and tools/call are answered.
func TestSessionWebSocket(t *testing.T) {
	type outcome struct {
		early               error
		first, retry        server.PushResult
		firstErr, retryErr  error
		incoming            []protocol.IncomingResult
		incomingErr, regErr error
	}
	results := make(chan outcome, 1)
	s := server.New("e2e", "1.0.0", &server.Options{
		Logger:       quiet,
		Capabilities: []string{"pushEvents", "channels.register", "channels.incoming", "channels.lifecycle", "inferenceLifecycle"},
		FeatureSets: []server.FeatureSet{
			{Name: "e2e.alerts", Description: "alerts", Uses: []string{"pushEvents"}},
			{Name: "e2e.rooms", Description: "rooms", Uses: []string{"channels.register", "channels.incoming"}},
			{Name: "e2e.watch", Description: "needs what this host lacks", Uses: []string{"inferenceLifecycle"}},
		},
		OnConnect: func(ctx context.Context, c *server.Conn) {
			var o outcome
			_, o.early = c.RegisterChannels(ctx, protocol.ChannelDescriptor{ID: "e2e:#early"})
			select {
			case <-c.Ready():
			case <-ctx.Done():
				return
			}
			_, o.regErr = c.RegisterChannels(ctx, protocol.ChannelDescriptor{ID: "e2e:#room", Label: "#room"})
			o.incoming, o.incomingErr = c.Incoming(ctx, server.Message{ChannelID: "e2e:#room", Content: server.TextContent("hi"), Tags: []string{"chat:mention"}})
			o.first, o.firstErr = c.PushEvent(ctx, server.Event{FeatureSet: "e2e.alerts", Content: server.TextContent("alert")})
			o.retry, o.retryErr = c.PushEvent(ctx, server.Event{FeatureSet: "e2e.alerts", EventID: o.first.EventID, Content: server.TextContent("alert")})
			results <- o
		},
	})
	s.HandleChannelOpen(func(_ context.Context, req server.OpenRequest) (protocol.ChannelDescriptor, error) {
		if req.ChannelID != "e2e:#room" {
			return protocol.ChannelDescriptor{}, server.ErrUnknownChannel
		}
		return protocol.ChannelDescriptor{ID: req.ChannelID, Label: "#room"}, nil
	})
	server.AddTool(s, server.Tool{Name: "echo"}, func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (protocol.CallToolResult, error) {
		return server.TextResult(in.Text), nil
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	var h sessionHost
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	sess, err := session.Connect(ctx, h.config("e2e", func(ctx context.Context) (transport.Stream, error) {
		return transport.DialWebSocket(ctx, url, transport.WebSocketOptions{Logger: quiet})
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	st := sess.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeDegraded || st.Policy.Receipt == nil ||
		len(st.Policy.Receipt.UnavailableFeatures) != 1 || st.Policy.Receipt.UnavailableFeatures[0].FeatureSet != "e2e.watch" {
		t.Errorf("policy = %+v", st.Policy)
	}

	var o outcome
	select {
	case o = <-results:
	case <-time.After(waitFor):
		t.Fatal("the server's work did not finish")
	}
	if !errors.Is(o.early, server.ErrNoPolicy) {
		t.Errorf("RegisterChannels before the policy = %v, want ErrNoPolicy", o.early)
	}
	if o.regErr != nil || o.incomingErr != nil || o.firstErr != nil || o.retryErr != nil {
		t.Fatalf("sends failed: register %v, incoming %v, push %v, retry %v", o.regErr, o.incomingErr, o.firstErr, o.retryErr)
	}
	if len(o.incoming) != 1 || !o.incoming[0].Accepted || o.incoming[0].ConversationID != "conv-1" {
		t.Errorf("incoming results = %+v", o.incoming)
	}
	if !o.first.Accepted || o.retry.EventID != o.first.EventID || !o.retry.Accepted {
		t.Errorf("push = %+v, retry = %+v", o.first, o.retry)
	}

	var open protocol.ChannelsOpenResult
	if err := sess.Call(ctx, protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "e2e:#room"}, &open); err != nil || open.Channel.ID != "e2e:#room" {
		t.Errorf("channels/open = %+v, %v", open, err)
	}
	var echo protocol.CallToolResult
	if err := sess.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"round trip"}`)}, &echo); err != nil || echo.Text() != "round trip" {
		t.Errorf("tools/call = %q, %v", echo.Text(), err)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	var methods []string
	for _, in := range h.inbound {
		if !in.Admitted {
			t.Errorf("the host rejected %s: %s", in.Method, in.Reason)
		}
		methods = append(methods, in.Method)
	}
	want := []string{protocol.MethodChannelsRegister, protocol.MethodChannelsIncoming, protocol.MethodPushEvent, protocol.MethodPushEvent}
	if !slices.Equal(methods, want) {
		t.Errorf("inbound = %v, want %v (nothing before the policy)", methods, want)
	}
	if len(h.pushes) != 1 || h.pushes[0].Params.EventID != o.first.EventID || h.pushes[0].Params.FeatureSet != "e2e.alerts" {
		t.Errorf("push events delivered = %+v, want the one event once", h.pushes)
	}
	if len(h.incoming) != 1 || !slices.Equal(h.incoming[0].Tags, []string{"chat:mention"}) {
		t.Errorf("incoming = %+v", h.incoming)
	}
}

// TestSessionStdio runs examples/echo, written on the SDK, as a subprocess
// of a session: initialize, the policy, a tool call, and a clean exit when
// the session closes its stdin.
func TestSessionStdio(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "echo")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/echo").CombinedOutput(); err != nil {
		t.Fatalf("go build examples/echo: %v\n%s", err, out)
	}
	var proc *transport.Process
	var h sessionHost
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	sess, err := session.Connect(ctx, h.config("echo", func(context.Context) (transport.Stream, error) {
		p, err := transport.Spawn(transport.Command{Argv: []string{bin}}, transport.StdioOptions{Logger: quiet, StopWait: waitFor})
		proc = p
		return p, err
	}))
	if err != nil {
		t.Fatal(err)
	}
	st := sess.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted || st.Init.ServerInfo == nil || st.Init.ServerInfo.Name != "echo" {
		t.Errorf("state = %+v", st)
	}
	var res protocol.CallToolResult
	if err := sess.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"over stdio"}`)}, &res); err != nil || res.Text() != "over stdio" {
		t.Errorf("echo = %q, %v", res.Text(), err)
	}
	sess.Close()
	select {
	case <-proc.Exited():
	case <-time.After(waitFor):
		t.Fatal("echo did not exit")
	}
	if info := proc.CloseInfo(); info.ExitCode != 0 || info.Signal != "" {
		t.Errorf("exit %d, signal %q: want a clean exit when stdin closed", info.ExitCode, info.Signal)
	}
}

// TestSessionSignalsWebSocket connects a session that implements all seven
// channel leaves to an SDK server over WebSocket: the handlers advertise
// typing, acknowledge and streaming, the host grants them, and what it
// sends reaches them, acknowledge's answer read back as the host reads it.
func TestSessionSignalsWebSocket(t *testing.T) {
	var sg signals
	s := server.New("e2e", "1.0.0", &server.Options{
		Logger:       quiet,
		Capabilities: []string{"channels.register", "channels.lifecycle", "channels.publish", "channels.incoming"},
		FeatureSets: []server.FeatureSet{{Name: "e2e.messaging", Description: "a chat connector", Uses: []string{
			"channels.register", "channels.lifecycle", "channels.publish", "channels.incoming",
			"channels.streaming", "channels.acknowledge", "channels.typing",
		}}},
	})
	sg.install(s)
	srv := httptest.NewServer(s)
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	var h sessionHost
	cfg := h.config("e2e", func(ctx context.Context) (transport.Stream, error) {
		return transport.DialWebSocket(ctx, url, transport.WebSocketOptions{Logger: quiet})
	})
	cfg.Implemented = append(cfg.Implemented, "channels.publish", "channels.streaming", "channels.acknowledge", "channels.typing")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	sess, err := session.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	st := sess.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted || !slices.Equal(st.Grant.Enabled(), []string{"e2e.messaging"}) {
		t.Fatalf("policy = %+v, enabled %v: want accepted, e2e.messaging enabled", st.Policy, st.Grant.Enabled())
	}
	for _, p := range []string{"channels.streaming", "channels.acknowledge", "channels.typing"} {
		if !st.Grant.Has(p) {
			t.Errorf("%s not granted", p)
		}
	}
	for _, n := range []struct {
		method string
		params any
	}{
		{protocol.MethodChannelsTyping, map[string]string{"channelId": "chat:#a", "op": "start"}},
		{protocol.MethodChannelsOutgoingChunk, map[string]any{"inferenceId": "inf-9", "conversationId": "conv-1", "channelId": "chat:#a", "index": 0, "delta": "Hi"}},
		{protocol.MethodChannelsOutgoingComplete, map[string]any{"inferenceId": "inf-9", "conversationId": "conv-1", "channelId": "chat:#a",
			"content": []any{map[string]string{"type": "text", "text": "Hi"}}}},
		{protocol.MethodChannelsTyping, map[string]string{"channelId": "chat:#a", "op": "stop"}},
	} {
		if err := sess.Notify(ctx, n.method, n.params); err != nil {
			t.Fatal(err)
		}
	}
	var ack struct {
		Acknowledged   bool   `json:"acknowledged"`
		Representation string `json:"representation"`
		Reason         string `json:"reason"`
	}
	if err := sess.Call(ctx, protocol.MethodChannelsAcknowledge, map[string]string{"channelId": "chat:#a", "messageId": "m-1", "intent": "seen-not-opening", "value": "👀"}, &ack); err != nil {
		t.Fatal(err)
	}
	if !ack.Acknowledged || ack.Representation != "👀" || ack.Reason != "" {
		t.Errorf("acknowledge = %+v", ack)
	}
	got, conns := sg.calls()
	want := []any{
		server.TypingRequest{ChannelID: "chat:#a", Op: "start"},
		server.OutgoingEvent{InferenceID: "inf-9", ConversationID: "conv-1", ChannelID: "chat:#a", Delta: "Hi"},
		server.OutgoingEvent{Complete: true, InferenceID: "inf-9", ConversationID: "conv-1", ChannelID: "chat:#a",
			Content: []json.RawMessage{json.RawMessage(`{"text":"Hi","type":"text"}`)}},
		server.TypingRequest{ChannelID: "chat:#a", Op: "stop"},
		server.AcknowledgeRequest{ChannelID: "chat:#a", MessageID: "m-1", Intent: "seen-not-opening", Value: "👀"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handlers got (-want +got):\n%s", diff)
	}
	if slices.Contains(conns, false) {
		t.Errorf("ConnFromContext failed in a handler: %v", conns)
	}
}
