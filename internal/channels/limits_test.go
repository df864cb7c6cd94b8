package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
)

// Descriptor bytes (limits.go): each descriptor, and a server's total,
// bounded; refusals itemized with their reasons; a re-registration or an
// update replacing its bytes in the total; a removal or a disconnect
// freeing them.

// rawDesc is a descriptor of exactly n bytes of JSON (n at least 31): id,
// then a metadata pad.
func rawDesc(id string, n int) string {
	head := `{"id":"` + id + `","metadata":{"p":"`
	const tail = `"}}`
	pad := n - len(head) - len(tail)
	if pad < 0 {
		panic(fmt.Sprintf("rawDesc(%q, %d): too small", id, n))
	}
	return head + strings.Repeat("x", pad) + tail
}

// serveCall sends method with params to rg's server "s" through a wire
// pair, and returns the itemized results.
func serveCall(t *testing.T, rg *rig, method, params string) []protocol.ChannelResult {
	t.Helper()
	peer := servePair(t, rg)
	var res protocol.ChannelResults
	if err := peer.Call(context.Background(), method, json.RawMessage(params), &res); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return res.Results
}

func registerRaw(t *testing.T, rg *rig, descs ...string) []protocol.ChannelResult {
	t.Helper()
	return serveCall(t, rg, protocol.MethodChannelsRegister, `{"channels":[`+strings.Join(descs, ",")+`]}`)
}

// descTotal is what the machine counts of server's descriptors.
func descTotal(rg *rig, server string) int {
	var n int
	rg.reg.do(func(m *machine) { n = m.descBytes[server] })
	return n
}

// registerOnly is a rig whose server takes no lifecycle requests, so
// registrations send nothing.
func registerOnly(t *testing.T, cfg ServerConfig) *rig {
	rg := newRig(t, "channels.register")
	rg.reg.AddServer("s", rg.srv, cfg)
	return rg
}

func TestDescriptorBytesPerDescriptor(t *testing.T) {
	rg := registerOnly(t, ServerConfig{})
	edge := rawDesc("edge", MaxDescriptorBytes)
	over := rawDesc("over", MaxDescriptorBytes+1)
	huge := rawDesc("huge", 8<<20+100)
	got := registerRaw(t, rg, rawDesc("a", 100), over, edge, huge, rawDesc("b", 200))
	want := []protocol.ChannelResult{
		{ID: "a", Accepted: true},
		{ID: "over", Accepted: false, Reason: "descriptor too large: it is 65537 bytes; this host keeps at most 65536 bytes per channel descriptor"},
		{ID: "edge", Accepted: true},
		{ID: "huge", Accepted: false, Reason: "descriptor too large: it is 8388708 bytes; this host keeps at most 65536 bytes per channel descriptor"},
		{ID: "b", Accepted: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "edge"}, serverIDs(rg, "s")); diff != "" {
		t.Errorf("live channels (-want +got):\n%s", diff)
	}
	if n := descTotal(rg, "s"); n != 100+200+MaxDescriptorBytes {
		t.Errorf("total %d bytes, want %d (the accepted ones)", n, 100+200+MaxDescriptorBytes)
	}

	// The bound is the server's: configured lower, it holds there, and
	// through channels/changed too.
	rg.reg.AddServer("s", rg.srv, ServerConfig{MaxDescriptorBytes: 100})
	got = serveCall(t, rg, protocol.MethodChannelsChanged, `{"added":[`+rawDesc("c", 101)+`,`+rawDesc("d", 100)+`],"updated":[`+rawDesc("a", 101)+`]}`)
	want = []protocol.ChannelResult{
		{ID: "a", Accepted: false, Reason: "descriptor too large: it is 101 bytes; this host keeps at most 100 bytes per channel descriptor"},
		{ID: "c", Accepted: false, Reason: "descriptor too large: it is 101 bytes; this host keeps at most 100 bytes per channel descriptor"},
		{ID: "d", Accepted: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changed results (-want +got):\n%s", diff)
	}
}

func TestDescriptorBytesLabelAndType(t *testing.T) {
	rg := registerOnly(t, ServerConfig{})
	res := rg.register(
		protocol.ChannelDescriptor{ID: "l1", Label: strings.Repeat("l", MaxLabelBytes)},
		protocol.ChannelDescriptor{ID: "l2", Label: strings.Repeat("l", MaxLabelBytes+1)},
		protocol.ChannelDescriptor{ID: "t1", Type: strings.Repeat("t", MaxTypeBytes)},
		protocol.ChannelDescriptor{ID: "t2", Type: strings.Repeat("t", MaxTypeBytes+1)},
	)
	want := []protocol.ChannelResult{
		{ID: "l1", Accepted: true},
		{ID: "l2", Accepted: false, Reason: "invalid descriptor: the label is longer than 256 bytes"},
		{ID: "t1", Accepted: true},
		{ID: "t2", Accepted: false, Reason: "invalid descriptor: the type is longer than 128 bytes"},
	}
	if diff := cmp.Diff(want, res.Results); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	// An update is held to the same bounds, and leaves the registration
	// it had.
	res, _ = rg.reg.Changed("s", protocol.ChannelsChangedParams{Updated: []protocol.ChannelDescriptor{{ID: "l1", Label: strings.Repeat("m", MaxLabelBytes+1)}}}, false)
	if want := "invalid descriptor: the label is longer than 256 bytes"; len(res.Results) != 1 || res.Results[0].Reason != want {
		t.Errorf("update results %+v, want one refused: %s", res.Results, want)
	}
	if l := rg.reg.ServerList("s").Channels; len(l) != 2 || l[0].Label != strings.Repeat("l", MaxLabelBytes) {
		t.Errorf("live channels after the refused update: %+v", l)
	}
}

func TestDescriptorBytesServerTotalDefault(t *testing.T) {
	rg := registerOnly(t, ServerConfig{})
	// 256 descriptors of 64 KiB are 16 MiB: the bound exactly.
	for k := range 8 {
		descs := make([]string, 32)
		for i := range descs {
			descs[i] = rawDesc(fmt.Sprintf("c%d-%d", k, i), MaxDescriptorBytes)
		}
		for _, r := range registerRaw(t, rg, descs...) {
			if !r.Accepted {
				t.Fatalf("%+v, want every descriptor up to the total accepted", r)
			}
		}
	}
	if n := descTotal(rg, "s"); n != MaxTotalDescriptorBytes {
		t.Fatalf("total %d bytes, want %d", n, MaxTotalDescriptorBytes)
	}
	got := registerRaw(t, rg, `{"id":"one"}`)
	want := []protocol.ChannelResult{{ID: "one", Accepted: false,
		Reason: "descriptors too large in total: this server's channel descriptors would total 16777228 bytes; this host keeps at most 16777216 bytes per server"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	// Another server's total is its own.
	rg.reg.AddServer("t", newDouble(t, "channels.register"), ServerConfig{})
	if res, _ := rg.reg.Register("t", []protocol.ChannelDescriptor{{ID: "one"}}); !res.Results[0].Accepted {
		t.Errorf("t's registration = %+v", res.Results)
	}
}

func TestDescriptorBytesReplaceAndFree(t *testing.T) {
	rg := registerOnly(t, ServerConfig{MaxTotalDescriptorBytes: 3000})
	total := func(want int) {
		t.Helper()
		if n := descTotal(rg, "s"); n != want {
			t.Errorf("total %d bytes, want %d", n, want)
		}
	}
	reason := func(n int) string {
		return fmt.Sprintf("descriptors too large in total: this server's channel descriptors would total %d bytes; this host keeps at most 3000 bytes per server", n)
	}

	// In one batch, one over the total is refused, the rest registered.
	got := registerRaw(t, rg, rawDesc("a", 1000), rawDesc("big", 2500), rawDesc("b", 1000))
	want := []protocol.ChannelResult{
		{ID: "a", Accepted: true},
		{ID: "big", Accepted: false, Reason: reason(3500)},
		{ID: "b", Accepted: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	total(2000)

	// Registered again, a's new bytes replace its old: 1000 + 1900, not
	// 2000 + 1900.
	if got := registerRaw(t, rg, rawDesc("a", 1900)); !got[0].Accepted {
		t.Errorf("re-registering a at 1900 bytes: %+v", got)
	}
	total(2900)
	// Over the total with its old bytes taken out, it is refused and a
	// keeps the registration it had.
	got = registerRaw(t, rg, rawDesc("a", 2001))
	if diff := cmp.Diff([]protocol.ChannelResult{{ID: "a", Accepted: false, Reason: reason(3001)}}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	total(2900)
	if l := rg.reg.ServerList("s").Channels; len(l) != 2 || len(l[0].Metadata) != 1900-len(`{"id":"a","metadata":}`) {
		t.Errorf("a after the refused re-registration: %d channels, the first %d bytes of metadata", len(l), len(l[0].Metadata))
	}

	// An update replaces its bytes too.
	got = serveCall(t, rg, protocol.MethodChannelsChanged, `{"updated":[`+rawDesc("b", 1100)+`]}`)
	if len(got) != 1 || !got[0].Accepted {
		t.Errorf("updating b to 1100 bytes: %+v", got)
	}
	total(3000)
	got = serveCall(t, rg, protocol.MethodChannelsChanged, `{"updated":[`+rawDesc("b", 1101)+`],"added":[`+rawDesc("c", 100)+`]}`)
	want = []protocol.ChannelResult{
		{ID: "b", Accepted: false, Reason: reason(3001)},
		{ID: "c", Accepted: false, Reason: reason(3100)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	total(3000)

	// A removal frees a's bytes, in the same request as an addition that
	// needs them.
	got = serveCall(t, rg, protocol.MethodChannelsChanged, `{"removed":["a"],"added":[`+rawDesc("c", 1900)+`]}`)
	want = []protocol.ChannelResult{{ID: "a", Accepted: true}, {ID: "c", Accepted: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	total(3000)

	// A disconnect frees them all.
	rg.reg.Disconnected("s", false)
	total(0)
	if got := registerRaw(t, rg, rawDesc("all", 3000)); !got[0].Accepted {
		t.Errorf("after the disconnect, 3000 bytes: %+v", got)
	}
	total(3000)
}

func TestDecodeDescriptorsKeepNoReference(t *testing.T) {
	ok := []byte(rawDesc("a", 200))
	big := []byte(rawDesc("big", 5000))
	descs, pre, sizes := decodeDescriptors([]json.RawMessage{ok, big}, 1000)
	if diff := cmp.Diff([]string{"", "descriptor too large: it is 5000 bytes; this host keeps at most 1000 bytes per channel descriptor"}, pre); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{200, 5000}, sizes); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
	// The refused one keeps its id and nothing else.
	if diff := cmp.Diff(protocol.ChannelDescriptor{ID: "big"}, descs[1]); diff != "" {
		t.Errorf("refused descriptor (-want +got):\n%s", diff)
	}
	// The kept one's bytes are its own: overwriting the request's changes
	// nothing of it.
	before := string(descs[0].Metadata)
	for i := range ok {
		ok[i] = 'z'
	}
	if string(descs[0].Metadata) != before {
		t.Errorf("the kept metadata changed with the request's buffer: it points into it")
	}
}
