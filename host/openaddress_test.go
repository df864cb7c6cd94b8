package host_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestOpenCarriesAddressAsRegistered: channels/open carries the
// descriptor's address as the server registered it: its keys in their
// order, its numbers and escapes as written (not decoded and encoded
// again), also after an update that changes only the label. An update
// whose descriptor has no address is the whole new descriptor: the
// channel's address is gone, its target changed, so the open decision is
// carried out again, and that open carries no address (docs/channels.md).
func TestOpenCarriesAddressAsRegistered(t *testing.T) {
	r := newChannelRig(t)
	// Odd spacing and key order, a number and an escape a re-encoding
	// would change; the server's own JSON encoding drops the spaces
	// before the host sees them (they aren't part of the value).
	const registered = `{ "id" : "room-7",  "guild":"g1", "n": 1.50, "s": "caf\u00e9" }`
	const wire = `{"id":"room-7","guild":"g1","n":1.50,"s":"caf\u00e9"}`
	out := r.must("chat--register", `{"channels":[{"label":"#r7", "id":"r7","type":"room","initiallyOpen":true,"address":`+registered+`}]}`)
	if !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("register: %s", out)
	}
	opens := func(n int) []map[string]json.RawMessage {
		t.Helper()
		var raw []map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.must("chat--opens", fmt.Sprintf(`{"count":%d}`, n))), &raw); err != nil || len(raw) != n {
			t.Fatalf("opens = %v (%v), want %d", raw, err, n)
		}
		return raw
	}
	if got := string(opens(1)[0]["address"]); got != wire {
		t.Errorf("the first open's address = %s, want %s", got, wire)
	}

	// A label change alone: no new open; the next open, after a close,
	// carries the address as registered.
	out = r.must("chat--changed", `{"updated":[{"id":"r7","type":"room","label":"#room-seven","address":`+registered+`}]}`)
	if !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("changed: %s", out)
	}
	r.must("channel_close", `{"channelId":"r7"}`)
	r.must("channel_open", `{"channelId":"r7"}`)
	got := opens(2)
	if a := string(got[1]["address"]); a != wire {
		t.Errorf("the open after a label change: address = %s, want %s", a, wire)
	}
	r.waitLog("open r7", "close r7", "open r7")

	// An update with no address: the channel has none now, and is opened
	// again to its new target.
	out = r.must("chat--changed", `{"updated":[{"id":"r7","type":"room","label":"#room-seven"}]}`)
	if !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("changed: %s", out)
	}
	got = opens(3)
	if a, ok := got[2]["address"]; ok {
		t.Errorf("the open after an update with no address carries address %s, want none", a)
	}
	if id := string(got[2]["channelId"]); id != `"r7"` {
		t.Errorf("the third open is of %s", id)
	}
}
