package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// signalCaps is allCaps with the three leaves the handlers below add.
var signalCaps = append(slices.Clone(allCaps), "channels.streaming", "channels.acknowledge", "channels.typing")

// signals records, in one list, what the typing, acknowledge and outgoing
// handlers were given, in the order they were called.
type signals struct {
	mu   sync.Mutex
	got  []any
	conn []bool // per call: ConnFromContext found the connection
}

func (sg *signals) add(ctx context.Context, v any) {
	_, ok := server.ConnFromContext(ctx)
	sg.mu.Lock()
	defer sg.mu.Unlock()
	sg.got = append(sg.got, v)
	sg.conn = append(sg.conn, ok)
}

func (sg *signals) calls() ([]any, []bool) {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	return slices.Clone(sg.got), slices.Clone(sg.conn)
}

// signalServer is a chat server with the three handlers installed,
// started and initialized (its policy still to come).
func signalServer(t *testing.T) (*signals, *host) {
	t.Helper()
	sg := &signals{}
	s, _ := chatServer(nil)
	sg.install(s)
	h := start(t, s)
	h.initialize()
	return sg, h
}

// install sets the three handlers on s. The acknowledge handler knows
// message m-1 in chat:#a; m-gone fails; chat:#custom answers a wire error.
func (sg *signals) install(s *server.Server) {
	s.HandleChannelTyping(func(ctx context.Context, req server.TypingRequest) { sg.add(ctx, req) })
	s.HandleChannelAcknowledge(func(ctx context.Context, req server.AcknowledgeRequest) (server.AcknowledgeResult, error) {
		sg.add(ctx, req)
		switch {
		case req.ChannelID == "chat:#custom":
			return server.AcknowledgeResult{}, &protocol.Error{Code: -32050, Message: "custom"}
		case req.ChannelID != "chat:#a":
			return server.AcknowledgeResult{}, server.ErrUnknownChannel
		case req.MessageID == "m-gone":
			return server.AcknowledgeResult{}, errors.New("the message was deleted")
		case req.MessageID == "m-refused":
			return server.AcknowledgeResult{Acknowledged: false, Reason: "reactions are off here"}, nil
		}
		return server.AcknowledgeResult{Acknowledged: true, Representation: req.Value}, nil
	})
	s.HandleOutgoing(func(ctx context.Context, ev server.OutgoingEvent) { sg.add(ctx, ev) })
}

// TestSignalsAdvertised: each handler advertises its capability, after
// those declared, set after New or not; none is advertised without its
// handler, and a declared one is not said twice.
func TestSignalsAdvertised(t *testing.T) {
	caps := []string{"channels.register", "channels.publish"}
	for _, tc := range []struct {
		name string
		caps []string
		set  func(*server.Server)
		want string
	}{{
		name: "no handler: none of the three",
		caps: caps,
		set:  func(*server.Server) {},
		want: `{"version":"0.5","channels":{"register":true,"publish":true}}`,
	}, {
		name: "all three handlers",
		caps: caps,
		set:  func(s *server.Server) { new(signals).install(s) },
		want: `{"version":"0.5","channels":{"register":true,"publish":true,"streaming":true,"acknowledge":true,"typing":true}}`,
	}, {
		name: "typing alone, with nothing declared",
		set: func(s *server.Server) {
			s.HandleChannelTyping(func(context.Context, server.TypingRequest) {})
		},
		want: `{"version":"0.5","channels":{"typing":true}}`,
	}, {
		name: "acknowledge alone",
		caps: caps,
		set: func(s *server.Server) {
			s.HandleChannelAcknowledge(func(context.Context, server.AcknowledgeRequest) (server.AcknowledgeResult, error) {
				return server.AcknowledgeResult{}, nil
			})
		},
		want: `{"version":"0.5","channels":{"register":true,"publish":true,"acknowledge":true}}`,
	}, {
		name: "streaming alone",
		caps: caps,
		set:  func(s *server.Server) { s.HandleOutgoing(func(context.Context, server.OutgoingEvent) {}) },
		want: `{"version":"0.5","channels":{"register":true,"publish":true,"streaming":true}}`,
	}, {
		name: "declared and handled: said once, where declared",
		caps: []string{"channels.typing", "channels.register"},
		set:  func(s *server.Server) { new(signals).install(s) },
		want: `{"version":"0.5","channels":{"typing":true,"register":true,"streaming":true,"acknowledge":true}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := server.New("ad", "1", &server.Options{Capabilities: tc.caps, Logger: quiet})
			tc.set(s)
			h := start(t, s)
			if got := string(h.initialize().Capabilities.MCPL()); got != tc.want {
				t.Errorf("advertisement:\ngot  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestSignalHandlers: typing, acknowledge and the outgoing stream reach
// their handlers with their params exactly, in the order sent, with the
// connection in ctx; acknowledge's answers on the wire.
func TestSignalHandlers(t *testing.T) {
	sg, h := signalServer(t)
	h.policy(signalCaps, nil, []string{})
	ctx := context.Background()
	notify := func(method string, params any) {
		t.Helper()
		if err := h.peer.Notify(ctx, method, params); err != nil {
			t.Fatal(err)
		}
	}

	notify(protocol.MethodChannelsTyping, map[string]any{"channelId": "chat:#a", "op": "start", "metadata": map[string]string{"by": "ada"}})
	notify(protocol.MethodChannelsOutgoingChunk, map[string]any{"inferenceId": "inf-1", "conversationId": "conv-1", "channelId": "chat:#a", "index": 0, "delta": "Hello "})
	notify(protocol.MethodChannelsOutgoingChunk, map[string]any{"inferenceId": "inf-1", "conversationId": "conv-1", "channelId": "chat:#b", "index": 1, "delta": "Other"})
	notify(protocol.MethodChannelsOutgoingChunk, map[string]any{"inferenceId": "inf-1", "conversationId": "conv-1", "channelId": "chat:#a", "index": 2, "delta": "team"})
	notify(protocol.MethodChannelsOutgoingComplete, map[string]any{"inferenceId": "inf-1", "conversationId": "conv-1", "channelId": "chat:#a",
		"content": []any{map[string]string{"type": "text", "text": "Hello team"}}})
	notify(protocol.MethodChannelsTyping, map[string]any{"channelId": "chat:#a", "op": "stop"})

	var raw json.RawMessage
	h.call(protocol.MethodChannelsAcknowledge, map[string]string{"channelId": "chat:#a", "messageId": "m-1", "intent": "seen-not-opening", "value": "👀"}, &raw)
	if string(raw) != `{"acknowledged":true,"representation":"👀"}` {
		t.Errorf("acknowledge = %s", raw)
	}
	h.call(protocol.MethodChannelsAcknowledge, map[string]string{"channelId": "chat:#a", "messageId": "m-refused", "intent": "seen-not-opening", "value": "👀"}, &raw)
	if string(raw) != `{"acknowledged":false,"reason":"reactions are off here"}` {
		t.Errorf("refused acknowledge = %s", raw)
	}
	h.call(protocol.MethodChannelsAcknowledge, map[string]string{"channelId": "chat:#a", "messageId": "m-gone", "intent": "seen-not-opening", "value": "👀"}, &raw)
	if string(raw) != `{"acknowledged":false,"reason":"the message was deleted"}` {
		t.Errorf("failed acknowledge = %s", raw)
	}
	// As a notification: handled, no answer.
	notify(protocol.MethodChannelsAcknowledge, map[string]string{"channelId": "chat:#a", "messageId": "m-2", "intent": "seen-not-opening", "value": "✅"})
	h.call(protocol.MethodPing, nil, nil)

	got, conns := sg.calls()
	want := []any{
		server.TypingRequest{ChannelID: "chat:#a", Op: server.TypingStart, Metadata: json.RawMessage(`{"by":"ada"}`)},
		server.OutgoingEvent{InferenceID: "inf-1", ConversationID: "conv-1", ChannelID: "chat:#a", Index: 0, Delta: "Hello "},
		server.OutgoingEvent{InferenceID: "inf-1", ConversationID: "conv-1", ChannelID: "chat:#b", Index: 1, Delta: "Other"},
		server.OutgoingEvent{InferenceID: "inf-1", ConversationID: "conv-1", ChannelID: "chat:#a", Index: 2, Delta: "team"},
		server.OutgoingEvent{Complete: true, InferenceID: "inf-1", ConversationID: "conv-1", ChannelID: "chat:#a",
			Content: []json.RawMessage{json.RawMessage(`{"text":"Hello team","type":"text"}`)}},
		server.TypingRequest{ChannelID: "chat:#a", Op: server.TypingStop},
		server.AcknowledgeRequest{ChannelID: "chat:#a", MessageID: "m-1", Intent: server.AckSeenNotOpening, Value: "👀"},
		server.AcknowledgeRequest{ChannelID: "chat:#a", MessageID: "m-refused", Intent: server.AckSeenNotOpening, Value: "👀"},
		server.AcknowledgeRequest{ChannelID: "chat:#a", MessageID: "m-gone", Intent: server.AckSeenNotOpening, Value: "👀"},
		server.AcknowledgeRequest{ChannelID: "chat:#a", MessageID: "m-2", Intent: server.AckSeenNotOpening, Value: "✅"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handlers got (-want +got):\n%s", diff)
	}
	if slices.Contains(conns, false) {
		t.Errorf("ConnFromContext failed in a handler: %v", conns)
	}
	if len(got) > 4 {
		if ev := got[4].(server.OutgoingEvent); ev.Text() != "Hello team" {
			t.Errorf("complete's Text = %q", ev.Text())
		}
		if ev := got[1].(server.OutgoingEvent); ev.Text() != "Hello " {
			t.Errorf("chunk's Text = %q", ev.Text())
		}
	}
}

func TestSignalErrors(t *testing.T) {
	sg, h := signalServer(t)
	h.policy(signalCaps, nil, []string{})
	for _, tc := range []struct {
		name   string
		params map[string]string
		code   int64
	}{
		{"unknown channel", map[string]string{"channelId": "chat:#nope", "messageId": "m-1"}, protocol.CodeUnknownChannel},
		{"wire error", map[string]string{"channelId": "chat:#custom", "messageId": "m-1"}, -32050},
		{"no message id", map[string]string{"channelId": "chat:#a"}, protocol.CodeInvalidParams},
		{"no channel id", map[string]string{"messageId": "m-1"}, protocol.CodeInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := h.callErr(protocol.MethodChannelsAcknowledge, tc.params)
			if ce.Answer.Code != tc.code {
				t.Errorf("code %d (%s), want %d", ce.Answer.Code, ce.Answer.Message, tc.code)
			}
		})
	}
	// Malformed notifications reach no handler.
	sg.mu.Lock()
	sg.got, sg.conn = nil, nil
	sg.mu.Unlock()
	ctx := context.Background()
	for _, m := range []struct {
		method string
		params any
	}{
		{protocol.MethodChannelsTyping, map[string]string{"op": "start"}},
		{protocol.MethodChannelsTyping, map[string]string{"channelId": "chat:#a", "op": "pause"}},
		{protocol.MethodChannelsOutgoingChunk, map[string]any{"channelId": "chat:#a", "index": 0, "delta": "x"}},
		{protocol.MethodChannelsOutgoingComplete, map[string]any{"inferenceId": "inf-1", "content": []any{}}},
	} {
		h.peer.Notify(ctx, m.method, m.params)
	}
	h.call(protocol.MethodPing, nil, nil)
	if got, _ := sg.calls(); len(got) != 0 {
		t.Errorf("malformed messages reached handlers: %+v", got)
	}
}

// TestSignalsGated: before the policy, and under one that does not grant
// them, typing, acknowledge and the stream reach no handler: acknowledge
// is answered -32002 naming its capability.
func TestSignalsGated(t *testing.T) {
	sg, h := signalServer(t)
	ctx := context.Background()
	ack := map[string]string{"channelId": "chat:#a", "messageId": "m-1", "intent": "seen-not-opening", "value": "👀"}
	send := func() {
		h.peer.Notify(ctx, protocol.MethodChannelsTyping, map[string]string{"channelId": "chat:#a", "op": "start"})
		h.peer.Notify(ctx, protocol.MethodChannelsOutgoingChunk, map[string]any{"inferenceId": "inf-1", "channelId": "chat:#a", "index": 0, "delta": "x"})
		h.peer.Notify(ctx, protocol.MethodChannelsOutgoingComplete, map[string]any{"inferenceId": "inf-1", "channelId": "chat:#a", "content": []any{}})
		h.peer.Notify(ctx, protocol.MethodChannelsAcknowledge, ack)
		h.call(protocol.MethodPing, nil, nil)
	}

	// Before the policy.
	if ce := h.callErr(protocol.MethodChannelsAcknowledge, ack); ce.Answer.Code != protocol.CodeCapabilityDenied {
		t.Errorf("acknowledge before the policy: code %d", ce.Answer.Code)
	}
	send()
	// Granted the four leaves and not these three.
	h.policy(allCaps, nil, []string{})
	ce := h.callErr(protocol.MethodChannelsAcknowledge, ack)
	if ce.Answer.Code != protocol.CodeCapabilityDenied || string(ce.Answer.Data) != `{"capability":"channels.acknowledge"}` {
		t.Errorf("acknowledge without its grant: %d %s", ce.Answer.Code, ce.Answer.Data)
	}
	send()
	// Each granted alone reaches its own handler only.
	h.policy(append(slices.Clone(allCaps), "channels.typing"), nil, []string{})
	send()
	if got, _ := sg.calls(); !cmp.Equal(got, []any{server.TypingRequest{ChannelID: "chat:#a", Op: "start"}}) {
		t.Errorf("with channels.typing alone, handlers got %+v", got)
	}
}

// TestSignalsWithoutHandlers: a server that sets none answers acknowledge
// "method not found" and ignores the notifications.
func TestSignalsWithoutHandlers(t *testing.T) {
	s, _ := chatServer(nil)
	h := start(t, s)
	h.initialize()
	h.policy(signalCaps, nil, []string{})
	if ce := h.callErr(protocol.MethodChannelsAcknowledge, map[string]string{"channelId": "chat:#a", "messageId": "m-1"}); ce.Answer.Code != protocol.CodeMethodNotFound {
		t.Errorf("acknowledge without a handler: code %d, want %d", ce.Answer.Code, protocol.CodeMethodNotFound)
	}
	h.peer.Notify(context.Background(), protocol.MethodChannelsTyping, map[string]string{"channelId": "chat:#a", "op": "start"})
	h.call(protocol.MethodPing, nil, nil) // the connection is still up
}
