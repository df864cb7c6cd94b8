package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
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
	if !closesAll(reader, n) {
		closing = ""
	}
	if n.Cause == channels.SourceSubscriptionPolicy {
		return fmt.Sprintf("[channels] Selected for opening by subscription policy: %s. This is an admission decision; channel_list shows current transport state.%s", list(n.Channels), closing)
	}
	why := "your own message into the closed channel engaged it"
	if by != "" {
		why = by + "'s message into the closed channel engaged it"
	}
	reach := fmt.Sprintf("Ongoing traffic from %s will reach you.", these)
	if reader.Forked {
		reach = fmt.Sprintf("Ongoing traffic from %s goes to its own conversation (conversations: per-channel), not to you.", these)
	}
	return fmt.Sprintf("[channels] Now open: %s — %s. %s%s", list(n.Channels), why, reach, closing)
}

// textMoreChannels ends a notice's list of channels past MaxListed.
func textMoreChannels(n int) string {
	return "and " + thousands(n) + " more (channel_list shows every channel)"
}

// textReplyFailed is the reply-open-failed notice for reader.
func textReplyFailed(n channels.Notice, by string, reader Reader) string {
	ch := channelOf(n)
	whose := "Your reply"
	if by != "" {
		whose = by + "'s reply"
	}
	tool := content.Clean(n.Tool)
	if tool == "" {
		tool = "a send tool"
	}
	s := fmt.Sprintf("[channels] Not open: %s. %s through %s went out, but opening the channel failed: %s.",
		list(n.Channels), whose, tool, strings.TrimSuffix(n.Reason, "."))
	withdraw := ""
	if reader.CanClose(n.Server, ch) {
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

// The texts of the turn loop: a contract, pinned verbatim by tests
// (docs/agents.md lists them).

// q quotes an id as the channel tools take it: a JSON string, exact,
// with the host's framing characters and anything invisible or
// line-breaking written as JSON escapes ("\u005b", "\u202e"), which
// decode to the same id.
func q(s string) string {
	b, _ := json.Marshal(s)
	return quoteFraming.Replace(content.JSONText(b))
}

var quoteFraming = strings.NewReplacer("[", `\u005b`, "]", `\u005d`, "·", `\u00b7`)

// textInvitation goes with an addressed message from a channel the
// reader hasn't opened: what it can do, naming only the tools it may
// call. A reply there opens the channel in this host (speech opens a
// closed channel first), so it says so. here: the turn's prose goes to
// that channel (it is the turn's locus); else a reply takes
// channel_publish.
func textInvitation(author, where, server, channel, messageID string, here bool, r Reader) string {
	var opts []string
	switch {
	case here:
		opts = append(opts, fmt.Sprintf("Reply there: what you say this turn is posted to %s, and posting it opens the channel, so its traffic reaches you from then on.", where))
	case r.allowed(channels.ToolPublish):
		opts = append(opts, fmt.Sprintf("Reply there: call channel_publish with channelId %s and serverId %s (what you say this turn goes to another channel); posting opens the channel, so its traffic reaches you from then on.", q(channel), q(server)))
	}
	if r.CanOpen() {
		opts = append(opts, fmt.Sprintf("Join without replying: call channel_open with channelId %s and serverId %s.", q(channel), q(server)))
	}
	if r.allowed(channels.ToolDecline) {
		opts = append(opts, fmt.Sprintf("Stay out: call channel_decline with channelId %s, serverId %s and messageId %s.", q(channel), q(server), q(messageID)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[Channel invitation] %s addressed you in %s, a channel you haven't joined. Only messages that address you reach you from it; the rest of its traffic is invisible to you. Your options:", author, where)
	for i, o := range opts {
		fmt.Fprintf(&b, "\n%d. %s", i+1, o)
	}
	b.WriteString("\nDoing nothing is also fine.")
	return b.String()
}

// textSpeechOutcome tells the agent where its prose went.
func textSpeechOutcome(out channels.PublishOutcome) string {
	where := ref(channels.ChannelRef{ID: out.Channel, Label: out.Label})
	switch out.Status {
	case channels.Delivered:
		switch {
		case out.Thread == nil:
			return "[delivered] Your reply was posted to " + where + "."
		case *out.Thread == "":
			return "[delivered] Your reply was posted to " + where + ", at the channel root."
		}
		return "[delivered] Your reply was posted to " + where + ", in thread " + content.Clean(*out.Thread) + "."
	case channels.Unconfirmed:
		return "[unconfirmed] Your reply: " + out.Text
	}
	return "[not delivered] Your reply: " + out.Text
}

// textWithheld: prose beside a call that posted.
func textWithheld(tool string) string {
	return fmt.Sprintf("[not posted] Your plain text beside your %s call was not posted: that call's post stands for it, so nothing was sent twice.", tool)
}

// textNoLocus: prose in a turn no channel message woke.
func textNoLocus(canPublish bool) string {
	s := "[not delivered] Your reply went nowhere: this turn wasn't woken by a channel message, so your plain text has no channel to go to. It is kept in this conversation only."
	if canPublish {
		s += " channel_publish posts to a channel you name."
	}
	return s
}

// textMaxRounds ends a turn that kept calling tools.
func textMaxRounds(n int) string {
	return fmt.Sprintf("[host] This turn reached its limit of %d tool rounds, so it ended here: the results above are in, and nothing more runs until a new message wakes you.", n)
}

// textModelFailed ends a turn whose model call failed for good (retry.go),
// in the agent's terms: whether it was tried again, and what of the answer
// went out. Never the provider's words, an address or a variable's name:
// those are the operator's, in the log. where and posted are the locus
// and what was streamed there, when the call failed after that.
func textModelFailed(err error, where, posted string) string {
	var cf *callFailed
	errors.As(err, &cf)
	switch {
	case cf != nil && cf.stop == stopStreamed && posted != "":
		return fmt.Sprintf("[host] This turn ended early: the model call failed after the start of your answer had been posted to %s: %q. It was not tried again, so that nothing is posted twice, and the rest of your answer was not sent. The next message that wakes you starts a new turn.", where, posted)
	case cf != nil && cf.attempts > 1:
		return fmt.Sprintf("[host] This turn ended early: the model call failed and was retried %s; the message was not answered. What you said before it stands; nothing after it was sent. The next message that wakes you starts a new turn.", times(cf.attempts-1))
	case cf != nil && cf.stop == stopNotRetryable:
		return "[host] This turn ended early: the model call failed, and trying it again would not help; the message was not answered. What you said before it stands; nothing after it was sent. The next message that wakes you starts a new turn."
	}
	return "[host] This turn ended early: the model call failed; the message was not answered. What you said before it stands; nothing after it was sent. The next message that wakes you starts a new turn."
}

// times says n times in words: once, twice, 3 times.
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// textToolNotAllowed refuses a tool the agent may not use.
func textToolNotAllowed(name string) string {
	return fmt.Sprintf("%s is not a tool this agent may use, so it was not called, and nothing was done. Use only the tools you were given.", content.Clean(name))
}

// The budget's texts (budget.go).

// textCut says a message was cut.
func textCut(whole, shown, images int) string {
	s := fmt.Sprintf("[host] This is cut: it is %s, more than this agent is shown of one message, and the first %s are shown above.", size(whole), size(shown))
	switch {
	case images == 1:
		s += " 1 image past that is left out."
	case images > 1:
		s += fmt.Sprintf(" %s images past that are left out.", thousands(images))
	}
	return s
}

// textLeftOut says messages were left out of a turn: parts say how many
// from where (textLeftOutPart).
func textLeftOut(total int, parts []string) string {
	if total == 1 {
		return fmt.Sprintf("[host] 1 earlier message was left out of this turn, to keep it within what this agent is shown at once: %s. The newest are shown below; those left out are not shown later.", strings.Join(parts, ", "))
	}
	return fmt.Sprintf("[host] %s earlier messages were left out of this turn, to keep it within what this agent is shown at once: %s. The newest are shown below; those left out are not shown later.",
		thousands(total), strings.Join(parts, ", "))
}

// textLeftOutPart is how many were left out of one channel (where), or of
// one server's push events.
func textLeftOutPart(n int, where string, events bool) string {
	if events {
		return fmt.Sprintf("%s events from %s", thousands(n), where)
	}
	return fmt.Sprintf("%s from %s", thousands(n), where)
}

// textHistoryLeftOut says a request leaves out the conversation's
// earlier messages.
func textHistoryLeftOut(n int) string {
	if n == 1 {
		return "[host] The earlier message of this conversation is left out of this request, to fit the model's context window."
	}
	return fmt.Sprintf("[host] The %s earlier messages of this conversation are left out of this request, to fit the model's context window.", thousands(n))
}

// textImageTooLarge stands for an image past MaxImageBytes.
func textImageTooLarge(mime string, n int) string {
	return fmt.Sprintf("[image %s, %s: not shown, as it is larger than the %s this agent is shown of one image]", mime, size(n), size(MaxImageBytes))
}

// textResultLeftOut stands for a tool result left out of one request.
const textResultLeftOut = "[host] This tool result is left out of this request, to fit the model's context window; it was given in full when the call returned."

// textNoticesLeftOut stands for the notices left out past MaxNotices.
func textNoticesLeftOut(n int) string {
	return fmt.Sprintf("[host] %s earlier notices about channels were left out, as more came than this agent is given at once; channel_list shows every channel as it is now.", thousands(n))
}

// The conversation texts (privacy.go, bots.go): pinned verbatim by tests,
// listed in docs/texts.md.

// textPrivateReply: a private message on a shared channel whose server
// offers a private way to answer, which the turn's reply takes.
func textPrivateReply(author, where, to string) string {
	return fmt.Sprintf("[private] %s wrote to you privately in %s, which others there can read. What you say this turn goes privately to %s, not to %s.", author, where, to, where)
}

// textPrivateWay: a private message on a shared channel whose server
// offers a private way to answer, in a turn whose reply goes elsewhere
// (it answers another message).
func textPrivateWay(author, where, to, server, channel string) string {
	return fmt.Sprintf("[private] %s wrote to you privately in %s, which others there can read. To answer privately, call channel_publish with channelId %s and serverId %s, which posts to %s; a reply posted in %s can be read by everyone in it.", author, where, q(channel), q(server), to, where)
}

// textPublicReply: a private message on a shared channel that can't be
// answered privately: its server offers no way, or the turn is a
// conversation fork's, which answers in its own channel only. here: the
// turn's reply goes to that channel.
func textPublicReply(author, where string, here bool) string {
	if here {
		return fmt.Sprintf("[private] %s wrote to you privately in %s, but this host has no private way to answer it: what you say this turn is posted in %s, where everyone in it can read it. Say there only what may be public.", author, where, where)
	}
	return fmt.Sprintf("[private] %s wrote to you privately in %s, but this host has no private way to answer it: a reply posted there can be read by everyone in it.", author, where)
}

// textBotBound: bots' messages woke the agent bound turns in a row in a
// channel; from now on they don't there until a person writes.
func textBotBound(where string, bound int) string {
	return fmt.Sprintf("[host] Messages from bots in %s have woken you %d times in a row, the most this host allows: from now on they don't wake you there until a person writes there. You still read what bots write there when something else wakes you.", where, bound)
}
