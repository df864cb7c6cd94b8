package coalesce

import (
	"cmp"
	"fmt"
)

// ScopeKind is the kind of a key's scope (RFC-006 §3.2).
type ScopeKind string

// The two scope kinds.
const (
	// ScopeFeatureSet: a push/event without coalesce.channelId; the scope
	// id is its featureSet.
	ScopeFeatureSet ScopeKind = "featureSet"
	// ScopeChannel: a channels/incoming message (its channelId) or a
	// push/event with coalesce.channelId.
	ScopeChannel ScopeKind = "channel"
)

// Subject is a subject's full identity (RFC-006 §3.2): the server binding,
// the scope, and the key. Binding is host-owned: it names the configured
// server and survives reconnects, and the host gives a server reassigned
// to another endpoint or principal a new one (§3.2, vector 42); nothing a
// server sends chooses it.
type Subject struct {
	// Binding is the host's identity for the server binding.
	Binding string `json:"binding"`
	// Scope is the scope kind.
	Scope ScopeKind `json:"scope"`
	// ScopeID is the feature set or the channel id.
	ScopeID string `json:"scopeId"`
	// Key is the coalesce key.
	Key string `json:"key"`
}

// String is for logs.
func (s Subject) String() string {
	return fmt.Sprintf("%s/%s:%s/%q", s.Binding, s.Scope, s.ScopeID, s.Key)
}

// SubjectFor returns the subject of an occurrence (RFC-006 §3.2). On
// channels/incoming the scope is the message's channelID; on push/event
// it is the channel of spec.ChannelID when set, else featureSet. The
// scope never comes from origin, metadata or any other field (§3.2,
// vector 14): channelID is ignored on push/event.
func SubjectFor(binding string, lane Lane, featureSet, channelID string, spec Spec) Subject {
	switch {
	case lane == LaneIncoming:
		return Subject{Binding: binding, Scope: ScopeChannel, ScopeID: channelID, Key: spec.Key}
	case spec.ChannelID != "":
		return Subject{Binding: binding, Scope: ScopeChannel, ScopeID: spec.ChannelID, Key: spec.Key}
	}
	return Subject{Binding: binding, Scope: ScopeFeatureSet, ScopeID: featureSet, Key: spec.Key}
}

func compareSubjects(a, b Subject) int {
	return cmp.Or(cmp.Compare(a.Binding, b.Binding), cmp.Compare(a.Scope, b.Scope),
		cmp.Compare(a.ScopeID, b.ScopeID), cmp.Compare(a.Key, b.Key))
}

// History is a subject's consumed history (RFC-006 §3.3): whether any
// occurrence under it was ever consumed.
type History uint8

// The tri-state. Only HistoryNone is a positive claim; the table moves a
// subject from none to some, or from either to unknown, never back.
const (
	// HistoryUnknown: the table cannot establish the subject's history
	// (never tracked, evicted, restarted without it). It behaves as some.
	// It is the zero value, so a subject never heard of is unknown.
	HistoryUnknown History = iota
	// HistoryNone: no occurrence was ever consumed, known from the
	// subject's birth (coalesce.initial).
	HistoryNone
	// HistorySome: an occurrence was consumed (or treated as consumed).
	HistorySome
)

// String is the history's name in State.
func (h History) String() string {
	switch h {
	case HistoryNone:
		return "none"
	case HistorySome:
		return "some"
	case HistoryUnknown:
		return "unknown"
	}
	return fmt.Sprintf("history(%d)", uint8(h))
}

// MarshalText writes the name.
func (h History) MarshalText() ([]byte, error) {
	switch h {
	case HistoryNone, HistorySome, HistoryUnknown:
		return []byte(h.String()), nil
	}
	return nil, fmt.Errorf("coalesce: no history %d", uint8(h))
}

// UnmarshalText reads a name.
func (h *History) UnmarshalText(b []byte) error {
	switch string(b) {
	case "none":
		*h = HistoryNone
	case "some":
		*h = HistorySome
	case "unknown":
		*h = HistoryUnknown
	default:
		return fmt.Errorf("coalesce: no history %q", b)
	}
	return nil
}

// consumed is the history after an occurrence is consumed (or sealed as
// though it were): none becomes some; unknown stays unknown, since one
// consumption does not establish the rest.
func (h History) consumed() History {
	if h == HistoryNone {
		return HistorySome
	}
	return h
}
