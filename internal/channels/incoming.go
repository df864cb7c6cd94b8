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
	return in.answer(r, in.accept(r))
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
	directed := r.directsLifecycle(server)
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
		in.msgs = append(in.msgs, store.Message{Server: server, Channel: *msg.ChannelID, MessageID: *msg.MessageID, ThreadID: strOr(msg.ThreadID),
			Tags: tags(msg.Tags), Directed: directed, Body: m, At: now})
		in.at = append(in.at, i)
	}
	return in
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
