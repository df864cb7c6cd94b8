package main

import (
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// eventLog keeps the privileged messages a server sends and the admission
// decision on each. In text mode it prints each as it arrives once the
// report's header is out, and those that came before right after it.
type eventLog struct {
	out  io.Writer
	json bool

	mu     sync.Mutex
	events []probeEvent
	live   bool
}

func (l *eventLog) add(in session.Inbound) {
	e := probeEvent{Method: in.Method, Admitted: in.Admitted, Reason: in.Reason, Params: append(json.RawMessage(nil), in.Params...)}
	if len(e.Params) == 0 {
		e.Params = json.RawMessage("null")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	if l.live && !l.json {
		printEvent(l.out, e)
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

// probeHandler answers what the session admits, as a diagnostic host
// would: registrations are accepted one by one (so a server goes on to
// show what it does next), and inbound messages are declined, since no
// agent is here to read them.
type probeHandler struct{}

func (probeHandler) Serve(_ context.Context, req *wire.Request) (any, error) {
	switch req.Method {
	case protocol.MethodChannelsRegister:
		var p protocol.ChannelsRegisterParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &wire.Error{Code: wire.CodeInvalidParams, Message: "Invalid params"}
		}
		return acceptAll(p.Channels, nil), nil
	case protocol.MethodChannelsChanged:
		var p protocol.ChannelsChangedParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &wire.Error{Code: wire.CodeInvalidParams, Message: "Invalid params"}
		}
		return acceptAll(append(p.Added, p.Updated...), p.Removed), nil
	case protocol.MethodChannelsIncoming:
		var p protocol.ChannelsIncomingParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &wire.Error{Code: wire.CodeInvalidParams, Message: "Invalid params"}
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
