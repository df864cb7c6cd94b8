package channels

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Publishing (RFC-011): channel_publish, and later speech, post into a
// channel through channels/publish sent as a request, opening the channel
// first if it is closed (opened-by-delivery). threadId is never sent to a
// channel whose descriptor declares no capabilities.publish.target, and
// the receipt is judged as delivered, failed with nothing posted, or
// unconfirmed (RFC-011 §5).

// Delivery statuses.
const (
	Delivered   = "delivered"
	Failed      = "failed"
	Unconfirmed = "unconfirmed"
)

// PublishOutcome is how a publish went.
type PublishOutcome struct {
	Status    string // Delivered, Failed or Unconfirmed
	Server    string
	Channel   string
	Label     string
	MessageID string
	// Thread is the place the publish asked for: nil none, pointing at
	// "" the channel root (RFC-011).
	Thread *string
	// Text is what the agent reads of a failure ("" when delivered).
	Text string

	// open is how the open before it went, for tests.
	open openOutcome
}

// publishTarget reads a descriptor's capabilities.publish.target: "exact",
// "root", or "" when it declares none.
func publishTarget(caps json.RawMessage) string {
	var c struct {
		Publish struct {
			Target string `json:"target"`
		} `json:"publish"`
	}
	if json.Unmarshal(caps, &c) != nil {
		return ""
	}
	switch c.Publish.Target {
	case "exact", "root":
		return c.Publish.Target
	}
	return ""
}

func (r *Registry) toolPublish(ctx context.Context, a map[string]json.RawMessage, caller Caller) protocol.CallToolResult {
	content, okc := publishContent(a)
	if !okc {
		return fail(textPublishNoContent)
	}
	if _, present := a["channelId"]; !present || string(a["channelId"]) == "null" {
		switch {
		case a["serverId"] != nil && string(a["serverId"]) != "null":
			return fail(textServerNeedsID)
		case a["threadId"] != nil:
			return fail(textThreadNeedsID)
		}
		return fail(textPublishNoChannel)
	}
	var thread *string
	if v, present := a["threadId"]; present {
		var t *string
		if json.Unmarshal(v, &t) != nil || (t != nil && *t == "") {
			return fail("threadId must be a thread's id, or null for the channel root. Nothing was sent.")
		}
		if t == nil {
			t = new(string) // null: the channel root
		}
		thread = t
	}
	k, why := r.resolve(a, textPublishBadChannel)
	if why != "" {
		return fail(why)
	}
	out := r.Publish(ctx, k.Server, k.Channel, thread, content, caller)
	if out.Status != Delivered {
		return fail(out.Text)
	}
	data := map[string]any{"delivered": true, "status": Delivered, "serverId": out.Server, "channelId": out.Channel}
	if out.Label != "" {
		data["channelLabel"] = out.Label
	}
	if thread != nil {
		if *thread == "" {
			data["threadId"] = nil
		} else {
			data["threadId"] = *thread
		}
	}
	if out.MessageID != "" {
		data["messageId"] = out.MessageID
	}
	return ok(data)
}

// publishContent reads content (blocks) or text.
func publishContent(a map[string]json.RawMessage) ([]json.RawMessage, bool) {
	if v, present := a["content"]; present {
		var blocks []json.RawMessage
		if json.Unmarshal(v, &blocks) == nil && len(blocks) > 0 {
			return blocks, true
		}
	}
	text, present, good := str(a, "text")
	if !present || !good || text == "" {
		return nil, false
	}
	b, _ := json.Marshal(protocol.TextContent{Type: "text", Text: text})
	return []json.RawMessage{b}, true
}

// publishParams is channels/publish as this host sends it: threadId is a
// pointer to a pointer so that absent, null and a string differ.
type publishParams struct {
	ChannelID string            `json:"channelId"`
	ThreadID  **string          `json:"threadId,omitempty"`
	Content   []json.RawMessage `json:"content"`
}

// Publish posts content into a registered channel (thread nil: no place
// asked; pointing at "": the channel root), opening it first if it is
// closed.
func (r *Registry) Publish(ctx context.Context, server, channel string, thread *string, blocks []json.RawMessage, who Caller) PublishOutcome {
	k := Key{server, channel}
	desc, registered := r.registration(k)
	out := PublishOutcome{Server: server, Channel: channel, Label: desc.Label, Status: Failed, Thread: thread}
	place := where(channel, desc.Label, thread)
	if !registered {
		out.Text = textNotSent(place, `no registered channel "`+content.Clean(channel)+`" on server "`+server+`"`)
		return out
	}
	if thread != nil {
		switch publishTarget(desc.Capabilities) {
		case "":
			out.Text = textNotSent(place, textUndeclaredThread(labelOr(desc), channel, threadName(thread)))
			return out
		case "root":
			if *thread != "" {
				out.Text = textNotSent(place, textRootThread(labelOr(desc), channel, *thread))
				return out
			}
		}
	}
	o := r.openIfClosed(ctx, k, SourceOpenedByDelivery, caller{agent: who.Agent, label: desc.Label})
	out.open = o
	switch {
	case o.err != nil && (o.prevented || errors.Is(o.err, errSuperseded)):
		out.Text = textNotSent(place, o.reason)
		return out
	case o.err != nil:
		extra := []string{textSelected(o.selected)}
		if o.overtaken {
			extra = append(extra, textOvertaken)
		}
		out.Text = textNotSent(place, textDeliveryOpenFailed(o.reason, extra...))
		return out
	}
	srv := r.server(server)
	if srv == nil {
		out.Text = textNotSent(place, textServerNotFound(server))
		return out
	}
	if !srv.conn.Has("channels.publish") {
		out.Text = textNotSent(place, textNoPublish(server))
		return out
	}
	p := publishParams{ChannelID: channel, Content: blocks}
	if thread != nil {
		t := thread
		if *thread == "" {
			t = nil
		}
		p.ThreadID = &t
	}
	var answer json.RawMessage
	if err := srv.conn.Call(ctx, protocol.MethodChannelsPublish, p, &answer, srv.cfg.Timeout); err != nil {
		var ce *wire.CallError
		if errors.As(err, &ce) && ce.Outcome == wire.NotSent {
			out.Text = textNotSent(place, r.describe(server, err))
			return out
		}
		out.Status, out.Text = Unconfirmed, textUnconfirmed(place, r.describe(server, err))
		return out
	}
	return judge(out, place, server, thread, answer)
}

// judge reads a publish receipt (RFC-011 §5).
func judge(out PublishOutcome, place, server string, thread *string, answer json.RawMessage) PublishOutcome {
	var rc struct {
		Delivered *bool  `json:"delivered"`
		MessageID string `json:"messageId"`
		Reason    string `json:"reason"`
	}
	// threadId's presence matters: null (the root) is not absent.
	var fields map[string]json.RawMessage
	if json.Unmarshal(answer, &rc) != nil || json.Unmarshal(answer, &fields) != nil || rc.Delivered == nil {
		out.Status, out.Text = Unconfirmed, textUnconfirmed(place, textNoReceipt(server))
		return out
	}
	if !*rc.Delivered {
		if rc.MessageID != "" {
			out.Status, out.Text = Unconfirmed, textUnconfirmed(place, textNotDeliveredButPosted(server, rc.MessageID))
			return out
		}
		out.Text = textNotSent(place, textReportedNotDelivered(server, rc.Reason))
		return out
	}
	out.MessageID = rc.MessageID
	if thread != nil {
		asked := threadName(thread)
		raw, present := fields["threadId"]
		var echo *string
		if !present || json.Unmarshal(raw, &echo) != nil {
			out.Status, out.Text = Unconfirmed, textUnconfirmed(place, textEchoMismatch(server, "did not say where it posted", asked))
			return out
		}
		if echo != nil && *echo == "" {
			// Not a place (RFC-011 §4 closes the domain: an id, or null).
			out.Status, out.Text = Unconfirmed, textUnconfirmed(place, textEchoMismatch(server, "answered an empty threadId", asked))
			return out
		}
		if echo == nil {
			echo = new(string) // null: the root
		}
		if *echo != *thread {
			landed := "reported posting in thread " + content.Clean(*echo)
			if *echo == "" {
				landed = "reported posting at the channel root"
			}
			out.Status, out.Text = Unconfirmed, textUnconfirmed(place, textEchoMismatch(server, landed, asked))
			return out
		}
	}
	out.Status = Delivered
	return out
}

func threadName(thread *string) string {
	if *thread == "" {
		return "the channel root"
	}
	return "thread " + content.Clean(*thread)
}

func labelOr(d protocol.ChannelDescriptor) string {
	if d.Label != "" {
		return d.Label
	}
	return d.ID
}

// AfterToolCall is told of every successful call of a server's tool: a
// send tool's post into a closed channel opens it (opened-by-reply), in
// the background. The channel is the result's channelId, or the
// arguments'. The lane gives the notice of the open, or of its failure.
func (r *Registry) AfterToolCall(server, tool string, args json.RawMessage, res protocol.CallToolResult, who Caller) {
	srv := r.server(server)
	if srv == nil || !slices.Contains(srv.cfg.SendTools, tool) || r.isClosing() {
		return
	}
	channel := replyChannel(args, res)
	if channel == "" {
		return
	}
	desc, registered := r.registration(Key{server, channel})
	if !registered {
		return
	}
	who2 := caller{agent: who.Agent, tool: cmp.Or(who.Tool, tool), label: desc.Label}
	r.step(func(m *machine) {
		if m.closing {
			return
		}
		m.ensureOpen(Key{server, channel}, SourceOpenedByReply, who2, func(openOutcome) {})
	})
}

// openIfClosed makes sure k's channel is open for a delivery or reply,
// opening it if it is closed, and waits for that or for ctx: the open
// goes on without a caller that stops waiting, and its lane still tells
// the agent how it went.
func (r *Registry) openIfClosed(ctx context.Context, k Key, source string, who caller) openOutcome {
	o, err := ask(ctx, r, func(m *machine, reply func(openOutcome)) { m.ensureOpen(k, source, who, reply) })
	if err != nil {
		return openOutcome{err: err, reason: r.describe(k.Server, err)}
	}
	return o
}

// registration returns k's registered descriptor; ok is false when k is
// not registered.
func (r *Registry) registration(k Key) (protocol.ChannelDescriptor, bool) {
	r.viewMu.RLock()
	defer r.viewMu.RUnlock()
	if v := r.views[k]; v != nil && v.registered {
		return v.desc, true
	}
	return protocol.ChannelDescriptor{}, false
}

// replyChannel finds the channel a send tool posted into.
func replyChannel(args json.RawMessage, res protocol.CallToolResult) string {
	var v struct {
		ChannelID string `json:"channelId"`
	}
	if json.Unmarshal(res.StructuredContent, &v) == nil && v.ChannelID != "" {
		return v.ChannelID
	}
	if json.Unmarshal([]byte(res.Text()), &v) == nil && v.ChannelID != "" {
		return v.ChannelID
	}
	if json.Unmarshal(args, &v) == nil {
		return v.ChannelID
	}
	return ""
}
