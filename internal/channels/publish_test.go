package channels

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Publishing (RFC-011 §3–§5; anchor-host.md §3.7, §4.4): the tool's
// arguments, where a threadId may go, and how a receipt is judged.

// pubDesc is a channel declaring publish target ("exact", "root", or ""
// for none).
func pubDesc(id, target string) protocol.ChannelDescriptor {
	d := desc(id, false)
	if target != "" {
		d.Capabilities = json.RawMessage(`{"publish":{"target":"` + target + `"}}`)
	}
	return d
}

var pubHiContent = []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi"}`)}

// publishTo publishes "hi" into s's channel id, at thread (nil: no place
// asked; "": the root), on a goroutine.
func publishTo(rg *rig, id string, thread *string, caller Caller) <-chan PublishOutcome {
	ch := make(chan PublishOutcome, 1)
	go func() { ch <- rg.reg.Publish(context.Background(), "s", id, thread, pubHiContent, caller) }()
	return ch
}

func thr(s string) *string { return &s }

func TestPublishToolArgumentErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, pubDesc("c", "exact"))
		for _, tc := range []struct{ args, want string }{
			{`{"channelId":"c"}`, "Either content or text parameter is required"},
			{`{"channelId":"c","text":""}`, "Either content or text parameter is required"},
			{`{"channelId":"c","content":[]}`, "Either content or text parameter is required"},
			{`{"channelId":"c","text":5}`, "Either content or text parameter is required"},
			{`{}`, "Either content or text parameter is required"},
			{`{"text":"hi"}`, "No channelId given, and you have no current speech route: name the channel to publish to. Nothing was sent."},
			{`{"text":"hi","channelId":null}`, "No channelId given, and you have no current speech route: name the channel to publish to. Nothing was sent."},
			{`{"text":"hi","serverId":"s"}`, "serverId needs the channelId it belongs to."},
			{`{"text":"hi","threadId":"t1"}`, "threadId needs the channelId it belongs to."},
			{`{"text":"hi","threadId":null}`, "threadId needs the channelId it belongs to."},
			{`{"text":"hi","channelId":""}`, "channelId must name a channel (leave it out to publish to your speech route). Nothing was sent."},
			{`{"text":"hi","channelId":7}`, "channelId must name a channel (leave it out to publish to your speech route). Nothing was sent."},
			{`{"text":"hi","channelId":"c","threadId":""}`, "threadId must be a thread's id, or null for the channel root. Nothing was sent."},
			{`{"text":"hi","channelId":"c","threadId":5}`, "threadId must be a thread's id, or null for the channel root. Nothing was sent."},
			{`{"text":"hi","channelId":"x"}`, "Channel not found: x"},
			{`{"text":"hi","channelId":"c","serverId":"t"}`, "Channel not found: c on server t"},
		} {
			text, failed := rg.tool(ToolPublish, tc.args)
			if !failed || text != tc.want {
				t.Errorf("channel_publish %s = %q (isError %v)\nwant %q", tc.args, text, failed, tc.want)
			}
		}
		synctest.Wait()
		rg.srv.none()
	})
}

func TestPublishThreadToUndeclaredChannel(t *testing.T) {
	for _, tc := range []struct {
		name, args, want string
	}{
		{"thread", `{"channelId":"c","text":"hi","threadId":"t1"}`,
			"Not sent to c (#c), thread t1: #c (c)'s connector doesn't declare where a post lands (MCPL RFC-011), so a post into thread t1 could land anywhere; this host doesn't send it there. Nothing was posted."},
		{"root", `{"channelId":"c","text":"hi","threadId":null}`,
			"Not sent to c (#c), at the channel root: #c (c)'s connector doesn't declare where a post lands (MCPL RFC-011), so a post into the channel root could land anywhere; this host doesn't send it there. Nothing was posted."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				openedChannel(rg, pubDesc("c", ""))
				text, failed := rg.tool(ToolPublish, tc.args)
				if !failed || !strings.Contains(text, "RFC-011") {
					t.Errorf("channel_publish = %q (isError %v), want a refusal naming RFC-011", text, failed)
				}
				if text != tc.want {
					t.Errorf("channel_publish =\n%q\nwant\n%q", text, tc.want)
				}
				synctest.Wait()
				rg.srv.none()
			})
		})
	}
}

func TestPublishUndeclaredThreadRefusedBeforeOpening(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A refused place opens nothing: the closed channel stays closed.
		rg := newRig(t)
		rg.registered("c")
		o := recv(t, publishTo(rg, "c", thr("t1"), Caller{}))
		if o.Status != Failed || !strings.Contains(o.Text, "MCPL RFC-011") {
			t.Errorf("publish = %s %q", o.Status, o.Text)
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s", got)
		}
	})
}

func TestPublishRootChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, pubDesc("r", "root"))
		text, failed := rg.tool(ToolPublish, `{"channelId":"r","text":"hi","threadId":"t1"}`)
		want := "Not sent to r (#r), thread t1: #r (r) has no threads (its connector declares root), so a post into thread t1 is refused. Nothing was posted."
		if !failed || text != want {
			t.Errorf("channel_publish =\n%q\nwant\n%q", text, want)
		}
		synctest.Wait()
		rg.srv.none()

		// null: the channel root, sent as null.
		done := rg.toolAsync(ToolPublish, `{"channelId":"r","text":"hi","threadId":null}`)
		pub := rg.srv.expect("publish", "r")
		var p map[string]json.RawMessage
		if err := json.Unmarshal(pub.params, &p); err != nil {
			t.Fatal(err)
		}
		if v, present := p["threadId"]; !present || string(v) != "null" {
			t.Errorf("channels/publish params %s: threadId must be null", pub.params)
		}
		if string(p["content"]) != `[{"type":"text","text":"hi"}]` {
			t.Errorf("channels/publish content = %s", p["content"])
		}
		pub.answer(map[string]any{"delivered": false, "reason": "closed for posting"})
		if res := recv(t, done); !res.IsError {
			t.Errorf("channel_publish = %s", res.Text())
		}
	})
}

func TestPublishNoThreadSendsNoThreadKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, pubDesc("c", ""))
		done := rg.toolAsync(ToolPublish, `{"channelId":"c","content":[{"type":"text","text":"a"},{"type":"image","data":"x","mimeType":"image/png"}]}`)
		pub := rg.srv.expect("publish", "c")
		var p map[string]json.RawMessage
		if err := json.Unmarshal(pub.params, &p); err != nil {
			t.Fatal(err)
		}
		if _, present := p["threadId"]; present {
			t.Errorf("channels/publish params %s carry threadId", pub.params)
		}
		if string(p["content"]) != `[{"type":"text","text":"a"},{"type":"image","data":"x","mimeType":"image/png"}]` {
			t.Errorf("content = %s", p["content"])
		}
		pub.ok()
		res := recv(t, done)
		want := `{"channelId":"c","channelLabel":"#c","delivered":true,"messageId":"m1","serverId":"s","status":"delivered"}`
		if res.IsError || res.Text() != want {
			t.Errorf("channel_publish =\n%s\nwant\n%s", res.Text(), want)
		}
	})
}

func TestPublishReceipts(t *testing.T) {
	const place = "c (#c), thread t1"
	unconfirmed := func(reason string) string {
		return "Delivery to " + place + " was not confirmed — it may or may not have been posted: " + reason + ". Check the channel before sending again."
	}
	for _, tc := range []struct {
		name   string
		answer func(c *call)
		status string
		text   string
		msgID  string
	}{
		{"echoed", func(c *call) { c.answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": "t1"}) },
			Delivered, "", "m5"},
		{"no echo", func(c *call) { c.answer(map[string]any{"delivered": true, "messageId": "m5"}) },
			Unconfirmed, `Delivery to c (#c), thread t1 was not confirmed — it may or may not have been posted: server "s" reported delivery but did not say where it posted, not thread t1 (where it landed is unconfirmed). Check the channel before sending again.`, "m5"},
		{"another thread", func(c *call) { c.answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": "t2"}) },
			Unconfirmed, unconfirmed(`server "s" reported delivery but reported posting in thread t2, not thread t1 (where it landed is unconfirmed)`), "m5"},
		{"echo not a string", func(c *call) { c.answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": 9}) },
			Unconfirmed, unconfirmed(`server "s" reported delivery but did not say where it posted, not thread t1 (where it landed is unconfirmed)`), "m5"},
		{"echo empty", func(c *call) { c.answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": ""}) },
			Unconfirmed, unconfirmed(`server "s" reported delivery but answered an empty threadId, not thread t1 (where it landed is unconfirmed)`), "m5"},
		{"echo root", func(c *call) { c.answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": nil}) },
			Unconfirmed, unconfirmed(`server "s" reported delivery but reported posting at the channel root, not thread t1 (where it landed is unconfirmed)`), "m5"},
		{"refused", func(c *call) { c.answer(map[string]any{"delivered": false, "reason": "thread t1 is archived."}) },
			Failed, `Not sent to c (#c), thread t1: server "s" reported delivered:false: thread t1 is archived. Nothing was posted.`, ""},
		{"refused, no reason", func(c *call) { c.answer(map[string]any{"delivered": false}) },
			Failed, `Not sent to c (#c), thread t1: server "s" reported delivered:false. Nothing was posted.`, ""},
		{"refused with a message id", func(c *call) { c.answer(map[string]any{"delivered": false, "messageId": "m5"}) },
			Unconfirmed, unconfirmed(`server "s" reported delivered:false but named posted message m5 (delivery uncertain)`), ""},
		{"garbage", func(c *call) { c.answer("garbage") },
			Unconfirmed, unconfirmed(`server "s" returned no valid delivery receipt (delivery uncertain)`), ""},
		{"empty object", func(c *call) { c.answer(map[string]any{}) },
			Unconfirmed, unconfirmed(`server "s" returned no valid delivery receipt (delivery uncertain)`), ""},
		{"delivered not a bool", func(c *call) { c.answer(map[string]any{"delivered": "yes", "threadId": "t1"}) },
			Unconfirmed, unconfirmed(`server "s" returned no valid delivery receipt (delivery uncertain)`), ""},
		{"not sent", func(c *call) {
			c.reply <- reply{err: &wire.CallError{Outcome: wire.NotSent, Cause: wire.CauseClosed, Server: "s", Method: protocol.MethodChannelsPublish}}
		}, Failed, `Not sent to c (#c), thread t1: channels/publish to "s" not sent: the connection is closed. Nothing was posted.`, ""},
		{"no response", func(c *call) {
			c.reply <- reply{err: &wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseClosed, Server: "s", Method: protocol.MethodChannelsPublish, ID: 4}}
		}, Unconfirmed, unconfirmed(`channels/publish to "s": the connection closed before an answer`), ""},
		{"error answer", func(c *call) { c.fail("no such thread") },
			Unconfirmed, unconfirmed(`the server answered: no such thread`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				openedChannel(rg, pubDesc("c", "exact"))
				out := publishTo(rg, "c", thr("t1"), Caller{})
				pub := rg.srv.expect("publish", "c")
				if !strings.Contains(string(pub.params), `"threadId":"t1"`) {
					t.Errorf("channels/publish params = %s", pub.params)
				}
				tc.answer(pub)
				o := recv(t, out)
				want := PublishOutcome{Status: tc.status, Server: "s", Channel: "c", Label: "#c", MessageID: tc.msgID, Thread: thr("t1"), Text: tc.text}
				if diff := cmp.Diff(want, o, cmpopts.IgnoreUnexported(PublishOutcome{})); diff != "" {
					t.Errorf("outcome (-want +got):\n%s", diff)
				}
				synctest.Wait()
				rg.srv.none()
			})
		})
	}
}

func TestPublishToolDeliveredIntoThread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, pubDesc("c", "exact"))
		done := rg.toolAsync(ToolPublish, `{"channelId":"c","serverId":"s","text":"hi","threadId":"t1"}`)
		rg.srv.expect("publish", "c").answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": "t1"})
		res := recv(t, done)
		want := `{"channelId":"c","channelLabel":"#c","delivered":true,"messageId":"m5","serverId":"s","status":"delivered","threadId":"t1"}`
		if res.IsError || res.Text() != want {
			t.Errorf("channel_publish =\n%s\nwant\n%s", res.Text(), want)
		}
		// Unconfirmed is an error result with the text.
		done = rg.toolAsync(ToolPublish, `{"channelId":"c","text":"hi","threadId":"t1"}`)
		rg.srv.expect("publish", "c").answer(map[string]any{"delivered": true, "messageId": "m6"})
		res = recv(t, done)
		if !res.IsError || !strings.HasPrefix(res.Text(), "Delivery to c (#c), thread t1 was not confirmed") {
			t.Errorf("channel_publish = %q (isError %v)", res.Text(), res.IsError)
		}
	})
}

func TestPublishRootEchoedRoot(t *testing.T) {
	// RFC-011 §5: delivered:true with an echoed threadId equal to the
	// request (null: the root) is delivered.
	for _, target := range []string{"root", "exact"} {
		t.Run(target, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t)
				openedChannel(rg, pubDesc("c", target))
				done := rg.toolAsync(ToolPublish, `{"channelId":"c","text":"hi","threadId":null}`)
				rg.srv.expect("publish", "c").answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": nil})
				res := recv(t, done)
				want := `{"channelId":"c","channelLabel":"#c","delivered":true,"messageId":"m5","serverId":"s","status":"delivered","threadId":null}`
				if res.IsError || res.Text() != want {
					t.Errorf("channel_publish =\n%s\nwant\n%s", res.Text(), want)
				}
			})
		})
	}
}

func TestPublishRootAskedOtherThreadEchoed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, pubDesc("c", "exact"))
		out := publishTo(rg, "c", thr(""), Caller{})
		rg.srv.expect("publish", "c").answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": "t9"})
		o := recv(t, out)
		want := `Delivery to c (#c), at the channel root was not confirmed — it may or may not have been posted: server "s" reported delivery but reported posting in thread t9, not the channel root (where it landed is unconfirmed). Check the channel before sending again.`
		if o.Status != Unconfirmed || o.Text != want {
			t.Errorf("publish = %s %q\nwant %q", o.Status, o.Text, want)
		}
	})
}

func TestPublishNotGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, "channels.register", "channels.lifecycle")
		openedChannel(rg, pubDesc("c", "exact"))
		o := recv(t, publishTo(rg, "c", nil, Caller{}))
		want := `Not sent to c (#c): channels.publish not in "s"'s effective grant (§14.1). Nothing was posted.`
		if o.Status != Failed || o.Text != want {
			t.Errorf("publish = %s %q\nwant %q", o.Status, o.Text, want)
		}
		synctest.Wait()
		rg.srv.none()
	})
}

func TestPublishUnregistered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		o := recv(t, publishTo(rg, "x", nil, Caller{}))
		want := `Not sent to x: no registered channel "x" on server "s". Nothing was posted.`
		if o.Status != Failed || o.Text != want {
			t.Errorf("publish = %s %q\nwant %q", o.Status, o.Text, want)
		}
		synctest.Wait()
		rg.srv.none()
	})
}

func TestPublishOpensClosedChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.register(pubDesc("c", "exact"))
		rg.srv.expect("close", "c").ok()
		synctest.Wait()
		out := publishTo(rg, "c", thr("t1"), Caller{Agent: "a"})
		open := rg.srv.expect("open", "c")
		synctest.Wait()
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices before the open was answered = %+v", n)
		}
		rg.srv.none() // no publish before the open is answered
		open.ok()
		rg.srv.expect("publish", "c").answer(map[string]any{"delivered": true, "messageId": "m5", "threadId": "t1"})
		o := recv(t, out)
		if o.Status != Delivered || o.MessageID != "m5" || o.Text != "" {
			t.Errorf("publish = %+v", o)
		}
		want := []Notice{{Kind: NoticeOpened, Cause: SourceOpenedByDelivery, Server: "s", Agent: "a", Channels: []ChannelRef{{ID: "c", Label: "#c"}}}}
		if diff := cmp.Diff(want, rg.takeNotices()); diff != "" {
			t.Errorf("notices (-want +got):\n%s", diff)
		}
		if got := rg.decision("c"); got != "open/opened-by-delivery" {
			t.Errorf("decision = %s, want open/opened-by-delivery", got)
		}
		if diff := cmp.Diff([]string{"close c", "open c", "publish c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		// Open now: the next publish sends no open and tells no one.
		out = publishTo(rg, "c", nil, Caller{Agent: "a"})
		rg.srv.expect("publish", "c").ok()
		if o := recv(t, out); o.Status != Delivered {
			t.Errorf("second publish = %+v", o)
		}
		synctest.Wait()
		rg.srv.none()
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices on the second publish = %+v", n)
		}
		rg.checkReplay()
	})
}

func TestPublishIntoAgentClosedChannelOpensIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// channel_publish is the agent's own engagement: an agent close
		// is replaced by opened-by-delivery when nothing is queued.
		rg := newRig(t)
		rg.registered("c")
		rg.tool(ToolClose, `{"channelId":"c"}`)
		done := rg.toolAsync(ToolPublish, `{"channelId":"c","text":"hi"}`)
		rg.srv.expect("open", "c").ok()
		rg.srv.expect("publish", "c").ok()
		if res := recv(t, done); res.IsError {
			t.Errorf("channel_publish = %s", res.Text())
		}
		if got := rg.decision("c"); got != "open/opened-by-delivery" {
			t.Errorf("decision = %s", got)
		}
	})
}
