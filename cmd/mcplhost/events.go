package main

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/term"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Bounds on what probe keeps and prints of the privileged messages a
// server sends, which it may send without end (docs/limits.md).
const (
	// maxEventsPerMethod events of each method are kept for the JSON
	// report and printed in the text one; the rest are counted.
	maxEventsPerMethod = 20
	// maxEventLine bounds an event's text line, in runes.
	maxEventLine = 300
	// maxEventPart bounds, in bytes, the params and the answer kept of an
	// event (larger ones are replaced by their size) and its reason (cut).
	maxEventPart = 4 << 10
	// maxChannels registered channels are kept; registrations of more
	// are counted and ignored, as is a channel whose id is over
	// maxChannelID bytes. A label, type or direction is cut to
	// maxChannelField bytes.
	maxChannels     = 1000
	maxChannelID    = 1 << 10
	maxChannelField = 256
)

// eventLog keeps the privileged messages a server sends, the admission
// decision on each and the answer it got, and the channels it registered,
// within the bounds above. In text mode it prints each kept message as it
// arrives once the report's header is out, and those that came before
// right after it; once a method passes maxEventsPerMethod it says so once,
// and finish says how many of each were counted, not printed.
//
// The methods are the few privileged ones session reports (OnInbound), so
// the counts by method stay small.
type eventLog struct {
	out  io.Writer
	json bool

	mu         sync.Mutex
	events     []probeEvent   // the first maxEventsPerMethod of each method
	lines      []string       // their lines in the text report (text mode)
	counts     map[string]int // every event, by method
	live       bool           // printing as events arrive
	done       bool           // finish has printed its summary: no more printing
	registered []probeChannel // registered and accepted, in order; at most maxChannels
	ignored    int            // channels not kept
}

func (l *eventLog) add(in session.Inbound) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in.Admitted {
		l.record(in)
	}
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[in.Method]++
	printing := l.live && !l.done && !l.json
	if n := l.counts[in.Method]; n > maxEventsPerMethod {
		if n == maxEventsPerMethod+1 && printing {
			l.printCounted(in.Method)
		}
		return
	}
	e := probeEvent{Method: in.Method, Request: in.Request, Admitted: in.Admitted, Reason: wire.Cut(in.Reason, maxEventPart), Note: eventNote(in)}
	e.Params, e.ParamsOmitted = keepPart(in.Params)
	if len(in.Params) == 0 {
		e.Params = json.RawMessage("null")
	}
	e.Answer, e.AnswerOmitted = keepPart(in.Answer)
	l.events = append(l.events, e)
	if l.json {
		return
	}
	line := eventLine(in)
	l.lines = append(l.lines, line)
	if printing {
		printer{l.out}.linef("%s", line)
	}
}

// keepPart copies raw when it is within maxEventPart bytes; otherwise it
// returns nil and raw's size.
func keepPart(raw json.RawMessage) (json.RawMessage, int) {
	if len(raw) > maxEventPart {
		return nil, len(raw)
	}
	if raw == nil {
		return nil, 0
	}
	return append(json.RawMessage{}, raw...), 0
}

// eventLine is an event's line in the text report, escaped (term.Line)
// and cut to maxEventLine runes: the method, the verdict, whether it came
// as a request or a notification, the note (eventNote) if any, the params
// and, for a request admitted, its answer.
func eventLine(in session.Inbound) string {
	kind := "request"
	if !in.Request {
		kind = "notification"
	}
	var verdict string
	switch {
	case !in.Admitted:
		verdict = "rejected (" + kind + "): " + in.Reason
	case in.Reason != "":
		verdict = "admitted (" + kind + "; " + in.Reason + ")"
	default:
		verdict = "admitted (" + kind + ")"
	}
	if note := eventNote(in); note != "" {
		sep := ": "
		if !in.Admitted {
			sep = "; "
		}
		verdict += sep + note
	}
	params := in.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	line := "event " + in.Method + ": " + verdict + " " + compact(params)
	if in.Admitted && in.Answer != nil {
		line += " -> " + compact(in.Answer)
	}
	return cutRunes(term.Line(line), maxEventLine)
}

// incomingUnanswered is said of a channels/incoming that came as a
// notification: the per-message results (ChannelsIncomingResult) are a
// request's answer, so the server learns nothing of what became of its
// messages.
const incomingUnanswered = "a notification can't be answered with per-message results, so nothing tells the server which messages were kept"

// eventNote is what a connector author needs told of an event beyond its
// verdict: for a channels/incoming that came as a notification, that the
// server can't learn which messages were kept, and what probe did with
// them. It is "" for every other event.
func eventNote(in session.Inbound) string {
	if in.Method != protocol.MethodChannelsIncoming || in.Request {
		return ""
	}
	if in.Admitted {
		return incomingUnanswered + "; probe declined them all (it has no agent)"
	}
	return incomingUnanswered + " (none were)"
}

// cutRunes cuts s to n runes, ending it with "…" and how many bytes were
// cut, when it is longer.
func cutRunes(s string, n int) string {
	i, runes := 0, 0
	for i < len(s) && runes < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		runes++
	}
	if i == len(s) {
		return s
	}
	return s[:i] + "… (" + strconv.Itoa(len(s)-i) + " bytes cut)"
}

// printCounted says, once, that method's further events are counted.
func (l *eventLog) printCounted(method string) {
	printer{l.out}.linef("event %s: more than %d arrived; further %s events are counted, not printed", method, maxEventsPerMethod, method)
}

// record keeps the channels an admitted registration or change added,
// updated or removed, up to maxChannels.
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
	if len(removed) > 0 {
		gone := make(map[string]bool, len(removed))
		for _, id := range removed {
			gone[id] = true
		}
		l.registered = slices.DeleteFunc(l.registered, func(c probeChannel) bool { return gone[c.ID] })
	}
	index := make(map[string]int, len(l.registered))
	for i, c := range l.registered {
		index[c.ID] = i
	}
	for _, d := range added {
		c := probeChannel{ID: d.ID, Label: wire.Cut(d.Label, maxChannelField), Type: wire.Cut(d.Type, maxChannelField),
			Direction: wire.Cut(d.Direction, maxChannelField), Registered: true}
		if i, ok := index[d.ID]; ok {
			l.registered[i] = c
			continue
		}
		if len(l.registered) >= maxChannels || len(d.ID) > maxChannelID {
			l.ignored++
			continue
		}
		index[d.ID] = len(l.registered)
		l.registered = append(l.registered, c)
	}
}

// goLive prints what was kept so far, says which methods are counted
// already, and prints every later event as it comes.
func (l *eventLog) goLive() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		printer{l.out}.linef("%s", line)
	}
	for _, m := range l.overflowing() {
		l.printCounted(m)
	}
	l.live = true
}

// finish ends the printing: in text mode it says how many events of each
// method were counted, not printed, and how many channels were ignored.
// Events that come later are counted only.
func (l *eventLog) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.done = true
	if l.json {
		return
	}
	for _, m := range l.overflowing() {
		printer{l.out}.linef("events: %d further %s events were counted, not printed", l.counts[m]-maxEventsPerMethod, m)
	}
	if l.ignored > 0 {
		printer{l.out}.linef("channels: %d more registered channels were ignored (at most %d are kept)", l.ignored, maxChannels)
	}
}

// overflowing returns the methods with more than maxEventsPerMethod
// events, in order.
func (l *eventLog) overflowing() []string {
	var out []string
	for m, n := range l.counts {
		if n > maxEventsPerMethod {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

func (l *eventLog) all() []probeEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]probeEvent{}, l.events...)
}

// omitted returns how many events of each method were not kept (an empty
// map when none were), and how many channels were ignored.
func (l *eventLog) omitted() (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, m := range l.overflowing() {
		out[m] = l.counts[m] - maxEventsPerMethod
	}
	return out, l.ignored
}

// channels returns the registered channels, for the report.
func (l *eventLog) channels() []probeChannel {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]probeChannel{}, l.registered...)
}

// mergeListed marks the registered channels channels/list also gave, and
// adds those it gave that were not registered, up to maxChannels in all.
func mergeListed(registered []probeChannel, listed []protocol.ChannelDescriptor) []probeChannel {
	out := registered
	index := make(map[string]int, len(out))
	for i, c := range out {
		index[c.ID] = i
	}
	for _, d := range listed {
		if i, ok := index[d.ID]; ok {
			out[i].Listed = true
			continue
		}
		if len(out) >= maxChannels || len(d.ID) > maxChannelID {
			continue
		}
		index[d.ID] = len(out)
		out = append(out, probeChannel{ID: d.ID, Label: wire.Cut(d.Label, maxChannelField), Type: wire.Cut(d.Type, maxChannelField),
			Direction: wire.Cut(d.Direction, maxChannelField), Listed: true})
	}
	return out
}

// acceptEvent is the probe's push-event consumer: the event log has it;
// the server hears it was accepted, unless its content shows nothing an
// agent could read, which a host refuses (-32602, reason empty-content).
func acceptEvent(_ context.Context, ev session.PushEvent) (protocol.PushEventResult, error) {
	if !content.Shows(ev.Params.Payload.Content) {
		return protocol.PushEventResult{}, emptyContent
	}
	return protocol.PushEventResult{Accepted: true}, nil
}

// emptyContent refuses a push event whose content shows nothing.
var emptyContent = protocol.NewError(protocol.CodeInvalidParams, "Invalid params: the event's content shows nothing an agent could read ("+content.ReasonEmptyContent+")",
	map[string]string{"reason": content.ReasonEmptyContent})

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
