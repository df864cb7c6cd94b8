package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/heading"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/treat"
	"github.com/mcpl-go/mcpl/store"
)

// An inbox message becomes part of the agent's user message: a header
// line (where it came from, who wrote it, its thread, its id and when it
// came), for an
// addressed message from a channel that isn't open the invitation, then
// its content as the content layer renders it. The message's own text is
// the last text block, so the scripted model's echo repeats it.

// item is one inbox message as an agent is shown it.
type item struct {
	blocks    []model.Block // its header, then its content
	wake      Wake
	locus     *forkKey // the channel a reply goes to; nil for an event without a channel
	addressed bool
	// thread is the message's thread ("" at the channel root): where an
	// exact channel's reply goes (RFC-011).
	thread string
	// bot: its author is a bot or an agent (chat:from-bot,
	// chat:from-agent); it wakes the agent only where its server's
	// channels.bots allows (bots.go).
	bot bool
	// self: the agent's own post, echoed back (chat:from-self): it never
	// wakes the agent.
	self bool
	// privately is where a private reply to a message sent privately
	// (chat:private) goes: nil when none is offered, or its own channel
	// is private (privacy.go).
	privately *place
	// warn is the line said before the content of a private message:
	// where the turn's reply goes (locus), and whether others read it.
	warn func(locus *forkKey) string
	// seq is its place in the inbox; from is where it came from, for the
	// line that counts what a turn left out; tokens is what it costs.
	seq    int64
	from   origin
	tokens int
	// treat is what the agent's rules say it does with the item (wake.go);
	// at is when the host took the message in.
	treat treat.Treatment
	at    time.Time
	// co is set for a coalesced event that may still change before a
	// request shows it (coalesced.go).
	co *coItem
	// invite is the invitation's words, for an addressed message from a
	// channel that isn't open: rendered once the turn's locus is known.
	invite func(here bool) string
}

// origin is where items came from: a channel (where names it), or a
// server's push events.
type origin struct {
	where  string
	events bool
}

// waking reports whether the item is one a turn would be woken by for
// itself: a message that addresses the agent, or an event without a
// channel.
func (it item) waking() bool { return it.addressed || it.locus == nil }

// shown is what the agent is shown of the item, in a turn whose prose
// goes to locus.
func (it item) shown(locus *forkKey) []model.Block {
	if it.invite == nil && it.warn == nil {
		return it.blocks
	}
	here := locus != nil && it.locus != nil && *locus == *it.locus
	out := []model.Block{it.blocks[0]}
	if it.invite != nil {
		out = append(out, model.Block{Type: model.Text, Text: it.invite(here)})
	}
	if it.warn != nil {
		out = append(out, model.Block{Type: model.Text, Text: it.warn(locus)})
	}
	return append(out, it.blocks[1:]...)
}

// body is what the agent layer reads of a message as its server sent it:
// a channels/incoming message, or a push/event's params.
type body struct {
	Author   json.RawMessage `json:"author"`
	Content  json.RawMessage `json:"content"`
	Metadata struct {
		PrivateReply json.RawMessage `json:"privateReply"`
	} `json:"metadata"`
	Payload struct {
		Content json.RawMessage `json:"content"`
	} `json:"payload"`
	Origin struct {
		Author       json.RawMessage `json:"author"`
		AuthorName   json.RawMessage `json:"authorName"`
		AuthorID     json.RawMessage `json:"authorId"`
		MessageID    *string         `json:"messageId"`
		PrivateReply json.RawMessage `json:"privateReply"`
	} `json:"origin"`
}

// message is what a channel message is, read from its body: a
// channels/incoming message, or a push that delivered a message into a
// channel (its origin named it, host/pushplace.go).
type message struct {
	author    string
	id        string // the platform's message id: what channel_decline and the seen acknowledgment name
	content   json.RawMessage
	prov      string
	replyHint json.RawMessage // metadata.privateReply, or origin.privateReply
}

func readMessage(m store.Message) message {
	var b body
	json.Unmarshal(m.Body, &b)
	if m.Kind != store.KindPushEvent {
		return message{author: authorName(b.Author), id: m.MessageID, content: b.Content, prov: content.ProvenanceChannelMessage, replyHint: b.Metadata.PrivateReply}
	}
	out := message{id: m.MessageID, content: b.Payload.Content, prov: content.ProvenancePushEvent, replyHint: b.Origin.PrivateReply}
	if o := b.Origin.MessageID; o != nil && *o != "" && len(*o) <= channels.MaxIDBytes && content.Printable(*o) {
		out.id = *o
	}
	out.author = "someone"
	for _, a := range []json.RawMessage{b.Origin.Author, b.Origin.AuthorName, b.Origin.AuthorID} {
		if len(a) > 0 {
			if name := authorName(a); name != "someone" {
				out.author = name
				break
			}
		}
	}
	return out
}

// renderMessage renders a channel message, judged by v, for r: its
// header (where, who, the thread, whether it addresses r, its id, when it
// came), the invitation of an addressed message from a channel that isn't
// open, and its content as the content layer shows it, cut to what one
// message may show.
func (r *runner) renderMessage(m store.Message, v verdict, open bool) item {
	var it item
	msg := readMessage(m)
	author := msg.author
	where := channelRef(v.ch, m.Channel)
	isAddressed := addressed(m.Tags)
	place := where + " on " + content.Clean(m.Server)
	if v.gone {
		place += " (no longer registered)"
	}
	head := "[" + place + heading.AuthorMark + author
	if m.ThreadID != "" {
		head += " · thread " + content.Clean(m.ThreadID)
	}
	head += privacyMark(m.Tags)
	if isAddressed {
		head += heading.AddressedMark + "message "
	} else {
		head += " · message "
	}
	head += content.Clean(msg.id) + stamp(m) + "]"
	blocks := []model.Block{{Type: model.Text, Text: head}}
	if isAddressed && !open {
		rd := r.reader()
		it.invite = func(here bool) string {
			return textInvitation(author, where, m.Server, m.Channel, msg.id, here, rd)
		}
	}
	raw, _ := content.Blocks(msg.content)
	parts := cut(Parts(r.rt.opts.Env.View(m.Server, msg.prov, raw)), r.messageBound())
	it.blocks = append(blocks, parts...)
	kind := "channel"
	if m.Kind == store.KindPushEvent {
		kind = "push"
	}
	it.wake = Wake{Kind: kind, Server: m.Server, Channel: m.Channel, MessageID: msg.id}
	it.locus = &forkKey{m.Server, m.Channel}
	it.thread = m.ThreadID
	it.bot, it.self = fromBot(m.Tags), slices.Contains(m.Tags, tagFromSelf)
	it.addressed = isAddressed
	r.privacy(&it, m, v.ch, msg, where)
	it.from = origin{where: where}
	it.tokens = blocksTokens(it.blocks)
	return it
}

// stamp is when the message came, as its header says it: " · at
// 2026-12-01T14:03:05Z" (UTC, to the second); "" when unknown.
func stamp(m store.Message) string {
	if m.At.IsZero() {
		return ""
	}
	return " · at " + m.At.UTC().Format(time.RFC3339)
}

func (r *runner) renderPush(m store.Message) item {
	var b body
	json.Unmarshal(m.Body, &b)
	head := "[event from " + content.Clean(m.Server) + " · " + content.Clean(m.FeatureSet) + " · event " + content.Clean(m.MessageID) + stamp(m) + "]"
	blocks := []model.Block{{Type: model.Text, Text: head}}
	raw, _ := content.Blocks(b.Payload.Content)
	blocks = append(blocks, cut(Parts(r.rt.opts.Env.View(m.Server, content.ProvenancePushEvent, raw)), r.messageBound())...)
	it := item{blocks: blocks, wake: Wake{Kind: "push", Server: m.Server, MessageID: m.MessageID}}
	it.from = origin{where: content.Clean(m.Server), events: true}
	it.tokens = blocksTokens(blocks)
	return it
}

// MaxImageBytes bounds one image an agent is shown, decoded: a larger one
// (past the providers' own limit a picture, Anthropic's 5 MB) is shown as
// a line saying so, so that it can't have every later request refused.
const MaxImageBytes = 5_000_000

// decodedSize is what base64 data decodes to, near enough.
func decodedSize(data string) int { return len(data) / 4 * 3 }

// Parts turns the content layer's view into model blocks: every lane an
// agent reads content through (messages, events, tool results,
// injections) passes here, and a server's text is framed so that none of
// its lines passes for one the host writes (content.Body).
func Parts(ps []content.Part) []model.Block {
	out := make([]model.Block, 0, len(ps))
	for _, p := range ps {
		switch p.Kind {
		case content.KindImage:
			if n := decodedSize(p.Data); n > MaxImageBytes {
				out = append(out, model.Block{Type: model.Text, Text: textImageTooLarge(content.Label(p.MimeType), n)})
				continue
			}
			out = append(out, model.Block{Type: model.Image, MimeType: p.MimeType, Data: p.Data})
		case content.KindAudio:
			out = append(out, model.Block{Type: model.Text, Text: "[audio " + content.Label(p.MimeType) + ": this agent's model takes no audio]"})
		case content.KindText:
			text := p.Text
			if !p.Host {
				text = content.Body(text)
			}
			out = append(out, model.Block{Type: model.Text, Text: text})
		}
	}
	return out
}

// authorName reads a message's author: its name, else its id, cleaned.
func authorName(raw json.RawMessage) string {
	var a struct {
		ID   any `json:"id"`
		Name any `json:"name"`
	}
	if json.Unmarshal(raw, &a) == nil {
		for _, v := range []any{a.Name, a.ID} {
			if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
				return content.Label(s)
			}
		}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) != "" {
		return content.Label(s)
	}
	return "someone"
}

// channelRef names a channel as "#label (id)", or its id alone.
func channelRef(ch channels.ListedChannel, id string) string {
	return ref(channels.ChannelRef{ID: id, Label: ch.Label})
}
