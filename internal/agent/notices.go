// Package agent runs agents: the turn loop, speech and replies, the
// notices agents read, forks. This file renders the channel layer's typed
// notices into the texts agents read and decides who reads each, by the
// rules of seeds/000: the reader is the agent whose delivery or reply it
// was; the primary is told by name in its place when that agent has ended
// and the channel is selected for opening, and beside it when that agent
// can't close the channel and the primary can; a channel never opens
// without someone who can close it being told. channel_open and
// channel_close are named only to a reader that can call them for that
// channel.
package agent

import (
	"strings"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
)

// Reader is an agent as the notice rules see it.
type Reader struct {
	Name string
	// Home and HomeServer are a fork's home channel and its server; ""
	// for an agent of its own.
	Home, HomeServer string
	// Forked: channel traffic goes to forks, not to this agent (the
	// agents of conversations: per-channel).
	Forked bool
	// Ended: the agent is gone (a fork that was disposed of).
	Ended bool
	// Allowed reports whether the agent may call a tool (allowedTools);
	// nil allows every tool.
	Allowed func(tool string) bool
}

func (r Reader) allowed(tool string) bool { return r.Allowed == nil || r.Allowed(tool) }

// CanOpen reports whether the reader can call channel_open: a fork
// can't, whatever its tools.
func (r Reader) CanOpen() bool { return r.Home == "" && r.allowed(channels.ToolOpen) }

// CanClose reports whether the reader can call channel_close for server's
// channel: a fork only for its home.
func (r Reader) CanClose(server, channel string) bool {
	return r.allowed(channels.ToolClose) && (r.Home == "" || (r.Home == channel && (r.HomeServer == "" || r.HomeServer == server)))
}

// Delivery is a notice for one agent to read.
type Delivery struct {
	To   string
	Text string
}

// Route renders n for the agents that should read it. readers are the
// registered agents by name; primary names the primary ("" for none).
func Route(n channels.Notice, readers map[string]Reader, primary string) []Delivery {
	p, hasPrimary := readers[primary]
	hasPrimary = hasPrimary && primary != "" && !p.Ended
	reader, ok := readers[n.Agent]
	if n.Agent == "" || !ok {
		reader, ok = p, hasPrimary
	}
	switch n.Kind {
	case channels.NoticeOpened:
		return routeOpened(n, reader, ok, p, hasPrimary)
	case channels.NoticeReplyOpenFailed:
		return routeReplyFailed(n, reader, ok, p, hasPrimary)
	}
	return nil
}

// routeOpened: channels opened without the agent's channel_open. Its
// reader is told, in its own words; where it has ended or can't close
// one of them, the primary is told by name, if it can.
func routeOpened(n channels.Notice, reader Reader, ok bool, p Reader, hasPrimary bool) []Delivery {
	var out []Delivery
	readerTold := ok && !reader.Ended
	if readerTold {
		out = append(out, Delivery{To: reader.Name, Text: textOpened(n, "", reader)})
	}
	if !hasPrimary || (readerTold && reader.Name == p.Name) {
		return out
	}
	if !readerTold || (!closesAll(reader, n) && closesAll(p, n)) {
		out = append(out, Delivery{To: p.Name, Text: textOpened(n, agentName(n, reader), p)})
	}
	return out
}

// routeReplyFailed: a reply's open failed where it would have opened the
// channel. Its reader is told; when it has ended and the channel is
// selected for opening, the primary is told by name in its place; when it
// can't close a channel selected for opening and the primary can, the
// primary is told too. Where the channel stays closed after an ended
// agent's reply, no one is.
func routeReplyFailed(n channels.Notice, reader Reader, ok bool, p Reader, hasPrimary bool) []Delivery {
	ch := channelOf(n)
	selected := n.SelectedForOpening != ""
	var out []Delivery
	readerTold := ok && !reader.Ended
	if readerTold {
		out = append(out, Delivery{To: reader.Name, Text: textReplyFailed(n, "", reader)})
	}
	if !selected || !hasPrimary || (readerTold && reader.Name == p.Name) {
		return out
	}
	switch {
	case !readerTold:
		out = append(out, Delivery{To: p.Name, Text: textReplyFailed(n, agentName(n, reader), p)})
	case !reader.CanClose(n.Server, ch) && p.CanClose(n.Server, ch):
		out = append(out, Delivery{To: p.Name, Text: textReplyFailed(n, agentName(n, reader), p)})
	}
	return out
}

func agentName(n channels.Notice, r Reader) string {
	if n.Agent != "" {
		return n.Agent
	}
	return r.Name
}

func channelOf(n channels.Notice) string {
	if len(n.Channels) == 0 {
		return ""
	}
	return n.Channels[0].ID
}

func closesAll(r Reader, n channels.Notice) bool {
	for _, c := range n.Channels {
		if !r.CanClose(n.Server, c.ID) {
			return false
		}
	}
	return true
}

// MaxListed bounds the channels a notice names: past it, the notice says
// how many more there are (textMoreChannels), so a server registering
// thousands of channels at once can't make one notice of them all.
const MaxListed = 10

// list renders channels as "#label (id), #label (id)", at most MaxListed
// of them and then how many more.
func list(chs []channels.ChannelRef) string {
	shown := chs[:min(len(chs), MaxListed)]
	parts := make([]string, len(shown), len(shown)+1)
	for i, c := range shown {
		parts[i] = ref(c)
	}
	if more := len(chs) - len(shown); more > 0 {
		parts = append(parts, textMoreChannels(more))
	}
	return strings.Join(parts, ", ")
}

// ref names a channel as its server describes it, "<label> (<id>)" or its
// id alone, in the framing every line the host writes keeps
// (content.Label, content.Clean).
func ref(c channels.ChannelRef) string {
	label := content.Label(c.Label)
	if label == "" || c.Label == c.ID {
		return content.Clean(c.ID)
	}
	return label + " (" + content.Clean(c.ID) + ")"
}
