package channels

import (
	"fmt"
	"strings"

	"github.com/mcpl-go/mcpl/internal/content"
)

// The texts an agent reads from the channel tools and from a failed open.
// They are a contract, pinned verbatim by tests: the anchor host's texts
// (reference/anchor-host.md §3.7, seeds/000) where those exist, and where a
// failure is this host's own (a record it couldn't write), what happened,
// whether anything took effect, and what works from there.

func textChannelNotFound(id string) string { return "Channel not found: " + id }

func textChannelNotFoundOn(id, server string) string {
	return fmt.Sprintf("Channel not found: %s on server %s", id, server)
}

func textAmbiguous(id string) string {
	return fmt.Sprintf("Channel id is ambiguous across MCPL servers: %s. Include serverId.", id)
}

func textServerNotFound(server string) string { return "Server not found: " + server }

func textNoLifecycle(server string) string {
	return fmt.Sprintf(`channels.lifecycle not in "%s"'s effective grant (§14.1)`, server)
}

// textOpenNoLifecycle and textCloseNoLifecycle: the agent's decision is
// recorded, but the server opens and closes its channels itself.
func textOpenNoLifecycle(server string) string {
	return "Failed to open channel: " + textNoLifecycle(server) + ": the server opens and closes its channels itself, so no open was sent; your decision to open it is recorded."
}

func textCloseNoLifecycle(server string) string {
	return textNoLifecycle(server) + ": the server opens and closes its channels itself, so no close was sent; your decision to close it is recorded."
}

const (
	textNeedChannelID = "channelId must name a registered channel. Nothing was done."
	textBadServerID   = "serverId must be a server's id. Nothing was done."
)

// textAckNotPosted: an acknowledgment that failed, or was refused with no
// reason.
const textAckNotPosted = "The channel integration could not post the acknowledgment."

func textNoAcknowledge(server string) string {
	return fmt.Sprintf(`channels.acknowledge not in "%s"'s effective grant (§14.1)`, server)
}

func textNoPublish(server string) string {
	return fmt.Sprintf(`channels.publish not in "%s"'s effective grant (§14.1)`, server)
}

func textNoLongerRegistered(id string) string { return "Channel is no longer registered: " + id }

func textNotConverged(id string, n int) string {
	return fmt.Sprintf("Channel %s did not converge after %d lifecycle attempts; its target or desired state kept changing", id, n)
}

func textSubstituted(server, id string) string {
	return fmt.Sprintf(`Server "%s" answered channels/open for %s with a different channel; %s is not marked open, and nothing in the answer is used`, server, id, id)
}

const (
	textOpenSuperseded  = "Channel open was superseded by a newer lifecycle decision"
	textCloseSuperseded = "Channel close was superseded by a newer lifecycle decision"
)

// textOpenFailed is channel_open's failure: its decision outlives the
// failed round-trip. The reason's final period goes, as the sentence goes
// on.
func textOpenFailed(reason string) string {
	return "Failed to open channel: " + trimPeriod(reason) + " (it stays selected for opening: a later delivery or reconnect tries again, and channel_close withdraws that)"
}

func textCloseFailed(reason string) string { return "Failed to close channel: " + reason }

// textOpenUnrecorded and textCloseUnrecorded: the agent's decision could
// not be made durable, so nothing changed and nothing was sent.
func textOpenUnrecorded(id string) string {
	return fmt.Sprintf("Failed to open channel: this host couldn't record your decision to open %s, so nothing changed and no open was sent. Try again later.", id)
}

func textCloseUnrecorded(id string) string {
	return fmt.Sprintf("Failed to close channel: this host couldn't record your decision to close %s, so nothing changed and no close was sent. Try again later.", id)
}

// textDeclineUnknown: the host stopped, or the caller stopped waiting,
// before it could say whether the decline's decision was recorded.
func textDeclineUnknown(id string) string {
	return fmt.Sprintf("Failed to decline channel: this host stopped before it could say whether your decision to stay out of %s was recorded. channel_list shows what is decided.", id)
}

// textOpenUnrecordedReason: an incidental open whose decision couldn't be
// recorded.
const textOpenUnrecordedReason = "this host couldn't record opening the channel, so nothing changed and no open was sent"

func textDeclineUnrecorded(id string) string {
	return fmt.Sprintf("Failed to decline channel: this host couldn't record your decision to stay out of %s, so nothing changed. Try again later.", id)
}

// textAlreadyUnrecorded: the channel is already in the state the agent
// asked for, but the record that the agent decided it couldn't be written.
func textAlreadyOpenUnrecorded(id string) string {
	return fmt.Sprintf("Channel %s is already open, but this host couldn't record that you chose to keep it open, so a housekeeping close may still close it. Try again later.", id)
}

func textAlreadyClosedUnrecorded(id string) string {
	return fmt.Sprintf("Channel %s is already closed, but this host couldn't record that you chose to keep it closed, so its server announcing it open may still open it. Try again later.", id)
}

func textUnknownMachineSource(source string) string {
	return fmt.Sprintf("Unknown machine close source '%s'. Machine closes must use one of: %s.", source, strings.Join(MachineCloseSources, ", "))
}

func textExplicitOpen(id, source string) string {
	return fmt.Sprintf("Channel %s was explicitly opened (source: agent-tool); a '%s' close does not override stated intent. Machine closes of explicit opens require an explicit idle lease (overrideExplicitOpen).", id, source)
}

func textAlreadyOpenDecline(id string) string {
	return fmt.Sprintf("Channel is already open: %s. Use channel_close to leave it.", id)
}

// Why a channel is selected for opening after a failed incidental open.
const (
	SelectedUnrecorded         = "unrecorded"
	SelectedServerBootstrap    = SourceServerBootstrap
	SelectedSubscriptionPolicy = SourceSubscriptionPolicy
)

// textSelected says why the channel is selected for opening after a failed
// incidental open, as the delivery's failure reads it.
func textSelected(why string) string {
	switch why {
	case SelectedUnrecorded:
		return "the channel stays selected for opening, as the host couldn't record undoing that: a later delivery or reconnect tries again"
	case SelectedServerBootstrap:
		return "the channel is selected for opening again, as its server announces it open"
	case SelectedSubscriptionPolicy:
		return "the channel is selected for opening again, as the subscription policy admits it"
	}
	return ""
}

const textOvertaken = "a newer decision about the channel was made while the open was out, and it stands"

// textDeliveryOpenFailed is the reason a delivery into a closed channel
// fails when its open does.
func textDeliveryOpenFailed(reason string, extra ...string) string {
	s := "channel is closed and open failed: " + trimPeriod(reason)
	for _, e := range extra {
		if e != "" {
			s += "; " + e
		}
	}
	return s
}

const textPreventedByLifecycle = "lifecycle work prevented delivery: lifecycle work queued for the channel left it closed, so this delivery didn't open it; call channel_open to open it, then send again"

// textClosing and textStoppedWaiting are a lifecycle request this host
// gave up on.
const (
	textClosing        = "this host is shutting down, so no open was sent"
	textStoppedWaiting = "this host stopped waiting for the server's answer, so whether the request took effect is unknown"
)

// Publish texts (RFC-011 §5; anchor-host.md §3.7, §4.4).
const (
	textPublishNoContent  = "Either content or text parameter is required"
	textPublishNoChannel  = "No channelId given, and you have no current speech route: name the channel to publish to. Nothing was sent."
	textPublishBadChannel = "channelId must name a channel (leave it out to publish to your speech route). Nothing was sent."
	textServerNeedsID     = "serverId needs the channelId it belongs to."
	textThreadNeedsID     = "threadId needs the channelId it belongs to."
)

func textNotSent(where, reason string) string {
	return fmt.Sprintf("Not sent to %s: %s. Nothing was posted.", where, trimPeriod(reason))
}

func textUnconfirmed(where, reason string) string {
	return fmt.Sprintf("Delivery to %s was not confirmed — it may or may not have been posted: %s. Check the channel before sending again.", where, trimPeriod(reason))
}

func textUndeclaredThread(label, id, place string) string {
	return fmt.Sprintf("%s (%s)'s connector doesn't declare where a post lands (MCPL RFC-011), so a post into %s could land anywhere; this host doesn't send it there", content.Label(label), content.Clean(id), place)
}

func textRootThread(label, id, thread string) string {
	return fmt.Sprintf("%s (%s) has no threads (its connector declares root), so a post into thread %s is refused", content.Label(label), content.Clean(id), content.Clean(thread))
}

func textReportedNotDelivered(server, reason string) string {
	if reason == "" {
		return fmt.Sprintf(`server "%s" reported delivered:false`, server)
	}
	return fmt.Sprintf(`server "%s" reported delivered:false: %s`, server, trimPeriod(content.Words(reason)))
}

func textNotDeliveredButPosted(server, messageID string) string {
	return fmt.Sprintf(`server "%s" reported delivered:false but named posted message %s (delivery uncertain)`, server, content.Clean(messageID))
}

func textNoReceipt(server string) string {
	return fmt.Sprintf(`server "%s" returned no valid delivery receipt (delivery uncertain)`, server)
}

func textEchoMismatch(server, landed, asked string) string {
	return fmt.Sprintf(`server "%s" reported delivery but %s, not %s (where it landed is unconfirmed)`, server, landed, asked)
}

// where names a channel for a publish text: "<id> (<label>)", and the
// thread when one was asked for, in the host's framing (content.Clean,
// content.Label).
func where(id, label string, thread *string) string {
	s := content.Clean(id)
	if label != "" && label != id {
		s += " (" + content.Label(label) + ")"
	}
	if thread != nil {
		if *thread == "" {
			s += ", at the channel root"
		} else {
			s += ", thread " + content.Clean(*thread)
		}
	}
	return s
}

// trimPeriod drops one final period, so a sentence can be composed into
// another.
func trimPeriod(s string) string { return strings.TrimSuffix(s, ".") }
