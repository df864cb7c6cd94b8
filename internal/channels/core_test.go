package channels

import (
	"testing"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

func rec(state store.State, source string) *store.Record {
	return &store.Record{Kind: store.KindDecision, State: state, Source: source}
}

func TestSameStateRule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cur    *store.Record
		state  store.State
		source string
		want   bool
	}{
		{"no record, the default", nil, store.Closed, SourceDefaultClosed, false},
		{"no record, a machine close", nil, store.Closed, SourceHousekeeping, false},
		{"no record, the agent's close", nil, store.Closed, SourceAgentTool, true},
		{"no record, an open", nil, store.Open, SourceOpenedByDelivery, true},
		{"other state", rec(store.Closed, SourceDefaultClosed), store.Open, SourceOpenedByDelivery, true},
		{"same state, machine over machine", rec(store.Closed, SourceDefaultClosed), store.Closed, SourceHousekeeping, false},
		{"same state, delivery over policy", rec(store.Open, SourceSubscriptionPolicy), store.Open, SourceOpenedByDelivery, false},
		{"same state, agent open over delivery", rec(store.Open, SourceOpenedByDelivery), store.Open, SourceAgentTool, true},
		{"same state, agent close over default", rec(store.Closed, SourceDefaultClosed), store.Closed, SourceAgentTool, true},
		{"same state, decline over default", rec(store.Closed, SourceDefaultClosed), store.Closed, SourceInvitationDeclined, true},
		{"same state, agent over its own", rec(store.Open, SourceAgentTool), store.Open, SourceAgentTool, false},
		{"same state, decline over agent close", rec(store.Closed, SourceAgentTool), store.Closed, SourceInvitationDeclined, false},
		{"same state, agent close over decline", rec(store.Closed, SourceInvitationDeclined), store.Closed, SourceAgentTool, false},
	} {
		if got := writes(tc.cur, tc.state, tc.source); got != tc.want {
			t.Errorf("%s: writes = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLiftRule(t *testing.T) {
	plain, boot := protocol.ChannelDescriptor{ID: "c"}, protocol.ChannelDescriptor{ID: "c", InitiallyOpen: true}
	for _, tc := range []struct {
		name   string
		cur    *store.Record
		desc   protocol.ChannelDescriptor
		admits bool
		want   string
	}{
		{"first sighting, initially open", nil, boot, true, "open/server-bootstrap"},
		{"first sighting, policy", nil, plain, true, "open/subscription-policy"},
		{"first sighting, nothing: the default needs no record", nil, plain, false, ""},
		{"default lifted by bootstrap", rec(store.Closed, SourceDefaultClosed), boot, false, "open/server-bootstrap"},
		{"default lifted by policy", rec(store.Closed, SourceDefaultClosed), plain, true, "open/subscription-policy"},
		{"default stays", rec(store.Closed, SourceDefaultClosed), plain, false, ""},
		{"agent close sticks", rec(store.Closed, SourceAgentTool), boot, true, ""},
		{"decline sticks", rec(store.Closed, SourceInvitationDeclined), boot, true, ""},
		{"housekeeping close sticks", rec(store.Closed, SourceHousekeeping), boot, true, ""},
		{"delivery open sticks", rec(store.Open, SourceOpenedByDelivery), plain, false, ""},
	} {
		state, source, ok := initial(tc.cur, tc.desc, tc.admits)
		got := ""
		if ok {
			got = string(state) + "/" + source
		}
		if got != tc.want {
			t.Errorf("%s: initial = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCloseRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cur      *store.Record
		source   string
		override bool
		want     refusal
	}{
		{"agent always", rec(store.Open, SourceAgentTool), SourceAgentTool, false, refusalNone},
		{"unknown machine source", rec(store.Closed, SourceDefaultClosed), "cleanup", false, refusalSource},
		{"unknown source even when closed", nil, "", false, refusalSource},
		{"housekeeping over explicit open", rec(store.Open, SourceAgentTool), SourceHousekeeping, false, refusalExplicitOpen},
		{"housekeeping over explicit open, overridden", rec(store.Open, SourceAgentTool), SourceHousekeeping, true, refusalNone},
		{"gc over delivery open", rec(store.Open, SourceOpenedByDelivery), SourceSubscriptionGC, false, refusalNone},
	} {
		if got := closeRefusal(tc.cur, tc.source, tc.override); got != tc.want {
			t.Errorf("%s: closeRefusal = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPutBackDecision(t *testing.T) {
	if s, src := putBack(nil); s != store.Closed || src != SourceDefaultClosed {
		t.Errorf("putBack(nil) = %s/%s", s, src)
	}
	if s, src := putBack(rec(store.Closed, SourceAgentTool)); s != store.Closed || src != SourceAgentTool {
		t.Errorf("putBack(agent close) = %s/%s", s, src)
	}
}
