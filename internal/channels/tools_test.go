package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// The channel tools (anchor-host.md §3.7): each test pins what the agent
// reads, what the log holds after, and which requests went out.

// logRecords returns every record of the rig's log, in order.
func logRecords(t *testing.T, rg *rig) []store.Record {
	t.Helper()
	var out []store.Record
	if err := rg.st.Replay(context.Background(), func(r store.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// decisionAt returns server's channel id's decision as "state/source".
func decisionAt(rg *rig, server, id string) string {
	for _, s := range rg.reg.Snapshot() {
		if s.Key == (Key{server, id}) && s.Decision != nil {
			return fmt.Sprintf("%s/%s", s.Decision.State, s.Decision.Source)
		}
	}
	return "none"
}

// openedChannel registers d as initially open and answers its open.
func openedChannel(rg *rig, d protocol.ChannelDescriptor) {
	rg.t.Helper()
	d.InitiallyOpen = true
	rg.register(d)
	rg.srv.expect("open", d.ID).ok()
	synctest.Wait()
}

// takeCalls returns the next n requests of d, keyed "method channel":
// requests on different channels go out on lanes of their own, in no
// set order.
func takeCalls(t *testing.T, d *double, n int) map[string]*call {
	t.Helper()
	out := map[string]*call{}
	for range n {
		c := d.next()
		k := shortMethod(c.method) + " " + c.channel
		if out[k] != nil {
			t.Fatalf("request %s came twice", k)
		}
		out[k] = c
	}
	return out
}

func callKeys(m map[string]*call) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// listed calls channel_list and returns its text.
func listed(t *testing.T, rg *rig) string {
	t.Helper()
	text, failed := rg.tool(ToolList, `{}`)
	if failed {
		t.Fatalf("channel_list failed: %s", text)
	}
	return text
}

// listedOpen reports channel_list's open for s's channel id.
func listedOpen(t *testing.T, rg *rig, id string) bool {
	t.Helper()
	var l []ListedChannel
	if err := json.Unmarshal([]byte(listed(t, rg)), &l); err != nil {
		t.Fatal(err)
	}
	for _, c := range l {
		if c.ServerID == "s" && c.ID == id {
			return c.Open
		}
	}
	t.Fatalf("channel_list has no %s", id)
	return false
}

func TestToolsListShapeAndOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		if got := listed(t, rg); got != `[]` {
			t.Errorf("channel_list with nothing registered = %s, want []", got)
		}
		// t does not grant channels.lifecycle: its channels have no
		// decision.
		rg.reg.AddServer("t", newDouble(t, "channels.register"), ServerConfig{})
		_, start := rg.reg.Register("t", []protocol.ChannelDescriptor{desc("a", false)})
		start()
		b := desc("b", false)
		b.Direction = protocol.DirectionInbound
		rg.register(desc("z", true), b)
		calls := takeCalls(t, rg.srv, 2)
		if diff := cmp.Diff([]string{"close b", "open z"}, callKeys(calls)); diff != "" {
			t.Fatalf("requests (-want +got):\n%s", diff)
		}
		calls["close b"].ok()
		synctest.Wait()
		// z's open is out: decided open, not confirmed open.
		want := `[{"id":"b","type":"chat","label":"#b","direction":"inbound","open":false,"desired":"closed","serverId":"s"},` +
			`{"id":"z","type":"chat","label":"#z","open":false,"desired":"open","serverId":"s"},` +
			`{"id":"a","type":"chat","label":"#a","open":false,"desired":"unknown","serverId":"t"}]`
		if got := listed(t, rg); got != want {
			t.Errorf("channel_list while z's open is out =\n%s\nwant\n%s", got, want)
		}
		calls["open z"].ok()
		synctest.Wait()
		want = strings.Replace(want, `"label":"#z","open":false`, `"label":"#z","open":true`, 1)
		if got := listed(t, rg); got != want {
			t.Errorf("channel_list after z's open =\n%s\nwant\n%s", got, want)
		}
		rg.srv.none()
	})
}

func TestToolsOpenAlreadyOpenThenMachineClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		if got := rg.decision("c"); got != "open/server-bootstrap" {
			t.Fatalf("decision = %s", got)
		}
		text, failed := rg.tool(ToolOpen, `{"channelId":"c"}`)
		if want := `{"channelId":"c","status":"already open"}`; failed || text != want {
			t.Errorf("channel_open = %q (isError %v), want %q", text, failed, want)
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "open/agent-tool" {
			t.Errorf("decision = %s, want open/agent-tool", got)
		}
		before := len(logRecords(t, rg))

		res := rg.reg.MachineClose(context.Background(), "s", "c", SourceHousekeeping, false)
		want := "Channel c was explicitly opened (source: agent-tool); a 'housekeeping' close does not override stated intent. Machine closes of explicit opens require an explicit idle lease (overrideExplicitOpen)."
		if res.IsError || res.Text() != want {
			t.Errorf("machine close = %q (isError %v)\nwant %q", res.Text(), res.IsError, want)
		}
		var sc map[string]string
		if err := json.Unmarshal(res.StructuredContent, &sc); err != nil {
			t.Errorf("structured content %s: %v", res.StructuredContent, err)
		}
		if diff := cmp.Diff(map[string]string{"refusal": "explicit-open", "channelId": "c"}, sc); diff != "" {
			t.Errorf("structured content (-want +got):\n%s", diff)
		}
		if got := textExplicitOpen("c", SourceSubscriptionGC); !strings.Contains(got, "a 'subscription-gc' close") {
			t.Errorf("explicit-open text for subscription-gc = %q", got)
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "open/agent-tool" {
			t.Errorf("decision after the refusal = %s, want open/agent-tool", got)
		}
		if n := len(logRecords(t, rg)); n != before {
			t.Errorf("the refusal appended %d records", n-before)
		}

		done := make(chan protocol.CallToolResult, 1)
		go func() {
			done <- rg.reg.MachineClose(context.Background(), "s", "c", SourceHousekeeping, true)
		}()
		rg.srv.expect("close", "c").ok()
		res = recv(t, done)
		if want := `{"channelId":"c","status":"closed"}`; res.IsError || res.Text() != want {
			t.Errorf("overriding machine close = %q (isError %v), want %q", res.Text(), res.IsError, want)
		}
		if got := rg.decision("c"); got != "closed/housekeeping" {
			t.Errorf("decision = %s, want closed/housekeeping", got)
		}
		synctest.Wait()
		rg.srv.none()
		rg.checkReplay()
	})
}

func TestToolsCloseAlreadyClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		before := len(logRecords(t, rg))
		text, failed := rg.tool(ToolClose, `{"channelId":"c"}`)
		if want := `{"channelId":"c","status":"already closed"}`; failed || text != want {
			t.Errorf("channel_close = %q (isError %v), want %q", text, failed, want)
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/agent-tool" {
			t.Errorf("decision = %s, want closed/agent-tool", got)
		}
		if n := len(logRecords(t, rg)); n != before+1 {
			t.Errorf("records appended = %d, want 1", n-before)
		}
		// Again: the agent's own decision is on record; nothing more is
		// written.
		if text, _ := rg.tool(ToolClose, `{"channelId":"c"}`); text != `{"channelId":"c","status":"already closed"}` {
			t.Errorf("second channel_close = %q", text)
		}
		if n := len(logRecords(t, rg)); n != before+1 {
			t.Errorf("records appended after a second close = %d, want 1", n-before)
		}
		rg.srv.none()
	})
}

func TestToolsMachineCloseAlreadyClosedWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		before := len(logRecords(t, rg))
		res := rg.reg.MachineClose(context.Background(), "s", "c", SourceHousekeeping, false)
		if want := `{"channelId":"c","status":"already closed"}`; res.IsError || res.Text() != want {
			t.Errorf("machine close = %q (isError %v), want %q", res.Text(), res.IsError, want)
		}
		if n := len(logRecords(t, rg)); n != before {
			t.Errorf("a housekeeping close of a default-closed channel appended %d records, want none", n-before)
		}
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s, want closed/default-closed", got)
		}
		synctest.Wait()
		rg.srv.none()
	})
}

func TestToolsMachineCloseUnknownSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		before := len(logRecords(t, rg))
		res := rg.reg.MachineClose(context.Background(), "s", "c", "x", false)
		want := "Unknown machine close source 'x'. Machine closes must use one of: subscription-gc, housekeeping."
		if !res.IsError || res.Text() != want {
			t.Errorf("machine close = %q (isError %v)\nwant %q", res.Text(), res.IsError, want)
		}
		if n := len(logRecords(t, rg)); n != before {
			t.Errorf("appended %d records, want none", n-before)
		}
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s", got)
		}
		// The empty source is not the agent's either.
		if res := rg.reg.MachineClose(context.Background(), "s", "c", "", false); res.Text() != textUnknownMachineSource("") {
			t.Errorf("machine close with no source = %q", res.Text())
		}
		// A channel that is not there.
		if res := rg.reg.MachineClose(context.Background(), "s", "x", SourceHousekeeping, false); !res.IsError || res.Text() != "Channel not found: x on server s" {
			t.Errorf("machine close of an unknown channel = %q (isError %v)", res.Text(), res.IsError)
		}
		synctest.Wait()
		rg.srv.none()
	})
}

func TestToolsUnrecordedDecisions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		initOpen bool
		tool     string
		want     string
		decision string
	}{
		{"open of a closed channel", false, ToolOpen,
			"Failed to open channel: this host couldn't record your decision to open c, so nothing changed and no open was sent. Try again later.",
			"closed/default-closed"},
		{"close of an open channel", true, ToolClose,
			"Failed to close channel: this host couldn't record your decision to close c, so nothing changed and no close was sent. Try again later.",
			"open/server-bootstrap"},
		{"open of an open channel", true, ToolOpen,
			"Channel c is already open, but this host couldn't record that you chose to keep it open, so a housekeeping close may still close it. Try again later.",
			"open/server-bootstrap"},
		{"close of a closed channel", false, ToolClose,
			"Channel c is already closed, but this host couldn't record that you chose to keep it closed, so its server announcing it open may still open it. Try again later.",
			"closed/default-closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				if tc.initOpen {
					openedChannel(rg, desc("c", true))
				} else {
					rg.registered("c")
				}
				before := len(logRecords(t, rg))
				rg.st.setFail(true)
				text, failed := rg.tool(tc.tool, `{"channelId":"c"}`)
				if !failed || text != tc.want {
					t.Errorf("%s = %q (isError %v)\nwant %q", tc.tool, text, failed, tc.want)
				}
				synctest.Wait()
				rg.srv.none()
				if got := rg.decision("c"); got != tc.decision {
					t.Errorf("decision = %s, want %s", got, tc.decision)
				}
				rg.st.setFail(false)
				if n := len(logRecords(t, rg)); n != before {
					t.Errorf("log grew by %d", n-before)
				}
			})
		})
	}
}

func TestToolsDeclineOpenChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		before := len(logRecords(t, rg))
		text, failed := rg.tool(ToolDecline, `{"channelId":"c","messageId":"m7"}`)
		if want := "Channel is already open: c. Use channel_close to leave it."; !failed || text != want {
			t.Errorf("channel_decline = %q (isError %v), want %q", text, failed, want)
		}
		if n := len(logRecords(t, rg)); n != before {
			t.Errorf("appended %d records", n-before)
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "open/server-bootstrap" {
			t.Errorf("decision = %s", got)
		}
	})
}

func TestToolsDeclineClosedChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		before := len(logRecords(t, rg))
		text, failed := rg.tool(ToolDecline, `{"channelId":"c","messageId":"m7"}`)
		if want := `{"acknowledged":false,"channelId":"c","status":"remained closed"}`; failed || text != want {
			t.Errorf("channel_decline = %q (isError %v), want %q", text, failed, want)
		}
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/invitation-declined" {
			t.Errorf("decision = %s, want closed/invitation-declined", got)
		}
		recs := logRecords(t, rg)[before:]
		var got []string
		for _, r := range recs {
			got = append(got, fmt.Sprintf("%s %s/%s %s/%s msg=%q ack=%q", r.Kind, r.Server, r.Channel, r.State, r.Source, r.MessageID, r.Acknowledgment))
		}
		want := []string{
			`decision s/c closed/invitation-declined msg="" ack=""`,
			`invitation-declined s/c / msg="m7" ack=""`,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
		rg.checkReplay()
	})
}

func TestToolsDeclineAcknowledge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		res := rg.reg.CallTool(context.Background(), ToolDecline, json.RawMessage(`{"channelId":"c","messageId":"m7","acknowledge":"👀"}`), Caller{})
		if res.IsError {
			t.Fatalf("channel_decline = %s", res.Text())
		}
		want := `{"acknowledged":false,"acknowledgmentError":"channels.acknowledge not in \"s\"'s effective grant (§14.1)","channelId":"c","status":"remained closed"}`
		if res.Text() != want {
			t.Errorf("channel_decline =\n%s\nwant\n%s", res.Text(), want)
		}
		var out struct {
			Acknowledged *bool  `json:"acknowledged"`
			Error        string `json:"acknowledgmentError"`
		}
		if err := json.Unmarshal([]byte(res.Text()), &out); err != nil {
			t.Fatal(err)
		}
		if out.Acknowledged == nil || *out.Acknowledged || out.Error != `channels.acknowledge not in "s"'s effective grant (§14.1)` {
			t.Errorf("acknowledged %v, acknowledgmentError %q", out.Acknowledged, out.Error)
		}
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/invitation-declined" {
			t.Errorf("decision = %s", got)
		}
	})
}

func TestToolsDeclineErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		before := len(logRecords(t, rg))
		for _, args := range []string{`{"channelId":"c"}`, `{"channelId":"c","messageId":""}`, `{"channelId":"c","messageId":7}`} {
			text, failed := rg.tool(ToolDecline, args)
			if want := "messageId must name the message that invited you. Nothing was done."; !failed || text != want {
				t.Errorf("channel_decline %s = %q (isError %v), want %q", args, text, failed, want)
			}
		}
		if text, _ := rg.tool(ToolDecline, `{"channelId":"x","messageId":"m"}`); text != "Channel not found: x" {
			t.Errorf("channel_decline of an unknown channel = %q", text)
		}
		rg.st.setFail(true)
		text, failed := rg.tool(ToolDecline, `{"channelId":"c","messageId":"m"}`)
		if want := "Failed to decline channel: this host couldn't record your decision to stay out of c, so nothing changed. Try again later."; !failed || text != want {
			t.Errorf("unrecorded channel_decline = %q (isError %v)\nwant %q", text, failed, want)
		}
		rg.st.setFail(false)
		synctest.Wait()
		rg.srv.none()
		if n := len(logRecords(t, rg)); n != before {
			t.Errorf("log grew by %d", n-before)
		}
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s", got)
		}
	})
}

func TestToolsResolution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		for _, tc := range []struct{ tool, args, want string }{
			{ToolOpen, `{"channelId":"x"}`, "Channel not found: x"},
			{ToolClose, `{"channelId":"x"}`, "Channel not found: x"},
			{ToolOpen, `{"channelId":"x","serverId":"t"}`, "Channel not found: x on server t"},
			{ToolClose, `{"channelId":"c","serverId":"t"}`, "Channel not found: c on server t"},
			{ToolPublish, `{"channelId":"x","text":"hi"}`, "Channel not found: x"},
		} {
			text, failed := rg.tool(tc.tool, tc.args)
			if !failed || text != tc.want {
				t.Errorf("%s %s = %q (isError %v), want %q", tc.tool, tc.args, text, failed, tc.want)
			}
		}
		synctest.Wait()
		rg.srv.none()

		other := newDouble(t, "channels.register", "channels.lifecycle", "channels.publish")
		rg.reg.AddServer("t", other, ServerConfig{})
		_, start := rg.reg.Register("t", []protocol.ChannelDescriptor{desc("c", false)})
		start()
		other.expect("close", "c").ok()
		synctest.Wait()
		for _, tool := range []string{ToolOpen, ToolClose, ToolDecline} {
			text, failed := rg.tool(tool, `{"channelId":"c","messageId":"m"}`)
			if want := "Channel id is ambiguous across MCPL servers: c. Include serverId."; !failed || text != want {
				t.Errorf("%s = %q (isError %v), want %q", tool, text, failed, want)
			}
		}
		text, failed := rg.tool(ToolClose, `{"channelId":"c","serverId":"t"}`)
		if want := `{"channelId":"c","status":"already closed"}`; failed || text != want {
			t.Errorf("channel_close on t = %q, want %q", text, want)
		}
		if got := decisionAt(rg, "t", "c"); got != "closed/agent-tool" {
			t.Errorf("t's decision = %s, want closed/agent-tool", got)
		}
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("s's decision = %s, want closed/default-closed", got)
		}
		synctest.Wait()
		rg.srv.none()
		other.none()
	})
}

func TestToolsOpenHistory(t *testing.T) {
	for _, tc := range []struct {
		name, args, history string
	}{
		{"backscroll and before", `{"channelId":"c","backscroll":20,"beforeMessageId":"m9"}`, `{"limit":20,"beforeMessageId":"m9"}`},
		{"clamped", `{"channelId":"c","backscroll":900}`, `{"limit":500}`},
		{"floored", `{"channelId":"c","backscroll":7.9}`, `{"limit":7}`},
		{"none", `{"channelId":"c","beforeMessageId":"m9"}`, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				rg.registered("c")
				opening := rg.toolAsync(ToolOpen, tc.args)
				open := rg.srv.expect("open", "c")
				var p map[string]json.RawMessage
				if err := json.Unmarshal(open.params, &p); err != nil {
					t.Fatal(err)
				}
				if string(p["channelId"]) != `"c"` || string(p["type"]) != `"chat"` || string(p["address"]) != `{"room":"c"}` {
					t.Errorf("channels/open params = %s", open.params)
				}
				h, present := p["history"]
				switch {
				case tc.history == "" && present:
					t.Errorf("channels/open params carry history %s, want none", h)
				case tc.history != "":
					var got, want any
					json.Unmarshal(h, &got)
					json.Unmarshal([]byte(tc.history), &want)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("history in %s (-want +got):\n%s", open.params, diff)
					}
				}
				open.answer(map[string]any{
					"channel": map[string]string{"id": "c"},
					"history": []map[string]string{{"channelId": "c", "messageId": "m8", "text": "earlier"}},
				})
				res := recv(t, opening)
				want := `{"channelId":"c","history":[{"channelId":"c","messageId":"m8","text":"earlier"}],"status":"opened"}`
				if res.IsError || res.Text() != want {
					t.Errorf("channel_open =\n%s\nwant\n%s", res.Text(), want)
				}
				if got := rg.decision("c"); got != "open/agent-tool" {
					t.Errorf("decision = %s", got)
				}
				synctest.Wait()
				rg.srv.none()
			})
		})
	}
}

func TestToolsOpenWithBackscrollOnOpenChannelSendsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c","backscroll":5}`)
		open := rg.srv.expect("open", "c")
		if !strings.Contains(string(open.params), `"history":{"limit":5}`) {
			t.Errorf("channels/open params = %s", open.params)
		}
		open.ok()
		if res := recv(t, opening); res.IsError || res.Text() != `{"channelId":"c","status":"opened"}` {
			t.Errorf("channel_open = %s", res.Text())
		}
	})
}

func TestToolsCloseFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		rg.srv.expect("close", "c").fail("boom")
		res := recv(t, closing)
		if want := "Failed to close channel: the server answered: boom."; !res.IsError || res.Text() != want {
			t.Errorf("channel_close = %q (isError %v), want %q", res.Text(), res.IsError, want)
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/agent-tool" {
			t.Errorf("decision = %s, want closed/agent-tool", got)
		}
		if listedOpen(t, rg, "c") {
			t.Error("channel_list says c is open after its close failed: the transport is unconfirmed")
		}
		rg.checkReplay()
	})
}

func TestToolsOpenSubstitution(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer any
	}{
		{"channel", map[string]any{"channel": map[string]string{"id": "other"}}},
		{"history item", map[string]any{"channel": map[string]string{"id": "c"}, "history": []map[string]string{{"channelId": "other", "messageId": "m1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				rg.registered("other", "c")
				opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
				rg.srv.expect("open", "c").answer(tc.answer)
				res := recv(t, opening)
				want := `Failed to open channel: Server "s" answered channels/open for c with a different channel; c is not marked open, and nothing in the answer is used (it stays selected for opening: a later delivery or reconnect tries again, and channel_close withdraws that)`
				if !res.IsError || res.Text() != want {
					t.Errorf("channel_open =\n%q\nwant\n%q", res.Text(), want)
				}
				rg.srv.expect("close", "other").ok()
				synctest.Wait()
				rg.srv.none()
				if listedOpen(t, rg, "c") {
					t.Error("channel_list says c is open")
				}
				if got := rg.decision("c"); got != "open/agent-tool" {
					t.Errorf("c's decision = %s, want open/agent-tool", got)
				}
				if got := rg.decision("other"); got != "closed/default-closed" {
					t.Errorf("other's decision = %s", got)
				}
			})
		})
	}
}

func TestToolsSubstitutionLeavesOpenOtherAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("other", true))
		rg.registered("c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		rg.srv.expect("open", "c").answer(map[string]any{"channel": map[string]string{"id": "other"}})
		if res := recv(t, opening); !res.IsError {
			t.Errorf("channel_open = %s", res.Text())
		}
		synctest.Wait()
		rg.srv.none() // other is decided open: no close
	})
}

func TestToolsNotConverged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		first := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		// Each answer comes for a target the server has since moved: a
		// stale answer is never applied, so the op goes again, up to
		// MaxAttempts.
		for attempt := 1; attempt <= MaxAttempts; attempt++ {
			req := rg.srv.expect("open", "c")
			upd := desc("c", false)
			upd.Address = json.RawMessage(fmt.Sprintf(`{"room":"c-%d"}`, attempt))
			_, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Updated: []protocol.ChannelDescriptor{upd}}, false)
			start()
			synctest.Wait()
			req.ok()
		}
		res := recv(t, first)
		wantText := "Failed to open channel: Channel c did not converge after 5 lifecycle attempts; its target or desired state kept changing (it stays selected for opening: a later delivery or reconnect tries again, and channel_close withdraws that)"
		if !res.IsError || res.Text() != wantText {
			t.Errorf("first channel_open =\n%q\nwant\n%q", res.Text(), wantText)
		}
		// The updates' work, queued meanwhile as one op, carries out the
		// decision at the newest address.
		again := rg.srv.expect("open", "c")
		if !strings.Contains(string(again.params), `"address":{"room":"c-5"}`) {
			t.Errorf("the last channels/open params = %s", again.params)
		}
		again.ok()
		synctest.Wait()
		rg.srv.none()
		if !listedOpen(t, rg, "c") {
			t.Error("channel_list says c is not open")
		}
		wantLog := []string{"close c", "open c", "open c", "open c", "open c", "open c", "open c"}
		if diff := cmp.Diff(wantLog, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

func TestToolsUnknownAndBadArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		if text, failed := rg.tool("channel_nope", `{}`); !failed || text != "No such channel tool: channel_nope" {
			t.Errorf("unknown tool = %q", text)
		}
		if text, failed := rg.tool(ToolList, `[1]`); !failed || text != "The arguments must be a JSON object. Nothing was done." {
			t.Errorf("array arguments = %q", text)
		}
		for _, name := range []string{ToolList, ToolOpen, ToolClose, ToolDecline, ToolPublish} {
			if !IsTool(name) {
				t.Errorf("IsTool(%s) = false", name)
			}
		}
		if IsTool("think") {
			t.Error("IsTool(think) = true")
		}
		var names []string
		for _, tool := range Tools() {
			names = append(names, tool.Name)
			var schema map[string]any
			if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
				t.Errorf("%s's schema: %v", tool.Name, err)
			}
		}
		if diff := cmp.Diff([]string{ToolList, ToolOpen, ToolClose, ToolDecline, ToolPublish}, names); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
	})
}
