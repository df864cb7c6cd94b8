package channels

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
)

// The seed's change (seeds/000), piece by piece: each test here fails
// when the piece its name says is taken out.

const hiFailed = `Not sent to c (#c): channel is closed and open failed: the server answered: no room`

func TestPutBackAfterFailedDeliveryOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		out := rg.publishAsync("c")
		rg.srv.expect("open", "c").fail("no room")
		o := recv(t, out)
		if want := hiFailed + ". Nothing was posted."; o.Text != want || o.Status != Failed {
			t.Errorf("publish = %s %q\nwant %q", o.Status, o.Text, want)
		}
		// Put back, and carried out on the server: the open may have
		// reached it.
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s, want closed/default-closed", got)
		}
		if diff := cmp.Diff([]string{"close c", "open c", "close c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		rg.checkReplay()
	})
}

func TestPutBackRestoresReplacedSource(t *testing.T) {
	for _, tc := range []struct{ tool, args, want string }{
		{ToolClose, `{"channelId":"c"}`, "closed/agent-tool"},
		{ToolDecline, `{"channelId":"c","messageId":"m"}`, "closed/invitation-declined"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				rg.registered("c")
				if text, failed := rg.tool(tc.tool, tc.args); failed {
					t.Fatal(text)
				}
				if tc.tool == ToolDecline {
					rg.srv.expect("close", "c").ok()
				}
				synctest.Wait()
				out := rg.publishAsync("c")
				rg.srv.expect("open", "c").fail("no room")
				recv(t, out)
				rg.srv.expect("close", "c").ok()
				synctest.Wait()
				if got := rg.decision("c"); got != tc.want {
					t.Errorf("decision = %s, want %s", got, tc.want)
				}
				rg.checkReplay()
			})
		})
	}
}

func TestPutBackDefaultWhenNoRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Registered while this host did not direct the lifecycle: no
		// decision on record.
		rg := newRig(t, "channels.register", "channels.publish")
		rg.register(desc("c", false))
		synctest.Wait()
		if got := rg.decision("c"); got != "none" {
			t.Fatalf("decision = %s, want none", got)
		}
		rg.srv.setGrant("channels.lifecycle", true)
		out := rg.publishAsync("c")
		rg.srv.expect("open", "c").fail("no room")
		recv(t, out)
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s, want closed/default-closed", got)
		}
	})
}

func TestAgentCloseDuringOpenStands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		out := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		synctest.Wait()
		open.fail("no room")
		o := recv(t, out)
		if want := hiFailed + "; a newer decision about the channel was made while the open was out, and it stands. Nothing was posted."; o.Text != want {
			t.Errorf("publish = %q\nwant %q", o.Text, want)
		}
		rg.srv.expect("close", "c").ok()
		if res := recv(t, closing); res.IsError || !strings.Contains(res.Text(), `"closed"`) {
			t.Errorf("channel_close = %s", res.Text())
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/agent-tool" {
			t.Errorf("decision = %s, want closed/agent-tool", got)
		}
	})
}

func TestAgentOpenDuringOpenStands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		out := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		synctest.Wait()
		open.fail("no room")
		if o := recv(t, out); !strings.Contains(o.Text, textOvertaken) {
			t.Errorf("publish = %q, want it overtaken", o.Text)
		}
		rg.srv.expect("open", "c").ok()
		if res := recv(t, opening); res.IsError {
			t.Errorf("channel_open = %s", res.Text())
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "open/agent-tool" {
			t.Errorf("decision = %s, want open/agent-tool", got)
		}
	})
}

func TestLiftAfterPutBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during func(rg *rig)
		want   string
		text   string
	}{
		{"re-announced initially open", func(rg *rig) { rg.register(desc("c", true)) }, "open/server-bootstrap", "the channel is selected for opening again, as its server announces it open"},
		{"policy admits it", func(rg *rig) { rg.admit("c", true) }, "open/subscription-policy", "the channel is selected for opening again, as the subscription policy admits it"},
		{"removed and added again initially open", func(rg *rig) {
			res, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"c"}}, false)
			start()
			if !res.Results[0].Accepted {
				rg.t.Fatal(res)
			}
			rg.register(desc("c", true))
		}, "open/server-bootstrap", "the channel is selected for opening again, as its server announces it open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				rg.registered("c")
				out := rg.publishAsync("c")
				open := rg.srv.expect("open", "c")
				tc.during(rg)
				synctest.Wait()
				open.fail("no room")
				o := recv(t, out)
				if want := hiFailed + "; " + tc.text + ". Nothing was posted."; o.Text != want {
					t.Errorf("publish = %q\nwant %q", o.Text, want)
				}
				rg.srv.expect("open", "c").ok()
				synctest.Wait()
				rg.srv.none()
				if got := rg.decision("c"); got != tc.want {
					t.Errorf("decision = %s, want %s", got, tc.want)
				}
				if diff := cmp.Diff([]string{"close c", "open c", "open c"}, rg.srv.log()); diff != "" {
					t.Errorf("requests (-want +got):\n%s", diff)
				}
				rg.checkReplay()
			})
		})
	}
}

func TestLiftLeavesAgentDecisionPutBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		rg.tool(ToolClose, `{"channelId":"c"}`)
		out := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		rg.register(desc("c", true))
		synctest.Wait()
		open.fail("no room")
		if o := recv(t, out); strings.Contains(o.Text, "selected for opening") {
			t.Errorf("publish = %q, says the channel is selected", o.Text)
		}
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		if got := rg.decision("c"); got != "closed/agent-tool" {
			t.Errorf("decision = %s, want closed/agent-tool", got)
		}
	})
}

func TestLiftUnrecordedLeavesDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		out := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		rg.register(desc("c", true))
		synctest.Wait()
		rg.st.failAfter(1) // the put-back is recorded; the lift is not
		open.fail("no room")
		if o := recv(t, out); o.Text != hiFailed+". Nothing was posted." {
			t.Errorf("publish = %q", o.Text)
		}
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s, want closed/default-closed", got)
		}
	})
}

func TestPutBackUnrecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		out := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		rg.st.setFail(true)
		open.fail("no room")
		o := recv(t, out)
		if want := hiFailed + "; the channel stays selected for opening, as the host couldn't record undoing that: a later delivery or reconnect tries again. Nothing was posted."; o.Text != want {
			t.Errorf("publish = %q\nwant %q", o.Text, want)
		}
		synctest.Wait()
		rg.srv.none() // the decision stays; no close is sent
		if got := rg.decision("c"); got != "open/opened-by-delivery" {
			t.Errorf("decision = %s, want open/opened-by-delivery", got)
		}
	})
}

func TestQueuedWorkCarriesOutPutBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Two deliveries in flight on one closed channel, the first open
		// failing: the second waits on queued work, which carries out the
		// put-back: exactly one close goes out.
		rg := newRig(t)
		rg.registered("c")
		first := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		second := rg.publishAsync("c")
		synctest.Wait()
		open.fail("no room")
		recv(t, first)
		rg.srv.expect("close", "c").ok()
		o := recv(t, second)
		if want := "Not sent to c (#c): lifecycle work prevented delivery: lifecycle work queued for the channel left it closed, so this delivery didn't open it; call channel_open to open it, then send again. Nothing was posted."; o.Text != want {
			t.Errorf("second publish = %q\nwant %q", o.Text, want)
		}
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"close c", "open c", "close c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

func TestWorkQueuedBeforeRemovalDoesNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		out := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		rg.register(desc("c", false)) // reconcile work queued behind the open
		res, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"c"}}, false)
		start()
		if !res.Results[0].Accepted {
			t.Fatal(res)
		}
		// Back, while this host does not direct the lifecycle: nothing
		// new is queued.
		rg.srv.setGrant("channels.lifecycle", false)
		rg.register(desc("c", false))
		rg.srv.setGrant("channels.lifecycle", true)
		synctest.Wait()
		open.fail("no room")
		recv(t, out)
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s", got)
		}
	})
}

func TestIncidentalOpenWithoutLifecycleRecordsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, "channels.register", "channels.publish")
		rg.register(desc("c", false))
		out := rg.publishAsync("c")
		rg.srv.expect("publish", "c").ok()
		if o := recv(t, out); o.Status != Delivered {
			t.Errorf("publish = %s %q", o.Status, o.Text)
		}
		rg.reply("c")
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "none" {
			t.Errorf("decision = %s, want none", got)
		}
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices = %+v", n)
		}
	})
}

func TestReplyIntoGoneServerRecordsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		rg.reg.Disconnected("s", true)
		rg.reply("c")
		synctest.Wait()
		rg.srv.none()
		// Nothing decided, nothing registered: the registry keeps
		// nothing of it.
		if got := rg.decision("c"); got != "none" {
			t.Errorf("decision = %s", got)
		}
		if n := len(logRecords(t, rg)); n != 0 {
			t.Errorf("the log has %d records", n)
		}
	})
}

func TestChannelOpenWithoutLifecycleRecordsDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, "channels.register")
		rg.register(desc("c", false))
		text, failed := rg.tool(ToolOpen, `{"channelId":"c"}`)
		want := `Failed to open channel: channels.lifecycle not in "s"'s effective grant (§14.1): the server opens and closes its channels itself, so no open was sent; your decision to open it is recorded.`
		if !failed || text != want {
			t.Errorf("channel_open = %q\nwant %q", text, want)
		}
		if got := rg.decision("c"); got != "open/agent-tool" {
			t.Errorf("decision = %s, want open/agent-tool", got)
		}
	})
}

func TestChannelOpenDecisionOutlivesFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		rg.srv.expect("open", "c").fail("no room")
		res := recv(t, opening)
		want := "Failed to open channel: the server answered: no room (it stays selected for opening: a later delivery or reconnect tries again, and channel_close withdraws that)"
		if res.Text() != want {
			t.Errorf("channel_open = %q\nwant %q", res.Text(), want)
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "open/agent-tool" {
			t.Errorf("decision = %s, want open/agent-tool", got)
		}
	})
}

func TestCloseKeepsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.reg.AddServer("s", rg.srv, ServerConfig{Timeout: DefaultTimeout})
		rg.register(desc("c", false))
		rg.srv.expect("close", "c") // never answered
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		res := recv(t, closing)
		if want := textCloseFailed("no answer in time."); res.Text() != want {
			t.Errorf("channel_close = %q\nwant %q", res.Text(), want)
		}
	})
}

func TestReplyNotices(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(rg *rig, open *call)
		want   []Notice
	}{
		{"opened", func(rg *rig, open *call) { open.ok() },
			[]Notice{{Kind: NoticeOpened, Cause: SourceOpenedByReply, Server: "s", Agent: "a", Channels: []ChannelRef{{"c", "#c"}}}}},
		{"failed", func(rg *rig, open *call) {
			open.fail("no room")
			rg.srv.expect("close", "c").ok()
		}, []Notice{{Kind: NoticeReplyOpenFailed, Cause: SourceOpenedByReply, Server: "s", Agent: "a", Channels: []ChannelRef{{"c", "#c"}},
			Tool: "send_message", Opening: true, Reason: "the server answered: no room."}}},
		{"failed, put-back unrecorded", func(rg *rig, open *call) {
			rg.st.setFail(true)
			open.fail("no room")
		}, []Notice{{Kind: NoticeReplyOpenFailed, Cause: SourceOpenedByReply, Server: "s", Agent: "a", Channels: []ChannelRef{{"c", "#c"}},
			Tool: "send_message", Opening: true, SelectedForOpening: SelectedUnrecorded, Reason: "the server answered: no room."}}},
		{"failed, lifted", func(rg *rig, open *call) {
			rg.admit("c", true)
			open.fail("no room")
			rg.srv.expect("open", "c").ok()
		}, []Notice{{Kind: NoticeReplyOpenFailed, Cause: SourceOpenedByReply, Server: "s", Agent: "a", Channels: []ChannelRef{{"c", "#c"}},
			Tool: "send_message", Opening: true, SelectedForOpening: SelectedSubscriptionPolicy, Reason: "the server answered: no room."}}},
		{"failed after the grant dropped", func(rg *rig, open *call) {
			rg.srv.setGrant("channels.lifecycle", false)
			open.fail("connection lost")
		}, []Notice{{Kind: NoticeReplyOpenFailed, Cause: SourceOpenedByReply, Server: "s", Agent: "a", Channels: []ChannelRef{{"c", "#c"}},
			Tool: "send_message", Opening: true, Reason: "the server answered: connection lost."}}},
		{"overtaken by the agent's close", func(rg *rig, open *call) {
			closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
			synctest.Wait()
			open.fail("no room")
			rg.srv.expect("close", "c").ok()
			recv(rg.t, closing)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				rg.registered("c")
				rg.reply("c")
				tc.answer(rg, rg.srv.expect("open", "c"))
				synctest.Wait()
				rg.srv.none()
				if diff := cmp.Diff(tc.want, rg.takeNotices()); diff != "" {
					t.Errorf("notices (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestReplyReconfirmFailureNoNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.register(desc("c", true))
		rg.srv.expect("open", "c").fail("flaky") // the transport is unconfirmed
		synctest.Wait()
		rg.reply("c")
		rg.srv.expect("open", "c").fail("flaky")
		synctest.Wait()
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices = %+v, want none for a reconfirm", n)
		}
		if got := rg.decision("c"); got != "open/server-bootstrap" {
			t.Errorf("decision = %s", got)
		}
	})
}

func TestRestartRestoresDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("a", "b")
		rg.tool(ToolClose, `{"channelId":"a"}`)
		opening := rg.toolAsync(ToolOpen, `{"channelId":"b"}`)
		rg.srv.expect("open", "b").ok()
		recv(t, opening)
		before := rg.reg.Decisions()
		rg.reg.Close()
		rg.open()
		if diff := cmp.Diff(before, rg.reg.Decisions()); diff != "" {
			t.Errorf("decisions after restart (-before +after):\n%s", diff)
		}
		// The agent closed a; its server registers it again as
		// initially open: it stays closed.
		rg.register(desc("a", true))
		rg.srv.expect("close", "a").ok()
		synctest.Wait()
		if got := rg.decision("a"); got != "closed/agent-tool" {
			t.Errorf("decision = %s, want closed/agent-tool", got)
		}
		if !slices.ContainsFunc(rg.reg.Decisions(), func(d Decision) bool { return d.Channel == "b" && d.Source == SourceAgentTool }) {
			t.Error("b's decision was lost")
		}
	})
}

// TestQueuedWorkFailureNamesDecision: queued work no one waits for that
// fails is logged with the decision it was carrying out, so a lifted open
// that fails is not logged as a close.
func TestQueuedWorkFailureNamesDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		out := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		rg.admit("c", true)
		open.fail("no room")
		recv(t, out)
		rg.srv.expect("open", "c").fail("still no room") // the lifted open
		synctest.Wait()
		recs := rg.logs.Find("channel lifecycle work failed")
		if len(recs) != 1 || recs[0].Attr("decision") != "open" || recs[0].Attr("channel") != "c" {
			t.Errorf("log = %v, want one failure naming the decision open", recs)
		}
	})
}
