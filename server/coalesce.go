package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Event coalescing (RFC-006, docs/coalescing.md): an Event or a Message
// with Coalesce set is an occurrence of a subject the host may replace
// while no model has read it. The host's answer says what it did
// (PushResult.Coalesce, IncomingResult.Coalesce). A deferred event's
// content is asked for later, with push/render: HandlePushRender answers
// it. Whether the host serves coalescing at all is in what it advertised
// (Conn.Coalescing); a host that doesn't ignores the member, and an
// occurrence is then appended like any event.

// RenderRequest is a push/render: the notices of one subject's deferred
// batch since its previous render, oldest first, as the host is about to
// show the subject to a model.
type RenderRequest = protocol.PushRenderParams

// RenderResult answers a push/render: the content of everything that
// changed since the previous render; empty when nothing did.
type RenderResult = protocol.PushRenderResult

// HandlePushRender sets the handler of push/render. It runs on a goroutine
// of its own, like a tool: the host waits for it within its deadline (5 s
// by default) and shows the batch's fallback if it fails or is late. A
// *protocol.Error is sent as it is; any other error as an internal error.
// Its ctx ends when the host cancels the render, as a tool call's does
// (ErrCancelled), and nothing is answered then. It must not ask the host for inference: a host refuses that while a
// render is open (SPEC §10.7).
//
// Without a handler, push/render is answered "method not found", and the
// host shows each batch's fallback.
func (s *Server) HandlePushRender(h func(ctx context.Context, req RenderRequest) (RenderResult, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.render = h
}

func (c *Conn) pushRender(ctx context.Context, req *wire.Request) (any, error) {
	c.s.mu.RLock()
	h := c.s.render
	c.s.mu.RUnlock()
	if h == nil {
		return nil, wire.ErrMethodNotFound
	}
	var p RenderRequest
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Key == "" {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: push/render needs a key"}
	}
	c.goCancellable(ctx, req, func(ctx context.Context) (any, error) { return c.runRender(ctx, p, h) })
	return nil, nil
}

func (c *Conn) runRender(ctx context.Context, p RenderRequest, h func(context.Context, RenderRequest) (RenderResult, error)) (result any, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("push/render handler panicked", slog.String("key", p.Key),
				slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			result, err = nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "internal error"}
		}
	}()
	res, err := h(ctx, p)
	if err != nil {
		var we *protocol.Error
		if errors.As(err, &we) {
			return nil, we
		}
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: err.Error()}
	}
	if res.Content == nil {
		res.Content = []json.RawMessage{}
	}
	return res, nil
}

// Coalescing is what the host advertised of event coalescing in its
// initialize (RFC-006 §10); ok is false before initialize, and the zero
// value (nothing served) for a host that advertised none.
func (c *Conn) Coalescing() (ec protocol.EventCoalescing, ok bool) {
	ip, ok := c.Initialize()
	if !ok {
		return ec, false
	}
	var mcpl map[string]json.RawMessage
	if json.Unmarshal(ip.Capabilities.Experimental["mcpl"], &mcpl) != nil {
		return ec, true
	}
	if raw, has := mcpl[protocol.EventCoalescingMember]; has {
		json.Unmarshal(raw, &ec)
	}
	return ec, true
}
