package channels

import (
	"context"
	"encoding/json"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Serve answers a server's inbound channel method, admitted by the
// session against the grant current at receipt: channels/register,
// channels/changed, channels/list and channels/incoming. A registration is
// answered, then its lifecycle work starts. handled is false for any other
// method.
func (r *Registry) Serve(ctx context.Context, server string, req *wire.Request) (res any, err error, handled bool) {
	switch req.Method {
	case protocol.MethodChannelsRegister:
		var p struct {
			Channels []json.RawMessage `json:"channels"`
		}
		if err := json.Unmarshal(orEmpty(req.Params), &p); err != nil {
			return nil, invalidParams(req.Method, "params must be an object with a channels array"), true
		}
		descs, pre, sizes := decodeDescriptors(p.Channels, r.maxDescriptorBytes(server))
		p.Channels = nil // what is kept of them is in descs
		results, start := r.registerWith(func(m *machine) ([]protocol.ChannelResult, *registration) {
			return m.register(server, descs, pre, sizes)
		}, func() []string {
			ids := make([]string, len(descs))
			for i, d := range descs {
				ids[i] = d.ID
			}
			return ids
		})
		if req.IsNotification() {
			r.logRefused(server, req.Method, results.Results)
		}
		return r.answerThenStart(req, results, start), nil, true
	case protocol.MethodChannelsChanged:
		var p struct {
			Added   []json.RawMessage `json:"added"`
			Removed []json.RawMessage `json:"removed"`
			Updated []json.RawMessage `json:"updated"`
		}
		if err := json.Unmarshal(orEmpty(req.Params), &p); err != nil {
			return nil, invalidParams(req.Method, "params must be an object with added, removed and updated arrays"), true
		}
		ch := changes{removed: make([]string, len(p.Removed)), removedBad: make([]string, len(p.Removed))}
		for i, raw := range p.Removed {
			if json.Unmarshal(raw, &ch.removed[i]) != nil || ch.removed[i] == "" {
				ch.removedBad[i] = "invalid channel id: removed takes channel id strings"
			}
		}
		limit := r.maxDescriptorBytes(server)
		ch.added, ch.addedBad, ch.addedSizes = decodeDescriptors(p.Added, limit)
		ch.updated, ch.updatedBad, ch.updatedSizes = decodeDescriptors(p.Updated, limit)
		p.Added, p.Updated = nil, nil
		results, start := r.changed(server, ch, req.IsNotification())
		return r.answerThenStart(req, results, start), nil, true
	case protocol.MethodChannelsList:
		return r.ServerList(server), nil, true
	case protocol.MethodChannelsIncoming:
		var p struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(orEmpty(req.Params), &p); err != nil {
			return nil, invalidParams(req.Method, "params must be an object with a messages array"), true
		}
		notification := req.IsNotification()
		if notification {
			// §14.3 makes it a Request, but connectors in use send it
			// as a notification (a tolerant reader, DESIGN principle
			// 6): its messages are kept like a request's, and the
			// server is told nothing, as it can't be. Said once a
			// connection.
			r.warnIncomingNotification(server, len(p.Messages))
		}
		// Validated at receipt, and handed to the inbox, here, on the
		// connection's dispatch: the inbox's order is the order the
		// server sent them in. Answered from a goroutine of its own once
		// they are durable, so the dispatch goes on and a server's
		// requests in flight share the inbox's commits. The request's
		// bytes stay counted against the connection's inbound budget until
		// it is answered, which bounds what a flood can hold.
		if !r.reserveWait() {
			// (A notification's answer is sent nowhere.)
			req.Defer()(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: refusedClosing})
			return nil, nil, true
		}
		in := r.receive(server, p.Messages)
		if len(in.co) > 0 {
			defer r.waits.Done()
			res, err := in.inOrder(ctx, r)
			if err != nil {
				return nil, err, true
			}
			if notification {
				return nil, nil, true
			}
			return res, nil, true
		}
		done := in.accept(r)
		release, reply := req.Hold(), req.Defer()
		go func() {
			defer r.waits.Done()
			defer release()
			res, err := in.answer(r, done)
			if err != nil {
				reply(nil, err)
				return
			}
			reply(res, nil)
		}()
		return nil, nil, true
	}
	return nil, nil, false
}

// answerThenStart sends a request's answer, then starts the lifecycle work
// it made; a notification's work starts at once.
func (r *Registry) answerThenStart(req *wire.Request, results protocol.ChannelResults, start func()) any {
	if req.IsNotification() {
		start()
		return nil
	}
	req.Defer()(results, nil)
	start()
	return nil
}

// decodeDescriptors decodes each descriptor on its own: one that does not
// decode is refused with a reason, the others go on. It returns, too, the
// bytes each was received as. One over limit bytes is refused for its
// size, and only its id is decoded: nothing else of it is kept. What is
// kept of the others is copied out of raws (json.RawMessage and string
// fields decode to copies), so no reference into the request survives.
func decodeDescriptors(raws []json.RawMessage, limit int) ([]protocol.ChannelDescriptor, []string, []int) {
	descs := make([]protocol.ChannelDescriptor, len(raws))
	pre := make([]string, len(raws))
	sizes := make([]int, len(raws))
	for i, raw := range raws {
		sizes[i] = len(raw)
		if len(raw) > limit {
			var id struct {
				ID string `json:"id"`
			}
			json.Unmarshal(raw, &id)
			descs[i] = protocol.ChannelDescriptor{ID: id.ID}
			pre[i] = reasonDescriptorSize(len(raw), limit)
			continue
		}
		if err := json.Unmarshal(raw, &descs[i]); err != nil {
			var id struct {
				ID string `json:"id"`
			}
			json.Unmarshal(raw, &id)
			descs[i] = protocol.ChannelDescriptor{ID: id.ID}
			pre[i] = "invalid descriptor: a field has the wrong type"
		}
	}
	return descs, pre, sizes
}

func orEmpty(p json.RawMessage) json.RawMessage {
	if len(p) == 0 || string(p) == "null" {
		return json.RawMessage(`{}`)
	}
	return p
}

func invalidParams(method, what string) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params: " + method + ": " + what}
}
