package protocol

import "encoding/json"

// MCPL methods (SPEC §4.1, Appendix A).
const (
	MethodFeatureSetsUpdate = "featureSets/update"
	MethodPushEvent         = "push/event"
	MethodChannelsRegister  = "channels/register"
	MethodChannelsChanged   = "channels/changed"
	MethodChannelsList      = "channels/list"
	MethodChannelsIncoming  = "channels/incoming"
	MethodChannelsOpen      = "channels/open"
	MethodChannelsClose     = "channels/close"
	MethodChannelsPublish   = "channels/publish"

	MethodChannelsAcknowledge      = "channels/acknowledge"
	MethodChannelsTyping           = "channels/typing"
	MethodChannelsOutgoingChunk    = "channels/outgoing/chunk"
	MethodChannelsOutgoingComplete = "channels/outgoing/complete"

	MethodInferenceRequest = "inference/request"
	MethodModelInfo        = "model/info"

	// Removed in 0.5.0; a host answers them with method-not-found saying
	// what replaced them.
	MethodFeatureSetsChanged = "featureSets/changed"
	MethodScopeElevate       = "scope/elevate"
)

// MCPL error codes (SPEC Appendix A, §14.6).
const (
	CodeFeatureSetNotEnabled = -32001
	CodeCapabilityDenied     = -32002
	CodeUnknownFeatureSet    = -32003
	CodeCheckpointNotFound   = -32005
	CodeChannelNotPermitted  = -32017
	CodeUnknownChannel       = -32023
	CodeChannelOpenFailed    = -32024
)

// MCPL versions this host speaks.
const (
	MCPLVersion04 = "0.4"
	MCPLVersion05 = "0.5"
)

// FeatureSetsUpdateParams is the host's policy message (SPEC §5.3). Every
// list is always sent, empty or not: absence would be read as a grant of
// nothing or as no constraint, and the host means neither by accident.
type FeatureSetsUpdateParams struct {
	EffectiveCapabilities []string `json:"effectiveCapabilities"`
	DeniedCapabilities    []string `json:"deniedCapabilities"`
	Enabled               []string `json:"enabled"`
	Disabled              []string `json:"disabled"`
}

// PolicyReceipt is a server's answer to featureSets/update (SPEC §6.7): a
// degradation receipt, or a refusal naming its fallback.
type PolicyReceipt struct {
	Accepted            bool                 `json:"accepted"`
	Mode                string               `json:"mode,omitempty"` // "degraded", or absent
	UnavailableFeatures []UnavailableFeature `json:"unavailableFeatures,omitempty"`
	Notes               []json.RawMessage    `json:"notes,omitempty"`
	// For a refusal.
	Fallback            string   `json:"fallback,omitempty"` // "mcp-only" | "close"
	MissingCapabilities []string `json:"missingCapabilities,omitempty"`
	Reason              string   `json:"reason,omitempty"`
}

// Refusal fallbacks.
const (
	FallbackMCPOnly = "mcp-only"
	FallbackClose   = "close"
)

// UnavailableFeature is one entry of a degraded receipt.
type UnavailableFeature struct {
	FeatureSet          string   `json:"featureSet"`
	MissingCapabilities []string `json:"missingCapabilities,omitempty"`
	Effect              string   `json:"effect"`
}

// PushEventParams is a push/event request (SPEC §9.2). Content blocks are
// kept raw.
type PushEventParams struct {
	FeatureSet string          `json:"featureSet"`
	EventID    string          `json:"eventId"`
	Timestamp  string          `json:"timestamp,omitempty"`
	Origin     json.RawMessage `json:"origin,omitempty"`
	Payload    struct {
		Content []json.RawMessage `json:"content"`
	} `json:"payload"`
	Tags []string `json:"tags,omitempty"`
	// Coalesce is the event's coalesce member (RFC-006 §13), kept raw so
	// that a malformed one is refused precisely (internal/coalesce.Parse)
	// rather than failing the whole decode.
	Coalesce json.RawMessage `json:"coalesce,omitempty"`
}

// PushEventResult answers push/event (SPEC §9.3).
type PushEventResult struct {
	Accepted    bool   `json:"accepted"`
	InferenceID string `json:"inferenceId,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Coalesce says what a coalesced event did to its subject (RFC-006
	// §7); nil for an event without coalesce.
	Coalesce *CoalesceResult `json:"coalesce,omitempty"`
}

// ChannelDescriptor describes one channel (SPEC §14.2). Fields beyond the
// spec that real servers send (tags, initiallyOpen, capabilities) are kept.
type ChannelDescriptor struct {
	ID            string          `json:"id"`
	Type          string          `json:"type,omitempty"`
	Label         string          `json:"label,omitempty"`
	Direction     string          `json:"direction,omitempty"`
	Address       json.RawMessage `json:"address,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	Tags          []string        `json:"tags,omitempty"`
	InitiallyOpen bool            `json:"initiallyOpen,omitempty"`
	Capabilities  json.RawMessage `json:"capabilities,omitempty"`
}

// ChannelsRegisterParams is channels/register.
type ChannelsRegisterParams struct {
	Channels []ChannelDescriptor `json:"channels"`
}

// ChannelsChangedParams is channels/changed.
type ChannelsChangedParams struct {
	Added   []ChannelDescriptor `json:"added,omitempty"`
	Removed []string            `json:"removed,omitempty"`
	Updated []ChannelDescriptor `json:"updated,omitempty"`
}

// ChannelResult is one itemized result of channels/register or changed.
type ChannelResult struct {
	ID       string `json:"id"`
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
}

// ChannelResults answers channels/register and channels/changed.
type ChannelResults struct {
	Results []ChannelResult `json:"results"`
}

// ChannelsListResult answers channels/list.
type ChannelsListResult struct {
	Channels []ChannelDescriptor `json:"channels"`
}

// IncomingMessage is one message of channels/incoming (SPEC §14.3).
type IncomingMessage struct {
	ChannelID string            `json:"channelId"`
	MessageID string            `json:"messageId"`
	ThreadID  string            `json:"threadId,omitempty"`
	Author    json.RawMessage   `json:"author,omitempty"`
	Timestamp string            `json:"timestamp,omitempty"`
	Content   []json.RawMessage `json:"content"`
	Metadata  json.RawMessage   `json:"metadata,omitempty"`
	Tags      []string          `json:"tags,omitempty"`
	// EventID and Coalesce make the message a coalesced occurrence
	// (RFC-006 §3.1, §13); EventID is required with Coalesce.
	EventID  string    `json:"eventId,omitempty"`
	Coalesce *Coalesce `json:"coalesce,omitempty"`
}

// ChannelsIncomingParams is channels/incoming.
type ChannelsIncomingParams struct {
	Messages []IncomingMessage `json:"messages"`
}

// IncomingResult is one per-message result of channels/incoming.
type IncomingResult struct {
	MessageID      string `json:"messageId"`
	Accepted       bool   `json:"accepted"`
	ConversationID string `json:"conversationId,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// Coalesce says what a coalesced message did to its subject (RFC-006
	// §7); nil for a message without coalesce.
	Coalesce *CoalesceResult `json:"coalesce,omitempty"`
}

// ChannelsIncomingResult answers channels/incoming.
type ChannelsIncomingResult struct {
	Results []IncomingResult `json:"results"`
}

// ModelInfoResult answers model/info (SPEC §12.2).
type ModelInfoResult struct {
	ID            string   `json:"id"`
	Vendor        string   `json:"vendor,omitempty"`
	ContextWindow int      `json:"contextWindow,omitempty"`
	Capabilities  []string `json:"capabilities,omitempty"`
}
