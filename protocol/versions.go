package protocol

import (
	"encoding/json"
	"slices"
)

// The MCP revisions this host speaks, by name.
const (
	// Version20260728 is the stateless revision: no initialize, every
	// request carries its version in _meta, server/discover tells what a
	// server speaks.
	Version20260728 = "2026-07-28"
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
	Version20241105 = "2024-11-05"
)

// Versions lists the MCP revisions this host speaks, newest first. The
// first is offered through server/discover, the rest through initialize
// (LegacyVersions).
var Versions = []string{Version20260728, Version20251125, Version20250618, Version20250326, Version20241105}

// LegacyVersions lists the revisions negotiated through initialize, newest
// first: the host offers the first.
var LegacyVersions = Versions[1:]

// Modern reports whether v is a stateless revision (2026-07-28 or later):
// one with server/discover and no initialize. Revision names are dates, so
// they order as strings.
func Modern(v string) bool { return v >= Version20260728 }

// Speaks reports whether v is a revision this host speaks.
func Speaks(v string) bool { return slices.Contains(Versions, v) }

// BestCommon returns the newest revision in theirs this host speaks, or ""
// when there is none.
func BestCommon(theirs []string) string {
	for _, v := range Versions {
		if slices.Contains(theirs, v) {
			return v
		}
	}
	return ""
}

// Methods and _meta keys of the stateless revision (2026-07-28).
const (
	MethodDiscover              = "server/discover"
	MethodSubscriptionsListen   = "subscriptions/listen"
	MethodSubscriptionsAcked    = "notifications/subscriptions/acknowledged"
	MetaProtocolVersion         = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo              = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities      = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo              = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID          = "io.modelcontextprotocol/subscriptionId"
	ResultTypeComplete          = "complete"
	ResultTypeInputRequired     = "input_required"
	CodeUnsupportedProtocolVers = -32022
)

// DiscoverResult is a server's answer to server/discover. Cache hints
// (ttlMs, cacheScope) are read and kept for the operator; this host lists
// again on every connect and on list_changed, so it caches nothing by them.
type DiscoverResult struct {
	SupportedVersions []string                   `json:"supportedVersions"`
	Capabilities      ServerCapabilities         `json:"capabilities"`
	Instructions      string                     `json:"instructions,omitempty"`
	Meta              map[string]json.RawMessage `json:"_meta,omitempty"`
	TTLMs             *int64                     `json:"ttlMs,omitempty"`
	CacheScope        string                     `json:"cacheScope,omitempty"`
}

// ServerInfo returns the server's identity from _meta, if it gave a
// readable one.
func (r DiscoverResult) ServerInfo() *Implementation {
	raw, ok := r.Meta[MetaServerInfo]
	if !ok {
		return nil
	}
	var info Implementation
	if json.Unmarshal(raw, &info) != nil || info.Name == "" {
		return nil
	}
	return &info
}

// UnsupportedVersionData is the data of an UnsupportedProtocolVersion error
// (-32022), and of the refusal a legacy server may send to initialize.
type UnsupportedVersionData struct {
	Supported []string `json:"supported"`
	Requested string   `json:"requested,omitempty"`
}

// ResultEnvelope reads what every 2026-07-28 result carries besides its
// own fields: its type and, for input_required, what the server asks for.
type ResultEnvelope struct {
	ResultType    string                     `json:"resultType,omitempty"`
	RequestState  *string                    `json:"requestState,omitempty"`
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

// InputRequired reports whether the result asks for another round trip.
// A result without resultType is complete (earlier revisions never send it).
func (e ResultEnvelope) InputRequired() bool { return e.ResultType == ResultTypeInputRequired }
