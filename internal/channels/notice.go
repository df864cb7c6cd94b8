package channels

// Notices are what the agent layer tells agents about channels the host
// opened on their behalf, or failed to: typed values here; the agent layer
// renders them and routes them to the agent that should read them.

// NoticeKind says what a notice is about.
type NoticeKind string

// Notice kinds.
const (
	// NoticeOpened: channels were opened (or, for the subscription
	// policy, selected for opening) without the agent calling
	// channel_open. Cause says by what.
	NoticeOpened NoticeKind = "opened"
	// NoticeReplyOpenFailed: a send tool posted into a closed channel and
	// opening the channel failed.
	NoticeReplyOpenFailed NoticeKind = "reply-open-failed"
)

// ChannelRef names a channel in a notice.
type ChannelRef struct {
	ID    string
	Label string
}

// Notice is one thing to tell an agent about channels.
type Notice struct {
	Kind NoticeKind
	// Cause is the decision source: SourceSubscriptionPolicy,
	// SourceOpenedByDelivery or SourceOpenedByReply.
	Cause  string
	Server string
	// Agent is the agent whose delivery or reply it was; "" for the
	// policy, or when the caller named none (the primary agent).
	Agent    string
	Channels []ChannelRef
	// For NoticeReplyOpenFailed: the send tool, whether the failed open
	// was an opening (it would have opened a channel not selected open),
	// why the channel is selected for opening after it ("" when it is
	// not: SelectedUnrecorded, SelectedServerBootstrap,
	// SelectedSubscriptionPolicy), and the failure's words.
	Tool               string
	Opening            bool
	SelectedForOpening string
	Reason             string
}
