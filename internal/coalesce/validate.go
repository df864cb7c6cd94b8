package coalesce

import (
	"bytes"
	"encoding/json"

	"github.com/mcpl-go/mcpl/protocol"
)

// Lane is the delivery method an occurrence came by.
type Lane uint8

// The two lanes of RFC-006.
const (
	// LanePush is push/event.
	LanePush Lane = iota + 1
	// LaneIncoming is one message of channels/incoming.
	LaneIncoming
)

// String names the lane's method.
func (l Lane) String() string {
	switch l {
	case LanePush:
		return protocol.MethodPushEvent
	case LaneIncoming:
		return protocol.MethodChannelsIncoming
	}
	return "lane?"
}

// Spec is a validated coalesce member. The zero Spec (empty Key) is an
// occurrence the host does not coalesce: none was sent, or the host does
// not advertise coalescing on its lane (Coalesced).
type Spec struct {
	// Key is the subject's key, 1 to 256 bytes.
	Key string
	// ChannelID selects channel scope on push/event; empty otherwise.
	ChannelID string
	// Deferred marks a notice (push/event only).
	Deferred bool
	// Retract marks a withdrawal.
	Retract bool
	// Initial claims the subject's birth (RFC-006 §3.3).
	Initial bool
	// Data is a notice's data, compact; nil when it had none.
	Data json.RawMessage
}

// Coalesced reports whether the occurrence is to be coalesced at all.
func (s Spec) Coalesced() bool { return s.Key != "" }

// Invalid says why a coalesce member is malformed (RFC-006 §13): Field is
// the member's path ("coalesce.key", "eventId"), Reason a sentence. On
// push/event it is the data of the -32602 error, as its json tags encode
// it; on channels/incoming the message's result is {accepted: false,
// reason: "coalesce_invalid"} and Invalid goes to the log.
type Invalid struct {
	// Field is the offending member's path.
	Field string `json:"field"`
	// Reason says what is wrong with it.
	Reason string `json:"reason"`
}

// Error makes Invalid an error.
func (e *Invalid) Error() string { return e.Field + ": " + e.Reason }

func invalid(field, reason string) (Spec, *Invalid) {
	return Spec{}, &Invalid{Field: field, Reason: reason}
}

// Parse validates an occurrence's coalesce member, raw as it came (nil
// when absent), on lane, whose occurrence id is eventID, against what the
// host advertises. It returns the Spec, or what is malformed.
//
// Every malformed case of RFC-006 §13 is refused: a missing, empty or
// over-256-byte key; a non-string key or channelId; a non-boolean initial,
// deferred or retract; retract with deferred or with initial; data without
// deferred or over 4 KiB; deferred or channelId on channels/incoming;
// channelId or deferred when the host does not advertise
// channelScopedPush or deferred; and a coalesced occurrence without a
// non-empty eventId (required on channels/incoming by §3.1, and on
// push/event by the base specification; without one there is no
// occurrence to recognise on retry).
//
// Decisions where §13 leaves room:
//   - A member that is JSON null counts as absent, the coalesce member
//     itself included; so deferred: false and initial: false are the
//     defaults, not a use of an unadvertised leaf, and deferred: false on
//     channels/incoming is not malformed. channelId on channels/incoming
//     is malformed whatever its value, null aside.
//   - An empty channelId is malformed: no channel has that id, and scope
//     selection must never fall back silently to the feature set.
//   - data is kept in its compact serialization: the same JSON value,
//     every string and number byte for byte, without insignificant
//     whitespace. That is what push/render sends back in any case
//     (encoding/json compacts a RawMessage it writes) and what State
//     keeps, so the bytes never change between admission, restart and
//     render; the 4 KiB bound is on exactly those bytes.
//   - Members Parse does not know are ignored (tolerant reader).
//   - On a lane the host does not advertise (pushEvents or
//     channelsIncoming false), the member is ignored as by a host without
//     coalescing (RFC-006 §8): the zero Spec, nil, and the occurrence is
//     ordinary. Its eventId is then not required.
//
// Checks run in a fixed order and the first failure is reported.
func Parse(raw json.RawMessage, lane Lane, eventID string, adv protocol.EventCoalescing) (Spec, *Invalid) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return Spec{}, nil
	}
	if (lane == LanePush && !adv.PushEvents) || (lane == LaneIncoming && !adv.ChannelsIncoming) {
		return Spec{}, nil
	}
	var m map[string]json.RawMessage
	if t[0] != '{' || json.Unmarshal(t, &m) != nil {
		return invalid("coalesce", "must be an object")
	}
	for k, v := range m {
		if v = bytes.TrimSpace(v); string(v) == "null" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	var s Spec
	key, ok := m["key"]
	if !ok {
		return invalid("coalesce.key", "is required")
	}
	if json.Unmarshal(key, &s.Key) != nil || key[0] != '"' {
		return invalid("coalesce.key", "must be a string")
	}
	if s.Key == "" {
		return invalid("coalesce.key", "must not be empty")
	}
	if len(s.Key) > protocol.MaxCoalesceKeyBytes {
		return invalid("coalesce.key", "must be at most 256 bytes of UTF-8")
	}
	for _, f := range []struct {
		name string
		dst  *bool
	}{{"initial", &s.Initial}, {"deferred", &s.Deferred}, {"retract", &s.Retract}} {
		v, ok := m[f.name]
		if !ok {
			continue
		}
		switch string(v) {
		case "true":
			*f.dst = true
		case "false":
		default:
			return invalid("coalesce."+f.name, "must be true or false")
		}
	}
	if v, ok := m["channelId"]; ok {
		if lane == LaneIncoming {
			return invalid("coalesce.channelId", "is not allowed on channels/incoming; the message's channelId is its scope")
		}
		if v[0] != '"' || json.Unmarshal(v, &s.ChannelID) != nil {
			return invalid("coalesce.channelId", "must be a string")
		}
		if s.ChannelID == "" {
			return invalid("coalesce.channelId", "must not be empty")
		}
		if !adv.ChannelScopedPush {
			return invalid("coalesce.channelId", "the host does not advertise eventCoalescing.channelScopedPush")
		}
	}
	if s.Deferred {
		if lane == LaneIncoming {
			return invalid("coalesce.deferred", "is not allowed on channels/incoming; use plain mode")
		}
		if !adv.Deferred {
			return invalid("coalesce.deferred", "the host does not advertise eventCoalescing.deferred")
		}
	}
	if s.Retract && s.Deferred {
		return invalid("coalesce.retract", "is exclusive with deferred")
	}
	if s.Retract && s.Initial {
		return invalid("coalesce.retract", "is exclusive with initial")
	}
	if v, ok := m["data"]; ok {
		if !s.Deferred {
			return invalid("coalesce.data", "is allowed only with deferred")
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return invalid("coalesce.data", "is not JSON")
		}
		if c.Len() > protocol.MaxCoalesceDataBytes {
			return invalid("coalesce.data", "must be at most 4096 bytes serialized")
		}
		s.Data = json.RawMessage(c.Bytes())
	}
	if eventID == "" {
		return invalid("eventId", "a non-empty eventId is required with coalesce")
	}
	return s, nil
}
