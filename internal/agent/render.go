package agent

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/heading"
	"github.com/mcpl-go/mcpl/internal/model"
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
	locus     *forkKey // the channel a reply goes to; nil for a push event
	addressed bool
	// seq is its place in the inbox; from is where it came from, for the
	// line that counts what a turn left out; tokens is what it costs.
	seq    int64
	from   origin
	tokens int
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
// itself: a message that addresses the agent, or a push event.
func (it item) waking() bool { return it.addressed || it.locus == nil }

// shown is what the agent is shown of the item, in a turn whose prose
// goes to locus.
func (it item) shown(locus *forkKey) []model.Block {
	if it.invite == nil {
		return it.blocks
	}
	here := locus != nil && it.locus != nil && *locus == *it.locus
	out := append([]model.Block{it.blocks[0], {Type: model.Text, Text: it.invite(here)}}, it.blocks[1:]...)
	return out
}

// body is what the agent layer reads of a message as its server sent it.
type body struct {
	Author  json.RawMessage `json:"author"`
	Content json.RawMessage `json:"content"`
	Payload struct {
		Content json.RawMessage `json:"content"`
	} `json:"payload"`
}

// renderMessage renders a channel message, judged by v, for r: its
// header (where, who, the thread, whether it addresses r, its id, when it
// came), the invitation of an addressed message from a channel that isn't
// open, and its content as the content layer shows it, cut to what one
// message may show.
func (r *runner) renderMessage(m store.Message, v verdict, open bool) item {
	var it item
	var b body
	json.Unmarshal(m.Body, &b)
	author := authorName(b.Author)
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
	if isAddressed {
		head += heading.AddressedMark + "message "
	} else {
		head += " · message "
	}
	head += content.Clean(m.MessageID) + stamp(m) + "]"
	blocks := []model.Block{{Type: model.Text, Text: head}}
	if isAddressed && !open {
		rd := r.reader()
		it.invite = func(here bool) string {
			return textInvitation(author, where, m.Server, m.Channel, m.MessageID, here, rd)
		}
	}
	raw, _ := content.Blocks(b.Content)
	parts := cut(Parts(r.rt.opts.Env.View(m.Server, content.ProvenanceChannelMessage, raw)), r.messageBound())
	it.blocks = append(blocks, parts...)
	it.wake = Wake{Kind: "channel", Server: m.Server, Channel: m.Channel, MessageID: m.MessageID}
	it.locus = &forkKey{m.Server, m.Channel}
	it.addressed = isAddressed
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
