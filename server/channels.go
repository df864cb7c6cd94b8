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
	ThreadID       string
	Content        []json.RawMessage
	Metadata       json.RawMessage
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
func (s *Server) HandleChannelPublish(h func(ctx context.Context, req PublishRequest) (messageID string, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publish = h
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
	var p protocol.ChannelsPublishParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.ChannelID == "" {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: channels/publish needs a channelId and content"}
	}
	pr := PublishRequest{
		ChannelID: p.ChannelID, ConversationID: p.ConversationID, ThreadID: p.ThreadID,
		Content: p.Content, Metadata: p.Metadata, Notification: req.IsNotification(),
	}
	id, err := h(ctx, pr)
	switch {
	case err == nil:
		return protocol.ChannelsPublishResult{Delivered: true, MessageID: id}, nil
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

// channelList answers the host's channels/list with the channels this
// connection registered and the host accepted. It needs channels.register.
func (c *Conn) channelList(req *wire.Request) (any, error) {
	if err := c.denied(req, "channels.register"); err != nil {
		return nil, err
	}
	return protocol.ChannelsListResult{Channels: orEmptyDescs(c.Channels())}, nil
}
