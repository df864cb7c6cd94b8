package agent

import (
	"fmt"
	"strings"

	"github.com/mcpl-go/mcpl/internal/channels"
)

// The notices agents read about channels the host opened, or failed to,
// on their behalf: a contract, pinned verbatim by tests. The auto-open
// notice is the anchor host's (reference/anchor-host.md §3.8); the
// reply-open-failed notice follows seeds/000, its stays-selected sentence
// verbatim.

const stick = "your choice sticks; neither policy nor a later send will silently reopen it."

// textOpened is the auto-open notice for reader; by names the agent whose
// message it was when the reader is told in its place ("" when the
// reader's own).
func textOpened(n channels.Notice, by string, reader Reader) string {
	plural := len(n.Channels) > 1
	it, these := "it", "this channel"
	if plural {
		it, these = "one of them", "these channels"
	}
	closing := fmt.Sprintf(" If you don't want %s, use channel_close — %s", it, stick)
	if !closesAll(reader, n.Channels) {
		closing = ""
	}
	if n.Cause == channels.SourceSubscriptionPolicy {
		return fmt.Sprintf("[channels] Selected for opening by subscription policy: %s. This is an admission decision; channel_list shows current transport state.%s", list(n.Channels), closing)
	}
	why := "your own message into the closed channel engaged it"
	if by != "" {
		why = by + "'s message into the closed channel engaged it"
	}
	return fmt.Sprintf("[channels] Now open: %s — %s. Ongoing traffic from %s will reach you.%s", list(n.Channels), why, these, closing)
}

// textReplyFailed is the reply-open-failed notice for reader.
func textReplyFailed(n channels.Notice, by string, reader Reader) string {
	ch := channelOf(n)
	whose := "Your reply"
	if by != "" {
		whose = by + "'s reply"
	}
	tool := n.Tool
	if tool == "" {
		tool = "a send tool"
	}
	s := fmt.Sprintf("[channels] Not open: %s. %s through %s went out, but opening the channel failed: %s.",
		list(n.Channels), whose, tool, strings.TrimSuffix(n.Reason, "."))
	withdraw := ""
	if reader.CanClose(ch) {
		withdraw = ", and channel_close withdraws that"
	}
	switch n.SelectedForOpening {
	case channels.SelectedUnrecorded:
		s += " It stays selected for opening, as the host couldn't record undoing that: a later delivery or reconnect tries again" + withdraw + "."
	case channels.SelectedServerBootstrap:
		s += " It is selected for opening again, as its server announces it open: this host tries again itself" + withdraw + "."
	case channels.SelectedSubscriptionPolicy:
		s += " It is selected for opening again, as the subscription policy admits it: this host tries again itself" + withdraw + "."
	default:
		if reader.CanOpen() {
			s += " channel_open tries again."
		}
	}
	return s
}
