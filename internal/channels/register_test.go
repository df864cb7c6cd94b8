package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Registration (SPEC §14.3, §14.5; anchor-host.md §3.4): itemized
// results, the lift rule at first sighting, channels/changed, the queue
// never holding an answer up, disconnects, and the inbox.

func serverIDs(rg *rig, server string) []string {
	var out []string
	for _, d := range rg.reg.ServerList(server).Channels {
		out = append(out, d.ID)
	}
	return out
}

func TestRegisterItemizedResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		long := strings.Repeat("x", MaxIDBytes+1)
		edge := strings.Repeat("y", MaxIDBytes)
		first, dup := desc("a", false), desc("a", false)
		dup.Label = "#second"
		res, start := rg.reg.Register("s", []protocol.ChannelDescriptor{
			first,
			{ID: ""},
			{ID: "b", Direction: "sideways"},
			dup,
			{ID: long},
			{ID: edge, Direction: protocol.DirectionBidirectional},
			{ID: "bad\xff"},
			{ID: "in", Direction: protocol.DirectionInbound},
			{ID: "out", Direction: protocol.DirectionOutbound},
		})
		want := []protocol.ChannelResult{
			{ID: "a", Accepted: true},
			{ID: "", Accepted: false, Reason: "invalid descriptor: missing id"},
			{ID: "b", Accepted: false, Reason: "invalid descriptor: direction must be outbound, inbound or bidirectional"},
			{ID: "a", Accepted: false, Reason: "invalid descriptor: the id appears twice in this request"},
			{ID: long, Accepted: false, Reason: "invalid descriptor: the id is longer than 512 bytes"},
			{ID: edge, Accepted: true},
			{ID: "bad\xff", Accepted: false, Reason: "invalid descriptor: the id is not valid UTF-8"},
			{ID: "in", Accepted: true},
			{ID: "out", Accepted: true},
		}
		if diff := cmp.Diff(want, res.Results); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"a", "in", "out", edge}, serverIDs(rg, "s")); diff != "" {
			t.Errorf("channels/list (-want +got):\n%s", diff)
		}
		if l := rg.reg.ServerList("s").Channels; len(l) == 0 || l[0].Label != "#a" {
			t.Errorf("the live a is not the first descriptor: %+v", l)
		}
		// Nothing went out before start.
		synctest.Wait()
		rg.srv.none()
		start()
		calls := takeCalls(t, rg.srv, 4)
		if diff := cmp.Diff([]string{"close a", "close in", "close out", "close " + edge}, callKeys(calls)); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		for _, c := range calls {
			c.ok()
		}
		synctest.Wait()
		rg.srv.none()
		for _, id := range []string{"b", long, "bad\xff", ""} {
			if got := rg.decision(id); got != "none" {
				t.Errorf("refused %q has decision %s", id, got)
			}
		}
		rg.checkReplay()
	})
}

func TestRegisterTooManyChannels(t *testing.T) {
	// Without channels.lifecycle nothing is recorded or sent, so the
	// bound is cheap to reach.
	rg := newRig(t, "channels.register")
	descs := make([]protocol.ChannelDescriptor, MaxChannelsPerServer)
	for i := range descs {
		descs[i] = protocol.ChannelDescriptor{ID: fmt.Sprintf("c%d", i)}
	}
	res, start := rg.reg.Register("s", descs)
	start()
	for i, r := range res.Results {
		if !r.Accepted {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
	res, start = rg.reg.Register("s", []protocol.ChannelDescriptor{{ID: "more"}, {ID: "c7", Label: "again"}})
	start()
	want := []protocol.ChannelResult{
		{ID: "more", Accepted: false, Reason: "too many channels: this host keeps at most 65536 per server"},
		{ID: "c7", Accepted: true},
	}
	if diff := cmp.Diff(want, res.Results); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	// Another server's count is its own.
	rg.reg.AddServer("t", newDouble(t, "channels.register"), ServerConfig{})
	res, _ = rg.reg.Register("t", []protocol.ChannelDescriptor{{ID: "more"}})
	if !res.Results[0].Accepted {
		t.Errorf("t's registration = %+v", res.Results)
	}
	// A removal makes room.
	rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"c0"}}, false)
	res, _ = rg.reg.Register("s", []protocol.ChannelDescriptor{{ID: "more"}})
	if !res.Results[0].Accepted {
		t.Errorf("registration after a removal = %+v", res.Results)
	}
}

// servePair connects a server-side peer to a host-side peer whose
// handler is rg's Serve for server "s".
func servePair(t *testing.T, rg *rig) *wire.Peer {
	t.Helper()
	a, b := transport.Pipe(0)
	quiet := slog.New(slog.DiscardHandler)
	host := wire.NewPeer(a, wire.Options{Name: "s", Logger: quiet, Handler: wire.HandlerFunc(func(ctx context.Context, req *wire.Request) (any, error) {
		res, err, handled := rg.reg.Serve(ctx, "s", req)
		if !handled {
			return nil, wire.ErrMethodNotFound
		}
		return res, err
	})})
	srv := wire.NewPeer(b, wire.Options{Name: "host", Logger: quiet})
	t.Cleanup(func() {
		srv.Close()
		host.Close()
	})
	return srv
}

func TestRegisterServeRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		peer := servePair(t, rg)
		ctx := context.Background()

		var res protocol.ChannelResults
		err := peer.Call(ctx, protocol.MethodChannelsRegister, json.RawMessage(`{"channels":[{"id":"a","label":"#a"},{"id":5},{"id":"b","label":7},{"id":""},{"id":"c","direction":"up"}]}`), &res)
		if err != nil {
			t.Fatal(err)
		}
		want := []protocol.ChannelResult{
			{ID: "a", Accepted: true},
			{ID: "", Accepted: false, Reason: "invalid descriptor: a field has the wrong type"},
			{ID: "b", Accepted: false, Reason: "invalid descriptor: a field has the wrong type"},
			{ID: "", Accepted: false, Reason: "invalid descriptor: missing id"},
			{ID: "c", Accepted: false, Reason: "invalid descriptor: direction must be outbound, inbound or bidirectional"},
		}
		if diff := cmp.Diff(want, res.Results); diff != "" {
			t.Errorf("channels/register results (-want +got):\n%s", diff)
		}
		rg.srv.expect("close", "a").ok()
		synctest.Wait()
		rg.srv.none()

		var list protocol.ChannelsListResult
		if err := peer.Call(ctx, protocol.MethodChannelsList, nil, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Channels) != 1 || list.Channels[0].ID != "a" || list.Channels[0].Label != "#a" {
			t.Errorf("channels/list = %+v", list)
		}

		var inc protocol.ChannelsIncomingResult
		err = peer.Call(ctx, protocol.MethodChannelsIncoming, json.RawMessage(`{"messages":[{"channelId":"a","messageId":"m1","text":"hi","content":"hi"},{"channelId":"x","messageId":"m2","content":"hi"}]}`), &inc)
		if err != nil {
			t.Fatal(err)
		}
		wantInc := []protocol.IncomingResult{
			{MessageID: "m1", Accepted: true},
			{MessageID: "m2", Accepted: false, Reason: `unknown channel "x" — register it first (§14.5)`},
		}
		if diff := cmp.Diff(wantInc, inc.Results); diff != "" {
			t.Errorf("channels/incoming results (-want +got):\n%s", diff)
		}

		res = protocol.ChannelResults{}
		err = peer.Call(ctx, protocol.MethodChannelsChanged, json.RawMessage(`{"removed":["a",5,"zz"],"updated":[{"id":"q"}],"added":[{"id":"d"}]}`), &res)
		if err != nil {
			t.Fatal(err)
		}
		want = []protocol.ChannelResult{
			{ID: "a", Accepted: true},
			{ID: "", Accepted: false, Reason: "invalid channel id: removed takes channel id strings"},
			{ID: "zz", Accepted: false, Reason: "not registered"},
			{ID: "q", Accepted: false, Reason: "not registered — update rejected (§14.5)"},
			{ID: "d", Accepted: true},
		}
		if diff := cmp.Diff(want, res.Results); diff != "" {
			t.Errorf("channels/changed results (-want +got):\n%s", diff)
		}
		rg.srv.expect("close", "d").ok()
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"d"}, serverIDs(rg, "s")); diff != "" {
			t.Errorf("live channels (-want +got):\n%s", diff)
		}

		for _, tc := range []struct{ method, params, want string }{
			{protocol.MethodChannelsRegister, `[]`, "Invalid params: channels/register: params must be an object with a channels array"},
			{protocol.MethodChannelsChanged, `{"added":{}}`, "Invalid params: channels/changed: params must be an object with added, removed and updated arrays"},
			{protocol.MethodChannelsIncoming, `{"messages":"no"}`, "Invalid params: channels/incoming: params must be an object with a messages array"},
		} {
			err := peer.Call(ctx, tc.method, json.RawMessage(tc.params), nil)
			var perr *protocol.Error
			if !errors.As(err, &perr) || perr.Code != protocol.CodeInvalidParams || perr.Message != tc.want {
				t.Errorf("%s %s = %v, want invalid params %q", tc.method, tc.params, err, tc.want)
			}
		}
		err = peer.Call(ctx, "channels/nope", nil, nil)
		var perr *protocol.Error
		if !errors.As(err, &perr) || perr.Code != protocol.CodeMethodNotFound {
			t.Errorf("an unknown method = %v, want method not found", err)
		}
	})
}

func TestRegisterServeNotifications(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		ctx := context.Background()
		// A wire.Request built here has no id: a notification.
		res, err, handled := rg.reg.Serve(ctx, "s", &wire.Request{Method: protocol.MethodChannelsRegister, Params: json.RawMessage(`{"channels":[{"id":"a"},{"id":""}]}`)})
		if !handled || err != nil || res != nil {
			t.Errorf("register notification = %v, %v, %v", res, err, handled)
		}
		rg.srv.expect("close", "a").ok()
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"a"}, serverIDs(rg, "s")); diff != "" {
			t.Errorf("live channels (-want +got):\n%s", diff)
		}

		// channels/changed as a notification is filtered itemwise.
		_, err, handled = rg.reg.Serve(ctx, "s", &wire.Request{Method: protocol.MethodChannelsChanged, Params: json.RawMessage(`{"removed":["a","zz"],"added":[{"id":"b"},{"id":"b","direction":"x"}]}`)})
		if !handled || err != nil {
			t.Errorf("changed notification = %v, %v", err, handled)
		}
		rg.srv.expect("close", "b").ok()
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"b"}, serverIDs(rg, "s")); diff != "" {
			t.Errorf("live channels (-want +got):\n%s", diff)
		}

		res, err, handled = rg.reg.Serve(ctx, "s", &wire.Request{Method: protocol.MethodChannelsList})
		if l, ok := res.(protocol.ChannelsListResult); !handled || err != nil || !ok || len(l.Channels) != 1 || l.Channels[0].ID != "b" {
			t.Errorf("channels/list = %+v, %v, %v", res, err, handled)
		}
		if _, _, handled := rg.reg.Serve(ctx, "s", &wire.Request{Method: "tools/list"}); handled {
			t.Error("Serve handled tools/list")
		}
	})
}

func TestRegisterChangedUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		res, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"x"}, Updated: []protocol.ChannelDescriptor{desc("y", false), {ID: ""}}}, false)
		start()
		want := []protocol.ChannelResult{
			{ID: "x", Accepted: false, Reason: "not registered"},
			{ID: "y", Accepted: false, Reason: "not registered — update rejected (§14.5)"},
			{ID: "", Accepted: false, Reason: "invalid descriptor: missing id"},
		}
		if diff := cmp.Diff(want, res.Results); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		synctest.Wait()
		rg.srv.none()
		if got := serverIDs(rg, "s"); len(got) != 0 {
			t.Errorf("live channels = %v", got)
		}
	})
}

func TestRegisterChangedLabelOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		upd := desc("c", true)
		upd.Label = "#renamed"
		upd.Address = json.RawMessage(`{ "room" : "c" }`) // equal, spelled otherwise
		res, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Updated: []protocol.ChannelDescriptor{upd}}, false)
		start()
		if !res.Results[0].Accepted {
			t.Fatal(res)
		}
		synctest.Wait()
		rg.srv.none()
		if l := rg.reg.ServerList("s").Channels; len(l) != 1 || l[0].Label != "#renamed" {
			t.Errorf("channels/list = %+v", l)
		}
		if !listedOpen(t, rg, "c") {
			t.Error("a label change invalidated the open confirmation")
		}
		// Confirmed open still: channel_open answers at once.
		if text, _ := rg.tool(ToolOpen, `{"channelId":"c"}`); text != `{"channelId":"c","status":"already open"}` {
			t.Errorf("channel_open = %s", text)
		}
		rg.srv.none()
	})
}

func TestRegisterChangedRetarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		upd := desc("c", true)
		upd.Address = json.RawMessage(`{"room":"c2"}`)
		res, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Updated: []protocol.ChannelDescriptor{upd}}, false)
		if !res.Results[0].Accepted {
			t.Fatal(res)
		}
		if listedOpen(t, rg, "c") {
			t.Error("a new address left the open confirmed")
		}
		synctest.Wait()
		rg.srv.none() // not before start
		start()
		open := rg.srv.expect("open", "c")
		if !strings.Contains(string(open.params), `"address":{"room":"c2"}`) {
			t.Errorf("channels/open params = %s", open.params)
		}
		open.ok()
		synctest.Wait()
		rg.srv.none()
		if !listedOpen(t, rg, "c") {
			t.Error("not confirmed open after the open to the new address")
		}
		if got := rg.decision("c"); got != "open/server-bootstrap" {
			t.Errorf("decision = %s", got)
		}
	})
}

func TestRegisterRetargetWhileOpenOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A stale answer is never applied: the open for the old address
		// is answered after the update, and the op goes again.
		rg := newRig(t)
		rg.registered("c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		old := rg.srv.expect("open", "c")
		upd := desc("c", false)
		upd.Address = json.RawMessage(`{"room":"c2"}`)
		_, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Updated: []protocol.ChannelDescriptor{upd}}, false)
		start()
		synctest.Wait()
		old.ok()
		again := rg.srv.expect("open", "c")
		if !strings.Contains(string(again.params), `"address":{"room":"c2"}`) {
			t.Errorf("second channels/open params = %s", again.params)
		}
		again.ok()
		if res := recv(t, opening); res.IsError || res.Text() != `{"channelId":"c","status":"opened"}` {
			t.Errorf("channel_open = %s", res.Text())
		}
		// The update's own work finds the channel confirmed open at its
		// new address: it sends nothing.
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"close c", "open c", "open c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

func TestRegisterRemovalCancelsQueuedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		open := rg.srv.expect("open", "c")
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		synctest.Wait()
		res, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"c"}}, false)
		start()
		if diff := cmp.Diff([]protocol.ChannelResult{{ID: "c", Accepted: true}}, res.Results); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if got := serverIDs(rg, "s"); len(got) != 0 {
			t.Errorf("live channels = %v", got)
		}
		open.ok()
		if r := recv(t, opening); !r.IsError || r.Text() != "Failed to open channel: Channel is no longer registered: c (it stays selected for opening: a later delivery or reconnect tries again, and channel_close withdraws that)" {
			t.Errorf("channel_open = %q", r.Text())
		}
		if r := recv(t, closing); !r.IsError || r.Text() != "Channel is no longer registered: c" {
			t.Errorf("channel_close = %q", r.Text())
		}
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"close c", "open c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if got := rg.decision("c"); got != "closed/agent-tool" {
			t.Errorf("decision = %s, want closed/agent-tool (kept)", got)
		}
		if got := listed(t, rg); got != `[]` {
			t.Errorf("channel_list = %s", got)
		}
		// Removed again: not registered.
		res, _ = rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"c"}}, false)
		if diff := cmp.Diff([]protocol.ChannelResult{{ID: "c", Accepted: false, Reason: "not registered"}}, res.Results); diff != "" {
			t.Errorf("second removal (-want +got):\n%s", diff)
		}
	})
}

func TestRegisterRemovedAndAddedAgainCancelsOldWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Work queued before a removal is cancelled even when the channel
		// is registered again before it runs: only the new registration's
		// work carries out the decision.
		rg := newRig(t)
		rg.registered("c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		open := rg.srv.expect("open", "c")
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		synctest.Wait()
		_, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"c"}}, false)
		start()
		rg.register(desc("c", false))
		synctest.Wait()
		open.ok()
		if r := recv(t, opening); r.Text() != textOpenFailed("Channel is no longer registered: c") {
			t.Errorf("channel_open = %q", r.Text())
		}
		if r := recv(t, closing); r.Text() != "Channel is no longer registered: c" {
			t.Errorf("channel_close = %q", r.Text())
		}
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"close c", "open c", "close c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if got := rg.decision("c"); got != "closed/agent-tool" {
			t.Errorf("decision = %s", got)
		}
		if listedOpen(t, rg, "c") {
			t.Error("c listed open")
		}
	})
}

func TestRegisterAnswersDoNotWaitOnQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		open := rg.srv.expect("open", "c")
		// The open is held: registration is answered and started all the
		// same, on this goroutine.
		res, start := rg.reg.Register("s", []protocol.ChannelDescriptor{desc("c", false), desc("d", false)})
		want := []protocol.ChannelResult{{ID: "c", Accepted: true}, {ID: "d", Accepted: true}}
		if diff := cmp.Diff(want, res.Results); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		start()
		res, start = rg.reg.Changed("s", protocol.ChannelsChangedParams{Updated: []protocol.ChannelDescriptor{desc("c", false)}}, false)
		start()
		if !res.Results[0].Accepted {
			t.Error(res)
		}
		// d's lane runs while c's open is out.
		rg.srv.expect("close", "d").ok()
		synctest.Wait()
		rg.srv.none()
		open.ok()
		if r := recv(t, opening); r.IsError {
			t.Errorf("channel_open = %s", r.Text())
		}
		// The registration's work for c finds c confirmed in the state
		// decided (open, at the same address): it sends nothing.
		synctest.Wait()
		rg.srv.none()
	})
}

func TestRegisterDisconnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("a", "b")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"b"}`)
		rg.srv.expect("open", "b").ok()
		recv(t, opening)
		before := rg.reg.Decisions()
		rg.reg.Disconnected("s", false)
		if got := serverIDs(rg, "s"); len(got) != 0 {
			t.Errorf("live channels after disconnect = %v", got)
		}
		if got := listed(t, rg); got != `[]` {
			t.Errorf("channel_list = %s", got)
		}
		if diff := cmp.Diff(before, rg.reg.Decisions()); diff != "" {
			t.Errorf("decisions changed (-before +after):\n%s", diff)
		}
		if text, _ := rg.tool(ToolOpen, `{"channelId":"b"}`); text != "Channel not found: b" {
			t.Errorf("channel_open while disconnected = %q", text)
		}
		synctest.Wait()
		rg.srv.none()
		// Registered again: each channel's decision is carried out.
		rg.register(desc("a", false), desc("b", false))
		calls := takeCalls(t, rg.srv, 2)
		if diff := cmp.Diff([]string{"close a", "open b"}, callKeys(calls)); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		for _, c := range calls {
			c.ok()
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("a"); got != "closed/default-closed" {
			t.Errorf("a = %s", got)
		}
		if got := rg.decision("b"); got != "open/agent-tool" {
			t.Errorf("b = %s", got)
		}
		if !listedOpen(t, rg, "b") {
			t.Error("b not confirmed open")
		}
	})
}

func TestRegisterDisconnectedCancelsQueuedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		open := rg.srv.expect("open", "c")
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		synctest.Wait()
		rg.reg.Disconnected("s", false)
		open.ok()
		recv(t, opening)
		if r := recv(t, closing); r.Text() != "Channel is no longer registered: c" {
			t.Errorf("channel_close = %q", r.Text())
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/agent-tool" {
			t.Errorf("decision = %s", got)
		}
	})
}

func TestRegisterLiftsDefaultOnReRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A default-closed channel registered again as initially open is
		// lifted: server-bootstrap, opened, no notice.
		rg := newRig(t)
		rg.registered("a")
		rg.register(desc("a", true))
		rg.srv.expect("open", "a").ok()
		synctest.Wait()
		if got := rg.decision("a"); got != "open/server-bootstrap" {
			t.Errorf("decision = %s", got)
		}
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices = %+v", n)
		}
	})
}

func TestRegisterSubscriptionPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.admit("p", true)
		rg.register(desc("p", false))
		// Announced as intent before transport: the open is still out.
		open := rg.srv.expect("open", "p")
		want := []Notice{{Kind: NoticeOpened, Cause: SourceSubscriptionPolicy, Server: "s", Channels: []ChannelRef{{ID: "p", Label: "#p"}}}}
		if diff := cmp.Diff(want, rg.takeNotices()); diff != "" {
			t.Errorf("notices (-want +got):\n%s", diff)
		}
		open.ok()
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("p"); got != "open/subscription-policy" {
			t.Errorf("decision = %s", got)
		}
		// Sighted again: the decision stands, no second notice, and the
		// channel, confirmed open at the same address, gets no second
		// open.
		rg.register(desc("p", false))
		synctest.Wait()
		rg.srv.none()
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices on a second sighting = %+v", n)
		}
		rg.checkReplay()
	})
}

func TestRegisterSubscriptionPolicyBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.admit("p", true)
		rg.admit("q", true)
		rg.register(desc("p", false), desc("q", false), desc("r", false), desc("b", true))
		calls := takeCalls(t, rg.srv, 4)
		if diff := cmp.Diff([]string{"close r", "open b", "open p", "open q"}, callKeys(calls)); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		want := []Notice{{Kind: NoticeOpened, Cause: SourceSubscriptionPolicy, Server: "s", Channels: []ChannelRef{{ID: "p", Label: "#p"}, {ID: "q", Label: "#q"}}}}
		if diff := cmp.Diff(want, rg.takeNotices()); diff != "" {
			t.Errorf("notices (-want +got):\n%s", diff)
		}
		for _, c := range calls {
			c.ok()
		}
		synctest.Wait()
		for id, want := range map[string]string{"p": "open/subscription-policy", "q": "open/subscription-policy", "r": "closed/default-closed", "b": "open/server-bootstrap"} {
			if got := rg.decision(id); got != want {
				t.Errorf("%s = %s, want %s", id, got, want)
			}
		}
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("later notices = %+v", n)
		}
	})
}

func TestRegisterInitiallyOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.admit("c", true) // initiallyOpen wins over the policy
		rg.register(desc("c", true))
		rg.srv.expect("open", "c").ok()
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "open/server-bootstrap" {
			t.Errorf("decision = %s, want open/server-bootstrap", got)
		}
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices = %+v, want none", n)
		}
	})
}

func TestRegisterWithoutLifecycleRecordsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, "channels.register")
		rg.admit("p", true)
		res := rg.register(desc("p", false), desc("c", true))
		if !res.Results[0].Accepted || !res.Results[1].Accepted {
			t.Fatal(res)
		}
		synctest.Wait()
		rg.srv.none()
		if n := len(logRecords(t, rg)); n != 0 {
			t.Errorf("log has %d records", n)
		}
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices = %+v", n)
		}
	})
}
