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
// {delivered: true, messageId} or {delivered: false, reason}.
type ChannelsPublishResult struct {
	Delivered bool   `json:"delivered"`
	MessageID string `json:"messageId,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Channel directions (SPEC §14.2).
const (
	DirectionOutbound      = "outbound"
	DirectionInbound       = "inbound"
	DirectionBidirectional = "bidirectional"
)
