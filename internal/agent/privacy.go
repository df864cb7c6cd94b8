package agent

import (
	"encoding/json"
	"slices"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/heading"
	"github.com/mcpl-go/mcpl/store"
)

// Privacy: what the agent reads of a message sent privately, and where
// its reply goes (docs/conversations.md).
//
//   - The header says "direct message" when the closure-expanded tags
//     hold chat:dm, and "private" when they hold chat:private without it
//     (SPEC §16.3: chat:dm implies chat:private).
//   - A private message whose own channel is private is answered there:
//     a direct message (its channel is the DM), or a channel whose
//     descriptor says it is private (channels.ListedChannel.Private).
//   - A private message on a shared channel is answered privately where
//     its server offers a way: the message's privateReply (metadata.
//     privateReply on channels/incoming, origin.privateReply on a push)
//     names a channel of the same server, registered (a DM), and
//     optionally a thread in it, or only a thread of the message's own
//     channel when that channel places posts exactly (RFC-011 "exact").
//     The turn's reply goes there, and the agent is told so.
//   - Otherwise the agent is told, beside the message and so before it
//     speaks, that what it says there can be read by everyone in the
//     channel. The reply is not held back: the agent decides what to say.

// place is where a reply goes: a channel, and the thread in it ("" the
// root), as RFC-011 lets a post name it on a channel that places posts
// exactly.
type place struct {
	forkKey
	thread string
}

// privacyMark is the header's mark for a message sent privately.
func privacyMark(tags []string) string {
	switch {
	case slices.Contains(tags, content.TagDM):
		return heading.DirectMark
	case slices.Contains(tags, content.TagPrivate):
		return heading.PrivateMark
	}
	return ""
}

// privacy judges a private message: whether its own channel keeps a reply
// private, else where its server offers to answer it privately, else the
// warning the agent reads before it speaks.
func (r *runner) privacy(it *item, m store.Message, ch channels.ListedChannel, msg message, where string) {
	if !slices.Contains(m.Tags, content.TagPrivate) {
		return
	}
	if slices.Contains(m.Tags, content.TagDM) || ch.Private {
		return
	}
	author := msg.author
	if p, ok := r.privateReply(m, ch, msg.replyHint); ok {
		it.privately = &p
		to := channelRef(r.channelOf(p.server, p.channel), p.channel) + threadWords(p.thread)
		fork := r.fork
		it.warn = func(locus *forkKey) string {
			switch {
			case locus != nil && *locus == p.forkKey:
				return textPrivateReply(author, where, to)
			case !fork:
				// The turn answers another message: the private way is
				// there for a reply of its own.
				return textPrivateWay(author, where, to, p.server, p.channel)
			}
			return textPublicReply(author, where, locus != nil && it.locus != nil && *locus == *it.locus)
		}
		return
	}
	it.warn = func(locus *forkKey) string {
		return textPublicReply(author, where, locus != nil && it.locus != nil && *locus == *it.locus)
	}
}

// channelOf is a channel as the host has it now (its label, for the
// texts).
func (r *runner) channelOf(server, id string) channels.ListedChannel {
	ch, _ := r.rt.opts.Env.Channel(server, id)
	return ch
}

// threadWords names a reply's thread: " in thread T", "" for the root.
func threadWords(thread string) string {
	if thread == "" {
		return ""
	}
	return " in thread " + content.Clean(thread)
}

// privateReply reads where the message's server offers to answer it
// privately; ok is false when it offers nowhere this host can post to.
func (r *runner) privateReply(m store.Message, ch channels.ListedChannel, hint json.RawMessage) (place, bool) {
	var h struct {
		ChannelID *string `json:"channelId"`
		ThreadID  *string `json:"threadId"`
	}
	if len(hint) == 0 || json.Unmarshal(hint, &h) != nil {
		return place{}, false
	}
	good := func(s *string) bool {
		return s != nil && *s != "" && len(*s) <= channels.MaxIDBytes && content.Printable(*s)
	}
	switch {
	case good(h.ChannelID):
		to, known := r.rt.opts.Env.Channel(m.Server, *h.ChannelID)
		if !known || !to.Registered {
			return place{}, false
		}
		p := place{forkKey: forkKey{m.Server, *h.ChannelID}}
		if good(h.ThreadID) {
			if to.PublishTarget != "exact" {
				return place{}, false // a thread it can't be sure to land in
			}
			p.thread = *h.ThreadID
		}
		return p, true
	case h.ChannelID == nil && good(h.ThreadID) && ch.PublishTarget == "exact":
		return place{forkKey: forkKey{m.Server, m.Channel}, thread: *h.ThreadID}, true
	}
	return place{}, false
}
