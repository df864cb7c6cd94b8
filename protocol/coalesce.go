package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Event coalescing: the wire types of RFC-006 §13. The host's decisions
// live in internal/coalesce; what is here is only their shape.
//
// push/event params and channels/incoming messages carry a coalesce
// member (Coalesce) and their results a coalesce member (CoalesceResult);
// a channels/incoming message gains an optional eventId. A reader that
// has to reject a malformed member precisely (a non-boolean flag, RFC-006
// §13) keeps the member raw and validates it, rather than decoding it into
// Coalesce, whose booleans would fail the whole message's decode instead.

// MethodPushRender is the host → server request asking for a deferred
// batch's content as the host is about to show it to a model (RFC-006
// §5.2).
const MethodPushRender = "push/render"

// Coalesce outcomes (RFC-006 §7): CoalesceResult.Outcome.
const (
	// CoalesceFirst: appended, and the subject's history is known to be
	// empty (or a deferred batch opened).
	CoalesceFirst = "first"
	// CoalesceReplaced: an unconsumed occurrence of the subject was
	// replaced (or a notice joined a pending batch).
	CoalesceReplaced = "replaced"
	// CoalesceAppended: appended after consumed history, or history
	// unknown.
	CoalesceAppended = "appended"
	// CoalesceRetracted: any pending version removed; nothing appended,
	// since no version was ever consumed.
	CoalesceRetracted = "retracted"
	// CoalesceNoted: any pending version removed and the deletion notice
	// appended, since some version was (or may have been) consumed.
	CoalesceNoted = "noted"
	// CoalesceConsumed: any pending version removed; the withdrawal had
	// no notice to append.
	CoalesceConsumed = "consumed"
)

// ReasonCoalesceInvalid is the per-message reason of a channels/incoming
// message whose coalesce member is malformed (RFC-006 §13).
const ReasonCoalesceInvalid = "coalesce_invalid"

// EventCoalescingMember is the member of the host's
// capabilities.experimental.mcpl that advertises coalescing (RFC-006 §10).
const EventCoalescingMember = "eventCoalescing"

// DefaultRetryWindowMs is the retry window a host guarantees when it
// advertises none (RFC-006 §3.1): one hour, and the least it may
// advertise.
const DefaultRetryWindowMs = 3600000

// Bounds on a coalesce member (RFC-006 §13).
const (
	// MaxCoalesceKeyBytes is the longest key, in bytes of UTF-8.
	MaxCoalesceKeyBytes = 256
	// MaxCoalesceDataBytes is the largest notice data, serialized.
	MaxCoalesceDataBytes = 4096
)

// Coalesce is the coalesce member of a push/event's params or of a
// channels/incoming message (RFC-006 §13): the subject's key and the
// occurrence's mode.
type Coalesce struct {
	// Key names the subject, 1 to 256 bytes of UTF-8, opaque to the host.
	Key string `json:"key"`
	// ChannelID selects channel scope on a push/event (RFC-006 §3.2);
	// never on channels/incoming, and only to a host advertising
	// channelScopedPush.
	ChannelID string `json:"channelId,omitempty"`
	// Deferred marks a notice whose content the host asks for with
	// push/render (RFC-006 §5); push/event only.
	Deferred bool `json:"deferred,omitempty"`
	// Retract withdraws the subject (RFC-006 §6); exclusive with
	// Deferred and Initial.
	Retract bool `json:"retract,omitempty"`
	// Initial asserts no earlier occurrence of the subject was sent under
	// this binding (RFC-006 §3.3).
	Initial bool `json:"initial,omitempty"`
	// Data is a deferred notice's private data, at most 4 KiB serialized,
	// handed back in push/render and never shown to a model.
	Data json.RawMessage `json:"data,omitempty"`
}

// CoalesceResult is the coalesce member of a push/event result or of a
// channels/incoming per-message result (RFC-006 §7). It is informational:
// no outcome asks anything of the server.
type CoalesceResult struct {
	// Outcome is one of the Coalesce* outcome constants.
	Outcome string `json:"outcome"`
	// PriorEventID names the occurrence displaced or found consumed, when
	// known.
	PriorEventID string `json:"priorEventId,omitempty"`
}

// Notice is one retained notice of a deferred batch, as push/render hands
// it back (RFC-006 §5.2): the notice's eventId and timestamp, and its data
// exactly as the server sent it, when it sent any.
type Notice struct {
	// EventID is the notice's push/event eventId.
	EventID string `json:"eventId"`
	// Timestamp is the notice's push/event timestamp.
	Timestamp string `json:"timestamp"`
	// Data is the notice's coalesce.data; absent when it had none.
	Data json.RawMessage `json:"data,omitempty"`
}

// PushRenderParams is a push/render request (RFC-006 §5.2): the frozen
// batch of one subject.
type PushRenderParams struct {
	// FeatureSet is the notices' feature set.
	FeatureSet string `json:"featureSet"`
	// ChannelID is present iff the subject is channel-scoped.
	ChannelID string `json:"channelId,omitempty"`
	// Key is the subject's key.
	Key string `json:"key"`
	// EventID is the eventId of the latest notice in the batch.
	EventID string `json:"eventId"`
	// Notices are the batch's retained notices, oldest first.
	Notices []Notice `json:"notices"`
	// Dropped counts notices older than Notices[0] the host discarded; 0
	// when none, and always sent.
	Dropped int `json:"dropped"`
}

// PushRenderResult answers push/render (RFC-006 §5.2): everything that
// changed under the subject since the server's previous render of it.
// Empty content means nothing changed.
type PushRenderResult struct {
	// Content is the rendered blocks, kept raw; it may be empty.
	Content []json.RawMessage `json:"content"`
	// Timestamp is the rendered state's as-of time; optional.
	Timestamp string `json:"timestamp,omitempty"`
}

// EventCoalescing is the host's advertisement of coalescing, the
// eventCoalescing member of its capabilities.experimental.mcpl (RFC-006
// §10): which parts it supports, and how long it recognises a retried
// occurrence.
//
// On the wire it is either a boolean (true: every part, the default
// window; false: none) or an object of the parts; UnmarshalJSON reads
// both, and MarshalJSON writes the object, every part said.
type EventCoalescing struct {
	// PushEvents: coalesce on push/event.
	PushEvents bool `json:"pushEvents"`
	// ChannelsIncoming: coalesce on channels/incoming.
	ChannelsIncoming bool `json:"channelsIncoming"`
	// Deferred: deferred notices and push/render.
	Deferred bool `json:"deferred"`
	// ChannelScopedPush: coalesce.channelId on push/event.
	ChannelScopedPush bool `json:"channelScopedPush"`
	// RetryWindowMs is the guaranteed retry window in milliseconds; 0
	// (omitted) means DefaultRetryWindowMs, and any other value is at
	// least that.
	RetryWindowMs int64 `json:"retryWindowMs,omitempty"`
}

// AllEventCoalescing is what boolean true advertises: every part, the
// default window.
func AllEventCoalescing() EventCoalescing {
	return EventCoalescing{PushEvents: true, ChannelsIncoming: true, Deferred: true, ChannelScopedPush: true}
}

// RetryWindow returns the advertised window in milliseconds, the default
// when none is set.
func (e EventCoalescing) RetryWindow() int64 {
	if e.RetryWindowMs == 0 {
		return DefaultRetryWindowMs
	}
	return e.RetryWindowMs
}

// MarshalJSON writes the object form, every part said and retryWindowMs
// only when it is not the default's omission.
func (e EventCoalescing) MarshalJSON() ([]byte, error) {
	if e.RetryWindowMs != 0 && e.RetryWindowMs < DefaultRetryWindowMs {
		return nil, fmt.Errorf("eventCoalescing.retryWindowMs %d is below %d", e.RetryWindowMs, DefaultRetryWindowMs)
	}
	type plain EventCoalescing
	return json.Marshal(plain(e))
}

// UnmarshalJSON reads a boolean or an object. A part that is present and
// not a boolean, or a retryWindowMs that is not an integer of at least
// DefaultRetryWindowMs, is an error; a part left out is not advertised,
// and members it does not know are ignored.
func (e *EventCoalescing) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	switch string(t) {
	case "true":
		*e = AllEventCoalescing()
		return nil
	case "false", "null":
		*e = EventCoalescing{}
		return nil
	}
	var m map[string]json.RawMessage
	if len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &m) != nil {
		return errors.New("eventCoalescing is neither a boolean nor an object")
	}
	var out EventCoalescing
	for name, dst := range map[string]*bool{
		"pushEvents":        &out.PushEvents,
		"channelsIncoming":  &out.ChannelsIncoming,
		"deferred":          &out.Deferred,
		"channelScopedPush": &out.ChannelScopedPush,
	} {
		raw, ok := m[name]
		if !ok {
			continue
		}
		switch string(bytes.TrimSpace(raw)) {
		case "true":
			*dst = true
		case "false":
		default:
			return fmt.Errorf("eventCoalescing.%s is not a boolean", name)
		}
	}
	if raw, ok := m["retryWindowMs"]; ok {
		v, ok := integer(raw)
		if !ok || v < DefaultRetryWindowMs {
			return fmt.Errorf("eventCoalescing.retryWindowMs %s is not an integer of at least %d", bytes.TrimSpace(raw), DefaultRetryWindowMs)
		}
		out.RetryWindowMs = v
	}
	*e = out
	return nil
}

// integer reads a JSON number that is an integer (3600000, or 3.6e6) and
// fits an int64; a string, even of digits, is not a number.
func integer(raw json.RawMessage) (int64, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(t, &n) != nil {
		return 0, false
	}
	if v, err := n.Int64(); err == nil {
		return v, true
	}
	f, err := n.Float64()
	if err != nil || f != float64(int64(f)) || f > 1<<62 || f < -(1<<62) {
		return 0, false
	}
	return int64(f), true
}
