package main

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"sync"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// eventLog keeps the privileged messages a server sends, the admission
// decision on each and the answer it got, and the channels it registered.
// In text mode it prints each message as it arrives once the report's
// header is out, and those that came before right after it.
type eventLog struct {
	out  io.Writer
	json bool

	mu         sync.Mutex
	events     []probeEvent
	live       bool
	registered []protocol.ChannelDescriptor // registered and accepted, in order
}

func (l *eventLog) add(in session.Inbound) {
	e := probeEvent{Method: in.Method, Request: in.Request, Admitted: in.Admitted, Reason: in.Reason,
		Params: append(json.RawMessage(nil), in.Params...), Answer: in.Answer}
	if len(e.Params) == 0 {
		e.Params = json.RawMessage("null")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	if in.Admitted {
		l.record(in)
	}
	if l.live && !l.json {
		printEvent(l.out, e)
	}
}

// record keeps the channels an admitted registration or change added,
// updated or removed.
func (l *eventLog) record(in session.Inbound) {
	var added []protocol.ChannelDescriptor
	var removed []string
	switch in.Method {
	case protocol.MethodChannelsRegister:
		var p protocol.ChannelsRegisterParams
		if json.Unmarshal(in.Params, &p) != nil {
			return
		}
		added = p.Channels
	case protocol.MethodChannelsChanged:
		var p protocol.ChannelsChangedParams
		if json.Unmarshal(in.Params, &p) != nil {
			return
		}
		added, removed = append(p.Added, p.Updated...), p.Removed
	default:
		return
	}
	l.registered = slices.DeleteFunc(l.registered, func(d protocol.ChannelDescriptor) bool { return slices.Contains(removed, d.ID) })
	for _, d := range added {
		if i := slices.IndexFunc(l.registered, func(x protocol.ChannelDescriptor) bool { return x.ID == d.ID }); i >= 0 {
			l.registered[i] = d
		} else {
			l.registered = append(l.registered, d)
		}
	}
}

// goLive prints what arrived so far and every later event as it comes.
func (l *eventLog) goLive() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		printEvent(l.out, e)
	}
	l.live = true
}

func (l *eventLog) all() []probeEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]probeEvent{}, l.events...)
}

// channels returns the registered channels, for the report.
func (l *eventLog) channels() []probeChannel {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []probeChannel{}
	for _, d := range l.registered {
		out = append(out, probeChannel{ID: d.ID, Label: d.Label, Type: d.Type, Direction: d.Direction, Registered: true})
	}
	return out
}

// mergeListed marks the registered channels channels/list also gave, and
// adds those it gave that were not registered.
func mergeListed(registered []probeChannel, listed []protocol.ChannelDescriptor) []probeChannel {
	out := registered
	for _, d := range listed {
		if i := slices.IndexFunc(out, func(c probeChannel) bool { return c.ID == d.ID }); i >= 0 {
			out[i].Listed = true
			continue
		}
		out = append(out, probeChannel{ID: d.ID, Label: d.Label, Type: d.Type, Direction: d.Direction, Listed: true})
	}
	return out
}

// acceptEvent is the probe's push-event consumer: the event log has it;
// the server hears it was accepted.
func acceptEvent(context.Context, session.PushEvent) (protocol.PushEventResult, error) {
	return protocol.PushEventResult{Accepted: true}, nil
}

// probeHandler answers what the session admits, as a diagnostic host
// would: registrations are accepted one by one (so a server goes on to
// show what it does next), and inbound messages are declined, since no
// agent is here to read them.
type probeHandler struct{}

func (probeHandler) Serve(_ context.Context, req *wire.Request) (any, error) {
	switch req.Method {
	case protocol.MethodPing:
		return struct{}{}, nil
	case protocol.MethodChannelsRegister:
		var p protocol.ChannelsRegisterParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params"}
		}
		return acceptAll(p.Channels, nil), nil
	case protocol.MethodChannelsChanged:
		var p protocol.ChannelsChangedParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params"}
		}
		return acceptAll(append(p.Added, p.Updated...), p.Removed), nil
	case protocol.MethodChannelsIncoming:
		var p protocol.ChannelsIncomingParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid params"}
		}
		res := protocol.ChannelsIncomingResult{Results: []protocol.IncomingResult{}}
		for _, m := range p.Messages {
			res.Results = append(res.Results, protocol.IncomingResult{MessageID: m.MessageID, Accepted: false, Reason: "mcplhost probe has no agent to deliver messages to"})
		}
		return res, nil
	}
	return nil, wire.ErrMethodNotFound
}

func acceptAll(descs []protocol.ChannelDescriptor, removed []string) protocol.ChannelResults {
	res := protocol.ChannelResults{Results: []protocol.ChannelResult{}}
	for _, d := range descs {
		res.Results = append(res.Results, protocol.ChannelResult{ID: d.ID, Accepted: true})
	}
	for _, id := range removed {
		res.Results = append(res.Results, protocol.ChannelResult{ID: id, Accepted: true})
	}
	return res
}
