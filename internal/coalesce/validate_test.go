package coalesce

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
)

// Every malformed case of RFC-006 §13, on the lane it applies to, names
// the field and says why; every valid shape parses to its Spec.
func TestParse(t *testing.T) {
	all := protocol.AllEventCoalescing()
	noLeaves := protocol.EventCoalescing{PushEvents: true, ChannelsIncoming: true}
	long := strings.Repeat("x", 257)
	max := strings.Repeat("é", 128) // 256 bytes
	bigData := `"` + strings.Repeat("d", 4095) + `"`
	okData := `"` + strings.Repeat("d", 4094) + `"`
	for _, tc := range []struct {
		name    string
		raw     string
		lane    Lane
		eventID string
		adv     protocol.EventCoalescing
		want    Spec
		field   string // "" when valid
	}{
		// Valid.
		{name: "plain", raw: `{"key":"K"}`, want: Spec{Key: "K"}},
		{name: "initial", raw: `{"key":"K","initial":true}`, want: Spec{Key: "K", Initial: true}},
		{name: "deferred with data", raw: `{"key":"K","deferred":true,"data":{"by":"o", "para":3}}`,
			want: Spec{Key: "K", Deferred: true, Data: json.RawMessage(`{"by":"o","para":3}`)}},
		{name: "data compacted, strings kept", raw: `{"key":"K","deferred":true,"data": [ "a  b" , 1.50 ] }`,
			want: Spec{Key: "K", Deferred: true, Data: json.RawMessage(`["a  b",1.50]`)}},
		{name: "data of 4096 bytes once compact", raw: `{"key":"K","deferred":true,"data":  ` + okData + `  }`,
			want: Spec{Key: "K", Deferred: true, Data: json.RawMessage(okData)}},
		{name: "data at 4096 bytes", raw: `{"key":"K","deferred":true,"data":` + okData + `}`,
			want: Spec{Key: "K", Deferred: true, Data: json.RawMessage(okData)}},
		{name: "retract", raw: `{"key":"K","retract":true}`, want: Spec{Key: "K", Retract: true}},
		{name: "channel-scoped retract", raw: `{"key":"K","retract":true,"channelId":"chat"}`, want: Spec{Key: "K", Retract: true, ChannelID: "chat"}},
		{name: "key of 256 bytes", raw: `{"key":"` + max + `"}`, want: Spec{Key: max}},
		{name: "false flags are defaults", raw: `{"key":"K","deferred":false,"retract":false,"initial":false}`, want: Spec{Key: "K"}},
		{name: "null members are absent", raw: `{"key":"K","data":null,"channelId":null,"deferred":null}`, want: Spec{Key: "K"}},
		{name: "unknown members ignored", raw: `{"key":"K","future":[1]}`, want: Spec{Key: "K"}},
		{name: "deferred false without the leaf", raw: `{"key":"K","deferred":false}`, adv: noLeaves, want: Spec{Key: "K"}},
		{name: "incoming plain", raw: `{"key":"K","initial":true}`, lane: LaneIncoming, want: Spec{Key: "K", Initial: true}},
		{name: "incoming deferred false", raw: `{"key":"K","deferred":false}`, lane: LaneIncoming, want: Spec{Key: "K"}},
		{name: "absent", raw: ``, want: Spec{}},
		{name: "null", raw: ` null `, want: Spec{}},
		{name: "absent, incoming, no eventId (vector 41)", raw: ``, lane: LaneIncoming, eventID: "-", want: Spec{}},
		{name: "lane not advertised: ignored", raw: `{"key":""}`, adv: protocol.EventCoalescing{ChannelsIncoming: true}, want: Spec{}},
		{name: "incoming lane not advertised: ignored", raw: `{"key":"K","deferred":true}`, lane: LaneIncoming,
			adv: protocol.EventCoalescing{PushEvents: true}, eventID: "-", want: Spec{}},

		// Malformed.
		{name: "not an object", raw: `["K"]`, field: "coalesce"},
		{name: "a string", raw: `"K"`, field: "coalesce"},
		{name: "missing key", raw: `{"retract":true}`, field: "coalesce.key"},
		{name: "null key", raw: `{"key":null}`, field: "coalesce.key"},
		{name: "empty key", raw: `{"key":""}`, field: "coalesce.key"},
		{name: "257-byte key (vector 38)", raw: `{"key":"` + long + `"}`, field: "coalesce.key"},
		{name: "key of 129 two-byte runes", raw: `{"key":"` + max + `é"}`, field: "coalesce.key"},
		{name: "numeric key", raw: `{"key":7}`, field: "coalesce.key"},
		{name: "string initial", raw: `{"key":"K","initial":"true"}`, field: "coalesce.initial"},
		{name: "numeric deferred", raw: `{"key":"K","deferred":1}`, field: "coalesce.deferred"},
		{name: "object retract", raw: `{"key":"K","retract":{}}`, field: "coalesce.retract"},
		{name: "retract with deferred", raw: `{"key":"K","retract":true,"deferred":true}`, field: "coalesce.retract"},
		{name: "retract with initial", raw: `{"key":"K","retract":true,"initial":true}`, field: "coalesce.retract"},
		{name: "data without deferred", raw: `{"key":"K","data":{}}`, field: "coalesce.data"},
		{name: "data with deferred false", raw: `{"key":"K","deferred":false,"data":1}`, field: "coalesce.data"},
		{name: "data over 4 KiB", raw: `{"key":"K","deferred":true,"data":` + bigData + `}`, field: "coalesce.data"},
		{name: "channelId not a string", raw: `{"key":"K","channelId":5}`, field: "coalesce.channelId"},
		{name: "empty channelId", raw: `{"key":"K","channelId":""}`, field: "coalesce.channelId"},
		{name: "channelId unadvertised (vector 15)", raw: `{"key":"K","channelId":"chat"}`, adv: noLeaves, field: "coalesce.channelId"},
		{name: "deferred unadvertised", raw: `{"key":"K","deferred":true}`, adv: noLeaves, field: "coalesce.deferred"},
		{name: "incoming deferred (vector 38)", raw: `{"key":"K","deferred":true}`, lane: LaneIncoming, field: "coalesce.deferred"},
		{name: "incoming channelId", raw: `{"key":"K","channelId":"chat"}`, lane: LaneIncoming, field: "coalesce.channelId"},
		{name: "incoming without eventId (vector 15a)", raw: `{"key":"K"}`, lane: LaneIncoming, eventID: "-", field: "eventId"},
		{name: "push without eventId", raw: `{"key":"K"}`, eventID: "-", field: "eventId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lane := tc.lane
			if lane == 0 {
				lane = LanePush
			}
			adv := tc.adv
			if adv == (protocol.EventCoalescing{}) {
				adv = all
			}
			eventID := tc.eventID
			switch eventID {
			case "":
				eventID = "e1"
			case "-":
				eventID = ""
			}
			got, inv := Parse(json.RawMessage(tc.raw), lane, eventID, adv)
			if tc.field != "" {
				if inv == nil {
					t.Fatalf("valid: %+v", got)
				}
				if inv.Field != tc.field || inv.Reason == "" {
					t.Fatalf("invalid %+v, want field %q", inv, tc.field)
				}
				if got.Coalesced() {
					t.Errorf("a malformed member yielded %+v", got)
				}
				return
			}
			if inv != nil {
				t.Fatalf("invalid: %v", inv)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

// Invalid is the data of push/event's -32602 as its tags encode it, and an
// error saying the same.
func TestInvalidEncoding(t *testing.T) {
	_, inv := Parse(json.RawMessage(`{"key":""}`), LanePush, "e", protocol.AllEventCoalescing())
	b, err := json.Marshal(inv)
	if err != nil || string(b) != `{"field":"coalesce.key","reason":"must not be empty"}` {
		t.Fatalf("%s %v", b, err)
	}
	if inv.Error() != "coalesce.key: must not be empty" {
		t.Errorf("Error() = %q", inv.Error())
	}
}

// Parse keeps its own copy of data: the caller's buffer may be reused.
func TestParseCopiesData(t *testing.T) {
	raw := []byte(`{"key":"K","deferred":true,"data":{"a":1}}`)
	s, inv := Parse(raw, LanePush, "e", protocol.AllEventCoalescing())
	if inv != nil {
		t.Fatal(inv)
	}
	copy(raw, strings.Repeat("z", len(raw)))
	if string(s.Data) != `{"a":1}` {
		t.Errorf("data changed with the buffer: %s", s.Data)
	}
}

// Vector 15a, 38 at the validation level: in one channels/incoming batch,
// each message is judged alone, so malformed ones fail and their siblings
// pass.
func TestParseBatchPerMessage(t *testing.T) {
	type msg struct{ eventID, raw string }
	adv := protocol.AllEventCoalescing()
	for name, tc := range map[string]struct {
		msgs []msg
		want []bool
	}{
		"vector-15a": {[]msg{{"", `{"key":"K"}`}, {"sibling", `{"key":"sibling","initial":true}`}, {"", `{"key":"K"}`}}, []bool{false, true, false}},
		"vector-38":  {[]msg{{"good1", `{"key":"one","initial":true}`}, {"bad", `{"key":"K","deferred":true}`}, {"good2", `{"key":"two","initial":true}`}}, []bool{true, false, true}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []bool
			for _, m := range tc.msgs {
				_, inv := Parse(json.RawMessage(m.raw), LaneIncoming, m.eventID, adv)
				got = append(got, inv == nil)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

// SubjectFor: channel scope only from the message's channel or
// coalesce.channelId, never from anything else (vector 14).
func TestSubjectFor(t *testing.T) {
	k := Spec{Key: "K"}
	for _, tc := range []struct {
		name    string
		lane    Lane
		fs, ch  string
		spec    Spec
		want    Subject
		binding string
	}{
		{"push, feature set", LanePush, "doc", "", k, Subject{"b", ScopeFeatureSet, "doc", "K"}, "b"},
		{"push ignores a channel given beside it", LanePush, "doc", "chat", k, Subject{"b", ScopeFeatureSet, "doc", "K"}, "b"},
		{"push, coalesce.channelId", LanePush, "doc", "", Spec{Key: "K", ChannelID: "chat"}, Subject{"b", ScopeChannel, "chat", "K"}, "b"},
		{"incoming", LaneIncoming, "", "chat", k, Subject{"b", ScopeChannel, "chat", "K"}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SubjectFor(tc.binding, tc.lane, tc.fs, tc.ch, tc.spec); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if SubjectFor("b", LaneIncoming, "", "chat", k) != SubjectFor("b", LanePush, "doc", "", Spec{Key: "K", ChannelID: "chat"}) {
		t.Error("a channel-scoped push and a channel message with the same channel and key are different subjects")
	}
}
