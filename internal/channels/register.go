package channels

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// Registration (SPEC §14.3, §14.5): each descriptor is validated and
// authorized on its own and answered with an itemized result before any
// lifecycle work starts; the decisions a registration makes are recorded,
// all in one durable append, and carried out through each channel's queue
// once the caller has sent the answer (Register's start).

// Bounds on what a server registers (docs/limits.md).
const (
	// MaxIDBytes bounds a channel id, and an inbound message id.
	MaxIDBytes = 512
	// MaxChannelsPerServer bounds the channels one server has registered
	// at once.
	MaxChannelsPerServer = 65536
)

// Reasons a descriptor or a message is refused, as the server reads them.
const (
	reasonMissingID     = "invalid descriptor: missing id"
	reasonLongID        = "invalid descriptor: the id is longer than 512 bytes"
	reasonBadID         = "invalid descriptor: the id is not valid UTF-8"
	reasonDirection     = "invalid descriptor: direction must be outbound, inbound or bidirectional"
	reasonDuplicate     = "invalid descriptor: the id appears twice in this request"
	reasonTooMany       = "too many channels: this host keeps at most 65536 per server"
	reasonNotRegistered = "not registered"
	reasonUpdateUnknown = "not registered — update rejected (§14.5)"
)

// checkDescriptor says why d is refused ("" when it is not).
func checkDescriptor(d protocol.ChannelDescriptor) string {
	switch {
	case d.ID == "":
		return reasonMissingID
	case len(d.ID) > MaxIDBytes:
		return reasonLongID
	case !utf8.ValidString(d.ID):
		return reasonBadID
	}
	switch d.Direction {
	case "", protocol.DirectionInbound, protocol.DirectionOutbound, protocol.DirectionBidirectional:
	default:
		return reasonDirection
	}
	return ""
}

// Register takes a server's channels/register. It returns the itemized
// results, to be sent as the answer, and start, to be called once the
// answer is sent: it queues the lifecycle work. start is never nil.
func (r *Registry) Register(server string, descs []protocol.ChannelDescriptor) (protocol.ChannelResults, func()) {
	results, accepted := r.add(server, descs, nil)
	return protocol.ChannelResults{Results: results}, r.reconcile(server, accepted)
}

// Changed takes a server's channels/changed, as a request or (notify) a
// notification: removals, updates and additions, each itemized. A
// notification that must be partly refused is filtered and logged, since
// it carries no answer.
func (r *Registry) Changed(server string, p protocol.ChannelsChangedParams, notify bool) (protocol.ChannelResults, func()) {
	return r.changed(server, changes{added: p.Added, removed: p.Removed, updated: p.Updated}, notify)
}

// changes is a channels/changed, with the reasons items that did not
// decode are refused for ("" for those that did).
type changes struct {
	added, updated       []protocol.ChannelDescriptor
	addedBad, updatedBad []string
	removed, removedBad  []string
}

func (r *Registry) changed(server string, ch changes, notify bool) (protocol.ChannelResults, func()) {
	var results []protocol.ChannelResult
	r.mu.Lock()
	for i, id := range ch.removed {
		if bad := at(ch.removedBad, i); bad != "" {
			results = append(results, protocol.ChannelResult{ID: id, Accepted: false, Reason: bad})
			continue
		}
		c := r.chans[Key{server, id}]
		if c == nil || c.entry == nil {
			results = append(results, protocol.ChannelResult{ID: id, Accepted: false, Reason: reasonNotRegistered})
			continue
		}
		// The live entry goes and its queued work is cancelled; the
		// decision stays.
		r.unregisterLocked(c)
		results = append(results, protocol.ChannelResult{ID: id, Accepted: true})
	}
	var retarget []*chanState
	for i, d := range ch.updated {
		why := at(ch.updatedBad, i)
		if why == "" {
			why = checkDescriptor(d)
		}
		if why != "" {
			results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: false, Reason: why})
			continue
		}
		c := r.chans[Key{server, d.ID}]
		if c == nil || c.entry == nil {
			results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: false, Reason: reasonUpdateUnknown})
			continue
		}
		moved := !sameTarget(c.entry.desc, d)
		c.entry = &entry{desc: d}
		if moved {
			// A new target invalidates the open confirmation, and the
			// decision is carried out again; a label change alone does
			// not.
			c.confirmed = false
			c.target++
			retarget = append(retarget, c)
		}
		results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: true})
	}
	r.mu.Unlock()
	added, accepted := r.add(server, ch.added, ch.addedBad)
	results = append(results, added...)
	if notify {
		r.logRefused(server, protocol.MethodChannelsChanged, results)
	}
	start := r.reconcile(server, accepted)
	return protocol.ChannelResults{Results: results}, func() {
		start()
		if r.directsLifecycle(server) {
			for _, c := range retarget {
				r.apply(c, false)
			}
		}
	}
}

// at returns l[i], or "" past its end.
func at(l []string, i int) string {
	if i < len(l) {
		return l[i]
	}
	return ""
}

// logRefused logs each item a notification had refused: nothing can tell
// the server, and silent filtering would leave the two sides disagreeing
// about which channels exist (SPEC §14.5).
func (r *Registry) logRefused(server, method string, results []protocol.ChannelResult) {
	for _, res := range results {
		if !res.Accepted {
			r.log.Warn("a channel notification was partly refused: the server thinks a channel changed that this host did not take",
				"server", server, "method", method, "channel", quoteID(res.ID), "reason", res.Reason)
		}
	}
}

// sameTarget reports whether a and b name the same place: the same type
// and an equal address.
func sameTarget(a, b protocol.ChannelDescriptor) bool {
	return a.Type == b.Type && jsonEqual(a.Address, b.Address)
}

func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// add validates descs and makes the accepted ones live; pre[i], when not
// "", refuses descs[i] for that reason.
func (r *Registry) add(server string, descs []protocol.ChannelDescriptor, pre []string) ([]protocol.ChannelResult, []*chanState) {
	results := make([]protocol.ChannelResult, 0, len(descs))
	var accepted []*chanState
	seen := map[string]bool{}
	r.mu.Lock()
	defer r.mu.Unlock()
	live := 0
	for k, c := range r.chans {
		if k.Server == server && c.entry != nil {
			live++
		}
	}
	for i, d := range descs {
		why := at(pre, i)
		if why == "" {
			why = checkDescriptor(d)
		}
		if why == "" && seen[d.ID] {
			why = reasonDuplicate
		}
		c := r.chans[Key{server, d.ID}]
		fresh := c == nil || c.entry == nil
		if why == "" && fresh && live >= MaxChannelsPerServer {
			why = reasonTooMany
		}
		if why != "" {
			results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: false, Reason: why})
			continue
		}
		seen[d.ID] = true
		c = r.chanLocked(Key{server, d.ID})
		if fresh {
			live++
		} else if !sameTarget(c.entry.desc, d) {
			c.confirmed = false
			c.target++
		}
		c.entry = &entry{desc: d}
		accepted = append(accepted, c)
		results = append(results, protocol.ChannelResult{ID: d.ID, Accepted: true})
	}
	return results, accepted
}

// reconcile records the decisions a registration of chans makes (the
// lift rule) and returns the work to start once the answer is sent: a
// notice of the channels the subscription policy selected, and each
// channel's decision carried out through its queue. A server whose
// lifecycle this host does not direct owns its channels: nothing is
// recorded or sent.
func (r *Registry) reconcile(server string, chans []*chanState) func() {
	srv := r.server(server)
	if len(chans) == 0 || srv == nil || !srv.conn.Has("channels.lifecycle") {
		return func() {}
	}
	admitted, err := r.recordInitial(srv, chans)
	if err != nil {
		// Nothing was decided, so there is nothing to carry out: the
		// next registration of these channels decides them again.
		ids := make([]string, len(chans))
		for i, c := range chans {
			ids[i] = quoteID(c.key.Channel)
		}
		r.log.Error("registered channels left undecided: their decisions could not be recorded, so no lifecycle request is sent until they are registered again", "server", server, "channels", ids, "error", err.Error())
		return func() {}
	}
	return func() {
		if len(admitted) > 0 {
			r.notify(Notice{Kind: NoticeOpened, Cause: SourceSubscriptionPolicy, Server: server, Channels: admitted})
		}
		for _, c := range chans {
			r.apply(c, false)
		}
	}
}

// recordInitial applies the lift rule to each channel, in one durable
// append, and returns the channels the subscription policy selected.
func (r *Registry) recordInitial(srv *serverState, chans []*chanState) ([]ChannelRef, error) {
	sorted := slices.Clone(chans)
	slices.SortFunc(sorted, func(a, b *chanState) int { return cmp.Compare(a.key.Channel, b.key.Channel) })
	for _, c := range sorted {
		c.decide.Lock()
	}
	defer func() {
		for _, c := range sorted {
			c.decide.Unlock()
		}
	}()
	var recs []store.Record
	var admitted []ChannelRef
	r.mu.Lock()
	for _, c := range chans {
		if c.entry == nil {
			continue
		}
		state, source, ok := initial(c.decision, c.entry.desc, srv.admits(c.key.Channel))
		if !ok {
			continue
		}
		recs = append(recs, store.Record{Kind: store.KindDecision, Server: c.key.Server, Channel: c.key.Channel, State: state, Source: source})
		if source == SourceSubscriptionPolicy {
			admitted = append(admitted, ChannelRef{ID: c.key.Channel, Label: c.entry.desc.Label})
		}
	}
	r.mu.Unlock()
	if len(recs) == 0 {
		return nil, nil
	}
	if _, err := r.record(recs...); err != nil {
		return nil, err
	}
	return admitted, nil
}

// ServerList answers the server's channels/list: the channels it has
// registered.
func (r *Registry) ServerList(server string) protocol.ChannelsListResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []protocol.ChannelDescriptor{}
	for k, c := range r.chans {
		if k.Server == server && c.entry != nil {
			out = append(out, c.entry.desc)
		}
	}
	slices.SortFunc(out, func(a, b protocol.ChannelDescriptor) int { return cmp.Compare(a.ID, b.ID) })
	return protocol.ChannelsListResult{Channels: out}
}

// Incoming takes a server's channels/incoming: each message is validated
// at receipt against the channel as this server registered it now, and
// the accepted ones are added to the durable inbox before the answer says
// so. A message already in the inbox is accepted again and kept once.
// The caller has checked the channels.incoming grant current at receipt.
func (r *Registry) Incoming(ctx context.Context, server string, raw []json.RawMessage) (protocol.ChannelsIncomingResult, error) {
	return r.receive(server, raw).commit(ctx, r)
}

// received is a channels/incoming validated at receipt, not yet durable.
type received struct {
	server  string
	results []protocol.IncomingResult
	msgs    []store.Message
	at      []int // the index in results of each of msgs
}

// receive validates each message against the registrations as they are
// now.
func (r *Registry) receive(server string, raw []json.RawMessage) *received {
	in := &received{server: server, results: make([]protocol.IncomingResult, len(raw))}
	now := r.opts.Now().UTC()
	for i, m := range raw {
		var msg struct {
			ChannelID *string         `json:"channelId"`
			MessageID *string         `json:"messageId"`
			ThreadID  *string         `json:"threadId"`
			Content   json.RawMessage `json:"content"`
			Tags      json.RawMessage `json:"tags"`
		}
		err := json.Unmarshal(m, &msg)
		switch {
		case err != nil || msg.ChannelID == nil || msg.MessageID == nil || *msg.ChannelID == "" || *msg.MessageID == "":
			in.results[i] = protocol.IncomingResult{MessageID: cut(strOr(msg.MessageID)), Reason: "invalid channel/message identity"}
			continue
		case len(*msg.ChannelID) > MaxIDBytes || len(*msg.MessageID) > MaxIDBytes:
			in.results[i] = protocol.IncomingResult{MessageID: cut(*msg.MessageID), Reason: "invalid channel/message identity: an id is longer than 512 bytes"}
			continue
		}
		in.results[i].MessageID = *msg.MessageID
		if !r.registered(Key{server, *msg.ChannelID}) {
			in.results[i].Reason = fmt.Sprintf("unknown channel %q — register it first (§14.5)", cut(*msg.ChannelID))
			continue
		}
		// A message that shows an agent nothing is refused: blocks this
		// host can't show still count, as their markers say something.
		if blocks, ok := content.Blocks(msg.Content); !ok || !content.Shows(blocks) {
			in.results[i].Reason = content.ReasonEmptyContent
			continue
		}
		in.msgs = append(in.msgs, store.Message{Server: server, Channel: *msg.ChannelID, MessageID: *msg.MessageID, ThreadID: strOr(msg.ThreadID),
			Tags: tags(msg.Tags), Body: m, At: now})
		in.at = append(in.at, i)
	}
	return in
}

// commit makes the accepted messages durable and answers.
func (in *received) commit(ctx context.Context, r *Registry) (protocol.ChannelsIncomingResult, error) {
	if len(in.msgs) > 0 {
		if _, err := r.opts.Store.AddMessages(ctx, in.msgs); err != nil {
			r.log.Error("inbound channel messages could not be stored", "server", in.server, "messages", len(in.msgs), "error", err.Error())
			return protocol.ChannelsIncomingResult{}, &protocol.Error{Code: protocol.CodeInternalError, Message: "this host could not store the messages; none was accepted: send them again later"}
		}
	}
	for _, i := range in.at {
		in.results[i].Accepted = true
	}
	if len(in.msgs) > 0 && r.opts.OnMessages != nil {
		r.opts.OnMessages()
	}
	return protocol.ChannelsIncomingResult{Results: in.results}, nil
}

// Bounds on a message's tags: more, or longer, are dropped.
const (
	MaxTags     = 64
	MaxTagBytes = 256
)

// tags reads a message's tags (the strings among them, within bounds; a
// value that is no array has none) and applies SPEC §16.3's core closure;
// nil when none. Tags authorize nothing: they say what the message is,
// for the agent layer's rules.
func tags(field json.RawMessage) []string {
	var raw []json.RawMessage
	if json.Unmarshal(field, &raw) != nil {
		return nil
	}
	var out []string
	for _, t := range raw {
		var s string
		if json.Unmarshal(t, &s) != nil || s == "" || len(s) > MaxTagBytes {
			continue
		}
		if out = append(out, s); len(out) == MaxTags {
			break
		}
	}
	if len(out) == 0 {
		return nil
	}
	return content.Close(out)
}

func (r *Registry) registered(k Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.chans[k]
	return c != nil && c.entry != nil
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// cut bounds an id a server sent before it goes back in a reason.
func cut(s string) string { return wire.Cut(s, 64) }
