package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// room is a server with two channels, chat:#a and chat:#b, and channel
// handlers that record what the host asked.
type room struct {
	mu        sync.Mutex
	open      map[string]bool
	published []server.PublishRequest
}

func (r *room) server(edit func(*server.Options)) (*server.Server, <-chan *server.Conn) {
	r.open = map[string]bool{}
	s, conns := chatServer(edit)
	known := map[string]bool{"chat:#a": true, "chat:#b": true}
	s.HandleChannelOpen(func(ctx context.Context, req server.OpenRequest) (protocol.ChannelDescriptor, error) {
		if _, ok := server.ConnFromContext(ctx); !ok {
			return protocol.ChannelDescriptor{}, errors.New("no conn in ctx")
		}
		id := req.ChannelID
		if id == "" {
			var addr struct {
				Channel string `json:"channel"`
			}
			json.Unmarshal(req.Address, &addr)
			id = req.Type + ":" + addr.Channel
		}
		switch {
		case id == "chat:#broken":
			return protocol.ChannelDescriptor{}, errors.New("the platform is down")
		case id == "chat:#custom":
			return protocol.ChannelDescriptor{}, &protocol.Error{Code: -32050, Message: "custom"}
		case !known[id]:
			return protocol.ChannelDescriptor{}, server.ErrUnknownChannel
		}
		r.mu.Lock()
		r.open[id] = true
		r.mu.Unlock()
		if req.ChannelID != "" {
			return protocol.ChannelDescriptor{Type: "chat", Label: id}, nil // the SDK fills the id
		}
		return protocol.ChannelDescriptor{ID: id, Type: "chat", Label: id}, nil
	})
	s.HandleChannelClose(func(_ context.Context, id string) error {
		if id == "chat:#broken" {
			return errors.New("cannot leave")
		}
		if !known[id] {
			return server.ErrUnknownChannel
		}
		r.mu.Lock()
		r.open[id] = false
		r.mu.Unlock()
		return nil
	})
	s.HandleChannelPublish(func(_ context.Context, p server.PublishRequest) (string, error) {
		r.mu.Lock()
		r.published = append(r.published, p)
		r.mu.Unlock()
		switch {
		case !known[p.ChannelID]:
			return "", server.ErrUnknownChannel
		case p.Text() == "too long":
			return "", errors.New("message too long for the platform")
		}
		return "posted-1", nil
	})
	return s, conns
}

func TestChannelHandlers(t *testing.T) {
	var r room
	s, _ := r.server(nil)
	h := start(t, s)
	h.initialize()
	h.policy(allCaps, nil, []string{})

	var open protocol.ChannelsOpenResult
	h.call(protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "chat:#a"}, &open)
	if open.Channel.ID != "chat:#a" || open.Channel.Label != "chat:#a" {
		t.Errorf("open by id = %+v", open)
	}
	h.call(protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{Type: "chat", Address: json.RawMessage(`{"channel":"#b"}`)}, &open)
	if open.Channel.ID != "chat:#b" {
		t.Errorf("open by type and address = %+v", open)
	}
	var closeRes json.RawMessage
	h.call(protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: "chat:#b"}, &closeRes)
	if string(closeRes) != `{"closed":true}` {
		t.Errorf("close = %s", closeRes)
	}
	r.mu.Lock()
	if !cmp.Equal(r.open, map[string]bool{"chat:#a": true, "chat:#b": false}) {
		t.Errorf("open state = %v", r.open)
	}
	r.mu.Unlock()

	var pub json.RawMessage
	h.call(protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{
		ChannelID: "chat:#a", ConversationID: "conv-1", Content: server.TextContent("hello", "team"),
	}, &pub)
	if string(pub) != `{"delivered":true,"messageId":"posted-1"}` {
		t.Errorf("publish = %s", pub)
	}
	h.call(protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{ChannelID: "chat:#a", Content: server.TextContent("too long")}, &pub)
	if string(pub) != `{"delivered":false,"reason":"message too long for the platform"}` {
		t.Errorf("failed publish = %s", pub)
	}
	// As a notification: handled, no answer.
	if err := h.peer.Notify(context.Background(), protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{
		ChannelID: "chat:#a", Content: server.TextContent("fire and forget"),
	}); err != nil {
		t.Fatal(err)
	}
	h.call(protocol.MethodPing, nil, nil)
	r.mu.Lock()
	got := r.published
	r.mu.Unlock()
	if len(got) != 3 || got[0].Text() != "hello\nteam" || got[0].ConversationID != "conv-1" || got[0].Notification ||
		!got[2].Notification || got[2].Text() != "fire and forget" {
		t.Errorf("published = %+v", got)
	}
}

func TestChannelErrors(t *testing.T) {
	var r room
	s, _ := r.server(nil)
	h := start(t, s)
	h.initialize()
	h.policy(allCaps, nil, []string{})
	for _, tc := range []struct {
		name   string
		method string
		params any
		code   int64
	}{
		{"open unknown", protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "chat:#nope"}, protocol.CodeUnknownChannel},
		{"open by address unknown", protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{Type: "chat", Address: json.RawMessage(`{"channel":"#x"}`)}, protocol.CodeUnknownChannel},
		{"open fails", protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "chat:#broken"}, protocol.CodeChannelOpenFailed},
		{"open wire error", protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "chat:#custom"}, -32050},
		{"open names nothing", protocol.MethodChannelsOpen, struct{}{}, protocol.CodeInvalidParams},
		{"close unknown", protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: "chat:#nope"}, protocol.CodeUnknownChannel},
		{"close fails", protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: "chat:#broken"}, protocol.CodeInternalError},
		{"close without id", protocol.MethodChannelsClose, struct{}{}, protocol.CodeInvalidParams},
		{"publish unknown", protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{ChannelID: "chat:#nope"}, protocol.CodeUnknownChannel},
		{"publish without id", protocol.MethodChannelsPublish, struct{}{}, protocol.CodeInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := h.callErr(tc.method, tc.params)
			if ce.Answer.Code != tc.code {
				t.Errorf("code %d (%s), want %d", ce.Answer.Code, ce.Answer.Message, tc.code)
			}
			if tc.code == protocol.CodeUnknownChannel && string(ce.Answer.Data) == "" {
				t.Error("unknown channel error carries no data")
			}
		})
	}
}

func TestChannelMethodsGated(t *testing.T) {
	var r room
	s, _ := r.server(nil)
	h := start(t, s)
	h.initialize()
	open := protocol.ChannelsOpenParams{ChannelID: "chat:#a"}
	pub := protocol.ChannelsPublishParams{ChannelID: "chat:#a", Content: server.TextContent("hi")}

	// Before the policy: every channel method is denied.
	for method, params := range map[string]any{
		protocol.MethodChannelsOpen:    open,
		protocol.MethodChannelsClose:   protocol.ChannelsCloseParams{ChannelID: "chat:#a"},
		protocol.MethodChannelsPublish: pub,
		protocol.MethodChannelsList:    struct{}{},
	} {
		if ce := h.callErr(method, params); ce.Answer.Code != protocol.CodeCapabilityDenied {
			t.Errorf("%s before policy: code %d, want %d", method, ce.Answer.Code, protocol.CodeCapabilityDenied)
		}
	}

	// Granted register and incoming, not lifecycle or publish.
	h.policy([]string{"channels.register", "channels.incoming"}, nil, []string{})
	ce := h.callErr(protocol.MethodChannelsOpen, open)
	if ce.Answer.Code != protocol.CodeCapabilityDenied || string(ce.Answer.Data) != `{"capability":"channels.lifecycle"}` {
		t.Errorf("open without lifecycle: %d %s", ce.Answer.Code, ce.Answer.Data)
	}
	if ce := h.callErr(protocol.MethodChannelsPublish, pub); ce.Answer.Code != protocol.CodeCapabilityDenied {
		t.Errorf("publish without the capability: code %d", ce.Answer.Code)
	}
	// A denied publish notification reaches no handler.
	h.peer.Notify(context.Background(), protocol.MethodChannelsPublish, pub)
	h.call(protocol.MethodPing, nil, nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.open) != 0 || len(r.published) != 0 {
		t.Errorf("a handler ran for a denied method: open %v, published %v", r.open, r.published)
	}
}

func TestChannelMethodsWithoutHandlers(t *testing.T) {
	s, _ := chatServer(nil)
	h := start(t, s)
	h.initialize()
	h.policy(allCaps, nil, []string{})
	for _, method := range []string{protocol.MethodChannelsOpen, protocol.MethodChannelsClose, protocol.MethodChannelsPublish} {
		if ce := h.callErr(method, protocol.ChannelsOpenParams{ChannelID: "x"}); ce.Answer.Code != protocol.CodeMethodNotFound {
			t.Errorf("%s without a handler: code %d, want %d", method, ce.Answer.Code, protocol.CodeMethodNotFound)
		}
	}
}

// TestChannelPublishTargets: a publish's threadId (RFC-011 §4) reaches a
// HandleChannelPublishTo handler as its Target, absent, null (the root)
// and a string apart; the handler's Posted.Thread is echoed as the
// result's threadId, null for the root; an invalid threadId is refused
// with nothing posted and no handler called; and a HandleChannelPublish
// handler's answer carries no echo, whatever was asked.
func TestChannelPublishTargets(t *testing.T) {
	s, _ := chatServer(nil)
	var mu sync.Mutex
	var targets []string // what the handler was asked, in order
	s.HandleChannelPublishTo(func(_ context.Context, p server.PublishRequest) (server.Posted, error) {
		asked := "absent"
		if p.Target != nil {
			asked = "thread " + *p.Target
			if p.ThreadID != *p.Target {
				t.Errorf("ThreadID %q, Target %q", p.ThreadID, *p.Target)
			}
		}
		mu.Lock()
		targets = append(targets, asked)
		mu.Unlock()
		switch {
		case p.Target == nil:
			return server.Posted{MessageID: "m-legacy"}, nil
		case *p.Target == "gone":
			return server.Posted{}, errors.New("there is no thread gone")
		}
		return server.Posted{MessageID: "m-" + *p.Target, Thread: p.Target}, nil
	})
	h := start(t, s)
	h.initialize()
	h.policy(allCaps, nil, []string{})
	content := server.TextContent("hi")
	for _, tc := range []struct {
		name   string
		thread any // the threadId sent; omitted when nil
		want   string
	}{
		{"absent", nil, `{"delivered":true,"messageId":"m-legacy"}`},
		{"root", json.RawMessage("null"), `{"delivered":true,"messageId":"m-","threadId":null}`},
		{"thread", "t1", `{"delivered":true,"messageId":"m-t1","threadId":"t1"}`},
		{"refused", "gone", `{"delivered":false,"reason":"there is no thread gone"}`},
		{"empty string", "", `{"delivered":false,"reason":"not posted: threadId must be a thread's id (a non-empty string) or null for the channel root"}`},
		{"number", 7, `{"delivered":false,"reason":"not posted: threadId must be a thread's id (a non-empty string) or null for the channel root"}`},
		{"object", map[string]string{}, `{"delivered":false,"reason":"not posted: threadId must be a thread's id (a non-empty string) or null for the channel root"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]any{"channelId": "chat:#a", "content": content}
			if tc.thread != nil {
				params["threadId"] = tc.thread
			}
			var res json.RawMessage
			h.call(protocol.MethodChannelsPublish, params, &res)
			if string(res) != tc.want {
				t.Errorf("publish = %s, want %s", res, tc.want)
			}
		})
	}
	mu.Lock()
	got := targets
	mu.Unlock()
	if want := []string{"absent", "thread ", "thread t1", "thread gone"}; !cmp.Equal(got, want) {
		t.Errorf("the handler was asked %q, want %q (the invalid ones never reach it)", got, want)
	}

	// HandleChannelPublish: no echo, so a host that asked for a thread
	// reads the post as unconfirmed, as it should.
	s.HandleChannelPublish(func(context.Context, server.PublishRequest) (string, error) { return "m-old", nil })
	var res json.RawMessage
	h.call(protocol.MethodChannelsPublish, map[string]any{"channelId": "chat:#a", "threadId": "t1", "content": content}, &res)
	if string(res) != `{"delivered":true,"messageId":"m-old"}` {
		t.Errorf("publish through HandleChannelPublish = %s", res)
	}
}
