package protocol

import "encoding/json"

// Channel lifecycle and publish: the host → server methods of SPEC §14.3.

// ChannelsOpenParams is channels/open. Hosts name the channel either by id
// ({channelId}, as most real hosts do) or, as SPEC §14.3 shows, by type and
// address; a reader accepts both (reference/interop.md item 7).
type ChannelsOpenParams struct {
	ChannelID string          `json:"channelId,omitempty"`
	Type      string          `json:"type,omitempty"`
	Address   json.RawMessage `json:"address,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// ChannelsOpenResult answers channels/open with the channel now open.
// Some servers answer {opened: true} instead, or add a history array; a
// reader that needs those keeps the raw answer.
type ChannelsOpenResult struct {
	Channel ChannelDescriptor `json:"channel"`
}

// ChannelsCloseParams is channels/close.
type ChannelsCloseParams struct {
	ChannelID string `json:"channelId"`
}

// ChannelsCloseResult answers channels/close.
type ChannelsCloseResult struct {
	Closed bool `json:"closed"`
}

// ChannelsPublishParams is channels/publish: content the host asks the
// server to deliver to a channel (SPEC §14.3). Content blocks are kept raw.
type ChannelsPublishParams struct {
	ConversationID string            `json:"conversationId,omitempty"`
	ChannelID      string            `json:"channelId"`
	ThreadID       string            `json:"threadId,omitempty"`
	Stream         bool              `json:"stream,omitempty"`
	Content        []json.RawMessage `json:"content"`
	Metadata       json.RawMessage   `json:"metadata,omitempty"`
}

// ChannelsPublishResult answers channels/publish sent as a Request:
// {delivered: true, messageId} or {delivered: false, reason}. ThreadID,
// kept raw since null (the channel root) is not absent, says where the
// post landed when the request named a place (RFC-011 §5).
type ChannelsPublishResult struct {
	Delivered bool            `json:"delivered"`
	MessageID string          `json:"messageId,omitempty"`
	ThreadID  json.RawMessage `json:"threadId,omitempty"`
	Reason    string          `json:"reason,omitempty"`
}

// Channel directions (SPEC §14.2).
const (
	DirectionOutbound      = "outbound"
	DirectionInbound       = "inbound"
	DirectionBidirectional = "bidirectional"
)

// ChannelsTypingParams is channels/typing (host → server): the agent is
// typing in the channel (Op "start", repeated while it works) or stopped
// ("stop").
type ChannelsTypingParams struct {
	ChannelID string          `json:"channelId"`
	Op        string          `json:"op"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// Typing ops.
const (
	TypingStart = "start"
	TypingStop  = "stop"
)

// ChannelsAcknowledgeParams is channels/acknowledge (host → server): mark
// a message, with an intent and a value (an emoji).
type ChannelsAcknowledgeParams struct {
	ChannelID string `json:"channelId"`
	MessageID string `json:"messageId"`
	Intent    string `json:"intent"`
	Value     string `json:"value"`
}

// Acknowledgment intents: the agent saw a message in a channel it hasn't
// joined and stays out (channel_decline); the agent has the message (a
// turn picked it up).
const (
	AckSeenNotOpening = "seen-not-opening"
	AckSeen           = "seen"
)

// ChannelsAcknowledgeResult answers channels/acknowledge: whether the
// message was marked, how the platform shows the mark, and, when it was
// not, why.
type ChannelsAcknowledgeResult struct {
	Acknowledged   bool   `json:"acknowledged"`
	Representation string `json:"representation,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// ChannelsOutgoingChunkParams is channels/outgoing/chunk (host → server):
// a piece of the speech being generated for the channel; Index rises per
// inference across channels.
type ChannelsOutgoingChunkParams struct {
	InferenceID    string `json:"inferenceId"`
	ConversationID string `json:"conversationId"`
	ChannelID      string `json:"channelId"`
	Index          int    `json:"index"`
	Delta          string `json:"delta"`
	// ThreadID is the place the stream's final channels/publish asks for
	// (RFC-011 §6), raw: absent (nil) when it asks for none, null for the
	// channel root, else the thread's id as a JSON string.
	ThreadID json.RawMessage `json:"threadId,omitempty"`
}

// ChannelsOutgoingCompleteParams is channels/outgoing/complete (host →
// server): the stream's end, with the whole text.
type ChannelsOutgoingCompleteParams struct {
	InferenceID    string            `json:"inferenceId"`
	ConversationID string            `json:"conversationId"`
	ChannelID      string            `json:"channelId"`
	Content        []json.RawMessage `json:"content"`
	// ThreadID is as in ChannelsOutgoingChunkParams.
	ThreadID json.RawMessage `json:"threadId,omitempty"`
}
