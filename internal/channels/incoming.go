package channels

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/inbox"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// ServerList answers the server's channels/list: the channels it has
// registered.
func (r *Registry) ServerList(server string) protocol.ChannelsListResult {
	r.viewMu.RLock()
	out := []protocol.ChannelDescriptor{}
	for k, v := range r.views {
		if k.Server == server && v.registered {
			out = append(out, v.desc)
		}
	}
	r.viewMu.RUnlock()
	slices.SortFunc(out, func(a, b protocol.ChannelDescriptor) int { return cmp.Compare(a.ID, b.ID) })
	return protocol.ChannelsListResult{Channels: out}
}

// Incoming takes a server's channels/incoming: each message is validated
// at receipt against the channel as this server registered it now, and
// the accepted ones are added to the durable inbox before the answer says
// so. A message already in the inbox is accepted again and kept once.
// The caller has checked the channels.incoming grant current at receipt.
func (r *Registry) Incoming(ctx context.Context, server string, raw []json.RawMessage) (protocol.ChannelsIncomingResult, error) {
	in := r.receive(server, raw)
	if len(in.co) > 0 {
		return in.inOrder(ctx, r)
	}
	return in.answer(r, in.accept(r))
}

// received is a channels/incoming validated at receipt, not yet durable.
type received struct {
	server  string
	results []protocol.IncomingResult
	msgs    []store.Message
	at      []int // the index in results of each of msgs
	// co are the messages that carry coalesce, for the Coalescer, with
	// their index in results; none without a Coalescer.
	co []coalescedMessage
}

// coalescedMessage is a valid message that carries coalesce.
type coalescedMessage struct {
	i        int
	m        store.Message
	eventID  string
	coalesce json.RawMessage
}

// receive validates each message against the registrations as they are
// now.
func (r *Registry) receive(server string, raw []json.RawMessage) *received {
	in := &received{server: server, results: make([]protocol.IncomingResult, len(raw))}
	now := r.opts.Now().UTC()
	directed := r.directsLifecycle(server)
	for i, m := range raw {
		var msg struct {
			ChannelID *string         `json:"channelId"`
			MessageID *string         `json:"messageId"`
			ThreadID  *string         `json:"threadId"`
			Content   json.RawMessage `json:"content"`
			Tags      json.RawMessage `json:"tags"`
			EventID   *string         `json:"eventId"`
			Coalesce  json.RawMessage `json:"coalesce"`
		}
		err := json.Unmarshal(m, &msg)
		switch {
		case err != nil || msg.ChannelID == nil || msg.MessageID == nil || *msg.ChannelID == "" || *msg.MessageID == "":
			in.results[i] = protocol.IncomingResult{MessageID: cut(strOr(msg.MessageID)), Reason: "invalid channel/message identity"}
			continue
		case len(*msg.ChannelID) > MaxIDBytes || len(*msg.MessageID) > MaxIDBytes || msg.ThreadID != nil && len(*msg.ThreadID) > MaxIDBytes:
			in.results[i] = protocol.IncomingResult{MessageID: cut(*msg.MessageID), Reason: "invalid channel/message identity: an id is longer than 512 bytes"}
			continue
		case !content.Printable(*msg.MessageID) || msg.ThreadID != nil && !content.Printable(*msg.ThreadID):
			// An agent repeats these ids exactly: they must read as
			// they are.
			in.results[i] = protocol.IncomingResult{MessageID: cut(*msg.MessageID), Reason: "invalid channel/message identity: an id holds a control, line break, bidirectional or invisible formatting character"}
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
		row := store.Message{Server: server, Channel: *msg.ChannelID, MessageID: *msg.MessageID, ThreadID: strOr(msg.ThreadID),
			Tags: tags(msg.Tags), Directed: directed, Body: m, At: now}
		if c := msg.Coalesce; r.opts.Coalescer != nil && len(c) > 0 && string(c) != "null" {
			// RFC-006 §3.1: a coalesced message names its occurrence.
			id := strOr(msg.EventID)
			if id == "" || len(id) > MaxIDBytes || !content.Printable(id) {
				in.results[i].Reason = protocol.ReasonCoalesceInvalid
				continue
			}
			in.co = append(in.co, coalescedMessage{i: i, m: row, eventID: id, coalesce: c})
			continue
		}
		in.msgs = append(in.msgs, row)
		in.at = append(in.at, i)
	}
	return in
}

// inOrder decides a channels/incoming that carries coalesced messages:
// each message in the order sent, the ordinary ones through the inbox and
// the coalesced ones through the Coalescer, each durable before the next
// is decided. It runs on the connection's dispatch, as push/event does, so
// that an edit is never decided before the create its server sent first.
func (in *received) inOrder(ctx context.Context, r *Registry) (protocol.ChannelsIncomingResult, error) {
	co := in.co
	msgs, at := in.msgs, in.at
	for len(co) > 0 || len(msgs) > 0 {
		if len(co) == 0 || len(msgs) > 0 && at[0] < co[0].i {
			// The ordinary messages up to the next coalesced one.
			n := 0
			for n < len(msgs) && (len(co) == 0 || at[n] < co[0].i) {
				n++
			}
			part := &received{server: in.server, results: in.results, msgs: msgs[:n], at: at[:n]}
			if _, err := part.answer(r, part.accept(r)); err != nil {
				return protocol.ChannelsIncomingResult{}, err
			}
			msgs, at = msgs[n:], at[n:]
			continue
		}
		c := co[0]
		co = co[1:]
		res, err := r.opts.Coalescer.Incoming(ctx, c.m, c.eventID, c.coalesce)
		if err != nil {
			return protocol.ChannelsIncomingResult{}, err
		}
		res.MessageID = c.m.MessageID
		in.results[c.i] = res
	}
	return protocol.ChannelsIncomingResult{Results: in.results}, nil
}

// accept hands the accepted messages to the inbox, in receipt order: its
// Seqs are taken here, before any concurrency.
func (in *received) accept(r *Registry) <-chan inbox.Result {
	if len(in.msgs) == 0 {
		ch := make(chan inbox.Result, 1)
		ch <- inbox.Result{}
		return ch
	}
	return r.inbox.Accept(in.msgs)
}

// answer waits for the inbox's outcome and answers: the messages are
// accepted once they are durable.
func (in *received) answer(r *Registry, done <-chan inbox.Result) (protocol.ChannelsIncomingResult, error) {
	var res inbox.Result
	select {
	case res = <-done:
	case <-r.ctx.Done():
		// Closing. An answer already there is taken; otherwise (the
		// inbox is still committing, or its store is wedged) they are
		// not accepted, as far as this host can say. If they were
		// written after all, the server's next send of them is kept once.
		select {
		case res = <-done:
		default:
			res.Err = errClosing
		}
	}
	switch {
	case errors.Is(res.Err, errClosing) || errors.Is(res.Err, inbox.ErrClosed):
		// A refusal at shutdown is no failure of the store: the server
		// is told to send them again, and the log says so at debug.
		r.log.Debug("inbound channel messages refused: this host is shutting down", "server", in.server, "messages", len(in.msgs))
		return protocol.ChannelsIncomingResult{}, &protocol.Error{Code: protocol.CodeInternalError, Message: refusedClosing}
	case res.Err != nil:
		// At most a line and a count a window for each server: a failing
		// store fails every call, and its health is logged by the host.
		r.limits.LogFor(&logIncomingNotStored, in.server, "server", in.server, "messages", len(in.msgs), "error", res.Err.Error())
		return protocol.ChannelsIncomingResult{}, &protocol.Error{Code: protocol.CodeInternalError, Message: "this host could not store the messages; none was accepted: send them again later"}
	}
	for _, i := range in.at {
		in.results[i].Accepted = true
	}
	return protocol.ChannelsIncomingResult{Results: in.results}, nil
}

// logIncomingNotStored is a channels/incoming whose messages the store
// failed to keep.
var logIncomingNotStored = lograte.Kind{
	Msg:     "inbound channel messages could not be stored, so none was accepted; their server was told to send them again later",
	Summary: "%s more channels/incoming could not be stored%s in %s, and were refused",
	Level:   slog.LevelError,
	KeyAttr: "server",
}

// refusedClosing answers, to the server, a channels/incoming that arrived
// as this host stopped: none was accepted.
const refusedClosing = "this host is shutting down; none of the messages was accepted: send them again later"

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
	_, ok := r.registration(k)
	return ok
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// cut bounds an id a server sent before it goes back in a reason.
func cut(s string) string { return wire.Cut(s, 64) }

// Registered reports whether server has channel registered now, and
// whether this host directs that server's channels (channels.lifecycle):
// the authority of a channel-scoped coalesced push (RFC-006 §3.2), which
// is never inferred from an origin, nor registered lazily.
func (r *Registry) Registered(server, channel string) (directed, ok bool) {
	if !r.registered(Key{server, channel}) {
		return false, false
	}
	return r.directsLifecycle(server), true
}
