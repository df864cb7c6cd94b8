package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// ErrUnknownChannel is what a channel handler returns for a channel it
// does not know: the host gets JSON-RPC error -32023, Unknown channel
// (SPEC §14.6).
var ErrUnknownChannel = errors.New("server: unknown channel")

// OpenRequest is channels/open: the channel named by ChannelID, or by Type
// and Address (SPEC §14.3 shows the latter; most hosts send the former).
type OpenRequest struct {
	ChannelID string
	Type      string
	Address   json.RawMessage
	Metadata  json.RawMessage
}

// PublishRequest is channels/publish: content the host asks the server to
// deliver to a channel.
type PublishRequest struct {
	ChannelID      string
	ConversationID string
	// ThreadID is the thread the host asks for, when it names one
	// (RFC-011 §4); "" otherwise.
	ThreadID string
	// Target is where the host asks the post to land (RFC-011 §4): nil
	// when the request carries no threadId (the server places it as it
	// always has), pointing at "" for the channel root (threadId null),
	// else at the thread's id (ThreadID's value). Any other threadId (a
	// number, "", an object) is refused by the SDK, with nothing posted,
	// before a handler is called. A handler that honours targets answers
	// where the post landed in Posted.Thread (HandleChannelPublishTo).
	Target   *string
	Content  []json.RawMessage
	Metadata json.RawMessage
	// Notification reports that the host sent it as a notification: it
	// expects no answer, so the handler's result goes only to the log.
	Notification bool
}

// Text returns the text of every text block, joined by newlines
// (protocol.JoinText).
func (p PublishRequest) Text() string { return protocol.JoinText(p.Content) }

// HandleChannelOpen sets the handler of channels/open: it opens the channel
// and returns its descriptor (an empty ID is filled with the requested
// one). ErrUnknownChannel answers -32023; a *protocol.Error is sent as it is;
// any other error answers -32024, Channel open failed, with its text.
// Without a handler, channels/open is answered "method not found".
//
// Channel handlers run in arrival order on the connection's dispatch
// goroutine, so an open, a publish and a close are handled in the order
// the host sent them. They must not wait on the host. The server answers
// channels/open and channels/close with -32002 unless channels.lifecycle
// is granted, and channels/publish unless channels.publish is, without
// calling the handler.
func (s *Server) HandleChannelOpen(h func(ctx context.Context, req OpenRequest) (protocol.ChannelDescriptor, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = h
}

// HandleChannelClose sets the handler of channels/close: it closes the
// channel, answered {closed: true}. ErrUnknownChannel answers -32023; a
// *protocol.Error is sent as it is; any other error is an internal error
// (-32603) carrying its text. See HandleChannelOpen for ordering and
// gating.
func (s *Server) HandleChannelClose(h func(ctx context.Context, channelID string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.close = h
}

// HandleChannelPublish sets the handler of channels/publish: it delivers
// the content and returns the delivered message's id, answered
// {delivered: true, messageId}. ErrUnknownChannel answers -32023; a
// *protocol.Error is sent as it is; any other error means nothing was posted,
// answered {delivered: false, reason} with its text. A publish sent as a
// notification gets no answer either way. See HandleChannelOpen for
// ordering and gating.
//
// A publish that names a place (RFC-011 threadId) is answered without the
// threadId echo, which a host reads as posted but not where asked: a server
// whose channels declare capabilities.publish.target sets
// HandleChannelPublishTo instead.
func (s *Server) HandleChannelPublish(h func(ctx context.Context, req PublishRequest) (messageID string, err error)) {
	s.HandleChannelPublishTo(func(ctx context.Context, req PublishRequest) (Posted, error) {
		id, err := h(ctx, req)
		return Posted{MessageID: id}, err
	})
}

// Posted is what a publish handler set with HandleChannelPublishTo
// posted: the message's id and, for a request that named a place
// (PublishRequest.Target), where it landed.
type Posted struct {
	MessageID string
	// Thread is where the post landed, answered as the result's threadId
	// (RFC-011 §5): nil for none (right for a request with no Target),
	// pointing at "" for the channel root (null), else at the thread's id.
	// The host compares it with what it asked: it says where the post is,
	// not where it was asked to go.
	Thread *string
}

// HandleChannelPublishTo sets the handler of channels/publish, as
// HandleChannelPublish does, for a server that honours RFC-011 targets:
// the handler answers where the post landed (Posted.Thread), which the
// result echoes as threadId. A target it cannot honour (a thread that does
// not exist, a thread on a channel without threads) it refuses with an
// error, nothing posted: answered {delivered: false, reason}. It replaces
// a handler set with HandleChannelPublish, and the other way round.
func (s *Server) HandleChannelPublishTo(h func(ctx context.Context, req PublishRequest) (Posted, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publish = h
}

// TypingRequest is channels/typing: the host's agent has started working
// on a reply to a channel (Op TypingStart, which the host repeats, about
// every 7 s, while it works), or has stopped (TypingStop).
type TypingRequest struct {
	ChannelID string
	Op        string // TypingStart or TypingStop
	Metadata  json.RawMessage
}

// The ops of channels/typing.
const (
	TypingStart = protocol.TypingStart
	TypingStop  = protocol.TypingStop
)

// HandleChannelTyping sets the handler of channels/typing, a notification:
// show, or stop showing, that the agent is typing in a channel. A start
// comes again every few seconds while the agent works; a platform's
// indicator that lapses on its own is renewed by it, and one that does not
// is shown once per run of starts. A message with no channelId, or an op
// other than TypingStart and TypingStop, reaches no handler.
//
// Setting a handler advertises channels.typing. The server drops
// channels/typing (with a log line) unless channels.typing is granted,
// without calling the handler. It runs in arrival order with the other
// channel handlers; see HandleChannelOpen.
func (s *Server) HandleChannelTyping(h func(ctx context.Context, req TypingRequest)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.typing = h
}

// AcknowledgeRequest is channels/acknowledge: the host asks the server to
// mark a message on its platform (a reaction), saying Intent with Value,
// typically AckSeenNotOpening with an emoji such as "👀": the agent saw
// the message, and stays out of its channel.
type AcknowledgeRequest struct {
	ChannelID string
	MessageID string
	Intent    string
	Value     string
}

// AckSeenNotOpening is the acknowledgment intent of an agent that saw a
// message addressing it in a channel it has not joined, and declined to
// join: the message is marked seen, and no reply will come.
const AckSeenNotOpening = protocol.AckSeenNotOpening

// AcknowledgeResult answers channels/acknowledge: whether the message was
// marked, how the platform represents the mark (the emoji shown, when it
// differs from the value asked for), and, when it was not, why.
type AcknowledgeResult = protocol.ChannelsAcknowledgeResult

// HandleChannelAcknowledge sets the handler of channels/acknowledge: it
// marks the message and returns the answer. ErrUnknownChannel answers
// -32023; a *protocol.Error is sent as it is; any other error means
// nothing was marked, answered {acknowledged: false, reason} with its
// text. A request with no channelId or messageId is answered -32602. An
// acknowledge sent as a notification gets no answer either way.
//
// Setting a handler advertises channels.acknowledge. The server answers
// channels/acknowledge with -32002 unless channels.acknowledge is granted,
// without calling the handler. It runs in arrival order with the other
// channel handlers; see HandleChannelOpen.
func (s *Server) HandleChannelAcknowledge(h func(ctx context.Context, req AcknowledgeRequest) (AcknowledgeResult, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acknowledge = h
}

// OutgoingEvent is one of the notifications of an outgoing stream (SPEC
// §14.3): channels/outgoing/chunk, text the host's agent is generating for
// a channel, or channels/outgoing/complete (Complete set), which ends the
// stream of one (InferenceID, ChannelID) with its full text in Content.
//
// A stream is advisory, for live rendering (a message that grows as it is
// written, synthesized speech): what the agent says reaches the channel
// only by channels/publish, and a server must not post a stream as a
// message (SPEC §14.5).
type OutgoingEvent struct {
	Complete       bool
	InferenceID    string
	ConversationID string
	ChannelID      string
	// Index orders a chunk among all the chunks of its inference, across
	// channels: a channel's deltas in Index order make its streamed text.
	// A chunk's only.
	Index int
	// Delta is a chunk's text.
	Delta string
	// Content is the stream's full text, as content blocks: a complete's
	// only. It is authoritative over the chunks, some of which may have
	// been lost.
	Content []json.RawMessage
}

// Text returns a chunk's Delta, or the text of a complete's text blocks,
// joined by newlines (protocol.JoinText).
func (e OutgoingEvent) Text() string {
	if e.Complete {
		return protocol.JoinText(e.Content)
	}
	return e.Delta
}

// HandleOutgoing sets the handler of the outgoing stream,
// channels/outgoing/chunk and channels/outgoing/complete, both
// notifications: the handler gets each in the order the host sent them
// (a complete after its chunks), with the other channel handlers; see
// HandleChannelOpen. A message with no inferenceId or channelId reaches
// no handler.
//
// Setting a handler advertises channels.streaming, without which a host
// sends no stream (SPEC §14.3). The server drops both (with a log line)
// unless channels.streaming is granted, without calling the handler.
func (s *Server) HandleOutgoing(h func(ctx context.Context, ev OutgoingEvent)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outgoing = h
}

// denied answers a host → server channel method the policy does not
// allow (SPEC §5.3, §5.4: a denied capability behaves as if never
// advertised).
func (c *Conn) denied(req *wire.Request, capability string) error {
	if err := c.allow(req.Method, capability, ""); err != nil {
		msg := fmt.Sprintf("Capability denied: %s needs %s, which is not in the effective grant", req.Method, capability)
		if errors.Is(err, ErrNoPolicy) {
			msg = fmt.Sprintf("Capability denied: %s needs %s, and no policy is established yet", req.Method, capability)
		}
		c.log.Info("host method refused: not granted", slog.String("method", req.Method), slog.String("capability", capability))
		return protocol.NewError(protocol.CodeCapabilityDenied, msg, map[string]string{"capability": capability})
	}
	return nil
}

func unknownChannel(id string) *protocol.Error {
	return protocol.NewError(protocol.CodeUnknownChannel, fmt.Sprintf("Unknown channel: %q is not a channel of this server", id), map[string]string{"channelId": id})
}

// asWireError reports whether err is, or wraps, a *protocol.Error to send.
func asWireError(err error) (*protocol.Error, bool) {
	var we *protocol.Error
	ok := errors.As(err, &we)
	return we, ok
}

func (c *Conn) channelOpen(ctx context.Context, req *wire.Request) (any, error) {
	if err := c.denied(req, "channels.lifecycle"); err != nil {
		return nil, err
	}
	c.s.mu.RLock()
	h := c.s.open
	c.s.mu.RUnlock()
	if h == nil {
		return nil, wire.ErrMethodNotFound
	}
	var p protocol.ChannelsOpenParams
	if err := json.Unmarshal(req.Params, &p); err != nil || (p.ChannelID == "" && p.Type == "" && len(p.Address) == 0) {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: channels/open names no channel (channelId, or type and address)"}
	}
	d, err := h(ctx, OpenRequest(p))
	if err != nil {
		if we, ok := asWireError(err); ok {
			return nil, we
		}
		if errors.Is(err, ErrUnknownChannel) {
			return nil, unknownChannel(openName(p))
		}
		return nil, protocol.NewError(protocol.CodeChannelOpenFailed, "Channel open failed: "+err.Error(), map[string]string{"channelId": openName(p)})
	}
	if d.ID == "" {
		d.ID = p.ChannelID
	}
	return protocol.ChannelsOpenResult{Channel: d}, nil
}

// openName names the channel an open asked for, for an error.
func openName(p protocol.ChannelsOpenParams) string {
	if p.ChannelID != "" {
		return p.ChannelID
	}
	return p.Type + ":" + string(p.Address)
}

func (c *Conn) channelClose(ctx context.Context, req *wire.Request) (any, error) {
	if err := c.denied(req, "channels.lifecycle"); err != nil {
		return nil, err
	}
	c.s.mu.RLock()
	h := c.s.close
	c.s.mu.RUnlock()
	if h == nil {
		return nil, wire.ErrMethodNotFound
	}
	var p protocol.ChannelsCloseParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.ChannelID == "" {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: channels/close needs a channelId"}
	}
	if err := h(ctx, p.ChannelID); err != nil {
		if we, ok := asWireError(err); ok {
			return nil, we
		}
		if errors.Is(err, ErrUnknownChannel) {
			return nil, unknownChannel(p.ChannelID)
		}
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "Channel close failed: " + err.Error()}
	}
	return protocol.ChannelsCloseResult{Closed: true}, nil
}

func (c *Conn) channelPublish(ctx context.Context, req *wire.Request) (any, error) {
	if err := c.denied(req, "channels.publish"); err != nil {
		return nil, err // for a notification, the wire logs it
	}
	c.s.mu.RLock()
	h := c.s.publish
	c.s.mu.RUnlock()
	if h == nil {
		return nil, wire.ErrMethodNotFound
	}
	// threadId is read apart, raw: absent, null and a string differ
	// (RFC-011 §4), and a value of another type is refused below, not
	// taken as invalid params.
	var p struct {
		protocol.ChannelsPublishParams
		ThreadID json.RawMessage `json:"threadId"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil || p.ChannelID == "" {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: channels/publish needs a channelId and content"}
	}
	pr := PublishRequest{
		ChannelID: p.ChannelID, ConversationID: p.ConversationID,
		Content: p.Content, Metadata: p.Metadata, Notification: req.IsNotification(),
	}
	if p.ThreadID != nil {
		target, ok := publishTarget(p.ThreadID)
		if !ok {
			const reason = "not posted: threadId must be a thread's id (a non-empty string) or null for the channel root"
			if pr.Notification {
				c.log.Info("published notification not delivered", slog.String("channel", p.ChannelID), slog.String("reason", reason))
				return nil, nil
			}
			return protocol.ChannelsPublishResult{Delivered: false, Reason: reason}, nil
		}
		pr.Target, pr.ThreadID = &target, target
	}
	posted, err := h(ctx, pr)
	switch {
	case err == nil:
		res := protocol.ChannelsPublishResult{Delivered: true, MessageID: posted.MessageID}
		if posted.Thread != nil {
			res.ThreadID = json.RawMessage("null")
			if *posted.Thread != "" {
				res.ThreadID, _ = json.Marshal(*posted.Thread)
			}
		}
		return res, nil
	case errors.Is(err, ErrUnknownChannel):
		return nil, unknownChannel(p.ChannelID)
	}
	if we, ok := asWireError(err); ok {
		return nil, we
	}
	if pr.Notification {
		c.log.Info("published notification not delivered", slog.String("channel", p.ChannelID), slog.String("reason", err.Error()))
		return nil, nil
	}
	return protocol.ChannelsPublishResult{Delivered: false, Reason: err.Error()}, nil
}

// publishTarget reads a publish's threadId (RFC-011 §4): null is the
// channel root (""), a non-empty string a thread; anything else is not
// valid.
func publishTarget(raw json.RawMessage) (string, bool) {
	if string(raw) == "null" {
		return "", true
	}
	var t string
	if json.Unmarshal(raw, &t) != nil || t == "" {
		return "", false
	}
	return t, true
}

// channelList answers the host's channels/list with the channels this
// connection registered and the host accepted. It needs channels.register.
func (c *Conn) channelList(req *wire.Request) (any, error) {
	if err := c.denied(req, "channels.register"); err != nil {
		return nil, err
	}
	return protocol.ChannelsListResult{Channels: orEmptyDescs(c.Channels())}, nil
}

func (c *Conn) channelTyping(ctx context.Context, req *wire.Request) (any, error) {
	if err := c.denied(req, "channels.typing"); err != nil {
		return nil, err // for a notification, the wire logs it
	}
	c.s.mu.RLock()
	h := c.s.typing
	c.s.mu.RUnlock()
	if h == nil {
		return nil, wire.ErrMethodNotFound
	}
	var p protocol.ChannelsTypingParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.ChannelID == "" || (p.Op != TypingStart && p.Op != TypingStop) {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: `Invalid params: channels/typing needs a channelId and op "start" or "stop"`}
	}
	h(ctx, TypingRequest(p))
	return struct{}{}, nil // sent as a request, it is answered {}
}

func (c *Conn) channelAcknowledge(ctx context.Context, req *wire.Request) (any, error) {
	if err := c.denied(req, "channels.acknowledge"); err != nil {
		return nil, err
	}
	c.s.mu.RLock()
	h := c.s.acknowledge
	c.s.mu.RUnlock()
	if h == nil {
		return nil, wire.ErrMethodNotFound
	}
	var p protocol.ChannelsAcknowledgeParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.ChannelID == "" || p.MessageID == "" {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: channels/acknowledge needs a channelId and a messageId"}
	}
	res, err := h(ctx, AcknowledgeRequest(p))
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, ErrUnknownChannel):
		return nil, unknownChannel(p.ChannelID)
	}
	if we, ok := asWireError(err); ok {
		return nil, we
	}
	if req.IsNotification() {
		c.log.Info("acknowledge notification not acknowledged", slog.String("channel", p.ChannelID), slog.String("reason", err.Error()))
		return nil, nil
	}
	return AcknowledgeResult{Acknowledged: false, Reason: err.Error()}, nil
}

// outgoingParams is channels/outgoing/chunk and channels/outgoing/complete.
type outgoingParams struct {
	InferenceID    string            `json:"inferenceId"`
	ConversationID string            `json:"conversationId,omitempty"`
	ChannelID      string            `json:"channelId"`
	Index          int               `json:"index"`
	Delta          string            `json:"delta"`
	Content        []json.RawMessage `json:"content"`
}

func (c *Conn) channelOutgoing(ctx context.Context, req *wire.Request) (any, error) {
	if err := c.denied(req, "channels.streaming"); err != nil {
		return nil, err // for a notification, the wire logs it
	}
	c.s.mu.RLock()
	h := c.s.outgoing
	c.s.mu.RUnlock()
	if h == nil {
		return nil, wire.ErrMethodNotFound
	}
	var p outgoingParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.InferenceID == "" || p.ChannelID == "" {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: " + req.Method + " needs an inferenceId and a channelId"}
	}
	ev := OutgoingEvent{InferenceID: p.InferenceID, ConversationID: p.ConversationID, ChannelID: p.ChannelID}
	if req.Method == protocol.MethodChannelsOutgoingComplete {
		ev.Complete, ev.Content = true, p.Content
	} else {
		ev.Index, ev.Delta = p.Index, p.Delta
	}
	h(ctx, ev)
	return struct{}{}, nil // sent as a request, it is answered {}
}
