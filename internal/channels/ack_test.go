package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// channel_decline's acknowledge (channels/acknowledge): the request sent,
// what the agent reads, and the decline's record.

const methodAck = protocol.MethodChannelsAcknowledge

// declined returns the records appended from before on, one line each.
func declinedRecords(t *testing.T, rg *rig, before int) []string {
	t.Helper()
	var got []string
	for _, r := range logRecords(t, rg)[before:] {
		got = append(got, fmt.Sprintf("%s %s/%s %s/%s msg=%q ack=%q", r.Kind, r.Server, r.Channel, r.State, r.Source, r.MessageID, r.Acknowledgment))
	}
	return got
}

// checkDeclined checks the records a decline of c's m7 appended: the
// decision, then the decline with ack.
func checkDeclined(t *testing.T, rg *rig, before int, ack string) {
	t.Helper()
	want := []string{
		`decision s/c closed/invitation-declined msg="" ack=""`,
		fmt.Sprintf(`%s s/c / msg="m7" ack=%q`, store.KindDeclined, ack),
	}
	if diff := cmp.Diff(want, declinedRecords(t, rg, before)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if got := rg.decision("c"); got != "closed/invitation-declined" {
		t.Errorf("decision = %s, want closed/invitation-declined", got)
	}
}

// checkJSON checks that got is the JSON want.
func checkJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s %s: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s %s: %v", what, want, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

const ackArgs = `{"channelId":"c","messageId":"m7","acknowledge":"👀"}`

// declineWithAck declines c's m7 with an acknowledgment on a rig granting
// channels.acknowledge, checks the request, answers it with answer, and
// returns the tool's result.
func declineWithAck(t *testing.T, rg *rig, answer func(*call)) protocol.CallToolResult {
	t.Helper()
	res := rg.toolAsync(ToolDecline, ackArgs)
	// The decline's close goes out on the channel's lane, the
	// acknowledgment from the tool: in no set order.
	calls := takeCalls(t, rg.srv, 2)
	if diff := cmp.Diff([]string{methodAck + " c", "close c"}, callKeys(calls)); diff != "" {
		t.Fatalf("requests (-want +got):\n%s", diff)
	}
	calls["close c"].ok()
	ack := calls[methodAck+" c"]
	checkJSON(t, "channels/acknowledge params", ack.params, `{"channelId":"c","messageId":"m7","intent":"seen-not-opening","value":"👀"}`)
	answer(ack)
	return recv(t, res)
}

// newAckRig is a rig whose server is granted channels.acknowledge, with c
// registered closed.
func newAckRig(t *testing.T) (*rig, int) {
	t.Helper()
	rg := newRig(t, rigCaps("channels.acknowledge")...)
	rg.registered("c")
	return rg, len(logRecords(t, rg))
}

func TestDeclineAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, before := newAckRig(t)
		res := declineWithAck(t, rg, func(c *call) {
			c.answer(map[string]any{"acknowledged": true, "representation": "👀"})
		})
		want := `{"acknowledged":true,"channelId":"c","representation":"👀","status":"remained closed"}`
		if res.IsError || res.Text() != want {
			t.Errorf("channel_decline = %s (isError %v)\nwant %s", res.Text(), res.IsError, want)
		}
		synctest.Wait()
		rg.srv.none()
		checkDeclined(t, rg, before, "👀")
		rg.checkReplay()
	})
}

// TestDeclineAcknowledgedRepresentation: the record holds what the server
// says it posted, which may differ from what was asked.
func TestDeclineAcknowledgedRepresentation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, before := newAckRig(t)
		res := declineWithAck(t, rg, func(c *call) {
			c.answer(map[string]any{"acknowledged": true, "representation": ":eyes:"})
		})
		want := `{"acknowledged":true,"channelId":"c","representation":":eyes:","status":"remained closed"}`
		if res.IsError || res.Text() != want {
			t.Errorf("channel_decline = %s (isError %v)\nwant %s", res.Text(), res.IsError, want)
		}
		synctest.Wait()
		checkDeclined(t, rg, before, ":eyes:")
	})
}

// TestDeclineAcknowledgedNoRepresentation: acknowledged with no
// representation: none is shown, and the record holds the value sent.
func TestDeclineAcknowledgedNoRepresentation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, before := newAckRig(t)
		res := declineWithAck(t, rg, func(c *call) { c.answer(map[string]any{"acknowledged": true}) })
		want := `{"acknowledged":true,"channelId":"c","status":"remained closed"}`
		if res.IsError || res.Text() != want {
			t.Errorf("channel_decline = %s (isError %v)\nwant %s", res.Text(), res.IsError, want)
		}
		synctest.Wait()
		checkDeclined(t, rg, before, "👀")
	})
}

func TestDeclineAcknowledgeRefusedOrFailed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(*call)
		want   string // acknowledgmentError
	}{
		{"refused with a reason", func(c *call) {
			c.answer(map[string]any{"acknowledged": false, "reason": "no such message"})
		}, "no such message"},
		{"refused with no reason", func(c *call) {
			c.answer(map[string]any{"acknowledged": false})
		}, "The channel integration could not post the acknowledgment."},
		{"refused, an empty answer", func(c *call) {
			c.answer(map[string]any{})
		}, "The channel integration could not post the acknowledgment."},
		{"error answer", func(c *call) { c.fail("method not found") },
			"The channel integration could not post the acknowledgment."},
		{"no answer", func(*call) {},
			"The channel integration could not post the acknowledgment."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg, before := newAckRig(t)
				start := time.Now()
				res := declineWithAck(t, rg, tc.answer)
				if res.IsError {
					t.Errorf("channel_decline failed: %s", res.Text())
				}
				var out map[string]any
				if err := json.Unmarshal([]byte(res.Text()), &out); err != nil {
					t.Fatalf("channel_decline %s: %v", res.Text(), err)
				}
				want := map[string]any{"acknowledged": false, "acknowledgmentError": tc.want, "channelId": "c", "status": "remained closed"}
				if diff := cmp.Diff(want, out); diff != "" {
					t.Errorf("channel_decline (-want +got):\n%s", diff)
				}
				if tc.name == "no answer" {
					if waited := time.Since(start); waited != DefaultTimeout {
						t.Errorf("gave up after %v, want the server's timeout %v", waited, DefaultTimeout)
					}
				}
				synctest.Wait()
				rg.srv.none()
				checkDeclined(t, rg, before, "")
			})
		})
	}
}

// TestDeclineAcknowledgeCanceled: the caller's context ending stops the
// wait for the server's answer.
func TestDeclineAcknowledgeCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, before := newAckRig(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan protocol.CallToolResult, 1)
		go func() { done <- rg.reg.CallTool(ctx, ToolDecline, json.RawMessage(ackArgs), Caller{}) }()
		calls := takeCalls(t, rg.srv, 2)
		calls["close c"].ok()
		if calls[methodAck+" c"] == nil {
			t.Fatalf("requests %v", callKeys(calls))
		}
		synctest.Wait()
		cancel()
		res := recv(t, done)
		want := `{"acknowledged":false,"acknowledgmentError":"The channel integration could not post the acknowledgment.","channelId":"c","status":"remained closed"}`
		if res.IsError || res.Text() != want {
			t.Errorf("channel_decline = %s (isError %v)\nwant %s", res.Text(), res.IsError, want)
		}
		synctest.Wait()
		checkDeclined(t, rg, before, "")
	})
}

func TestDeclineAcknowledgeNotGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, rigCaps("channels.acknowledge")...)
		rg.registered("c")
		rg.srv.setGrant("channels.acknowledge", false)
		before := len(logRecords(t, rg))
		res := rg.toolAsync(ToolDecline, ackArgs)
		rg.srv.expect("close", "c").ok()
		got := recv(t, res)
		want := `{"acknowledged":false,"acknowledgmentError":"channels.acknowledge not in \"s\"'s effective grant (§14.1)","channelId":"c","status":"remained closed"}`
		if got.IsError || got.Text() != want {
			t.Errorf("channel_decline = %s (isError %v)\nwant %s", got.Text(), got.IsError, want)
		}
		synctest.Wait()
		rg.srv.none()
		for _, l := range rg.srv.log() {
			if l == methodAck+" c" {
				t.Errorf("channels/acknowledge was sent without the grant: %v", rg.srv.log())
			}
		}
		checkDeclined(t, rg, before, "")
	})
}

func TestDeclineNoAcknowledgeArgument(t *testing.T) {
	for _, args := range []string{
		`{"channelId":"c","messageId":"m7"}`,
		`{"channelId":"c","messageId":"m7","acknowledge":""}`,
		`{"channelId":"c","messageId":"m7","acknowledge":null}`,
	} {
		t.Run(args, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg, before := newAckRig(t)
				res := rg.toolAsync(ToolDecline, args)
				rg.srv.expect("close", "c").ok()
				got := recv(t, res)
				if want := `{"acknowledged":false,"channelId":"c","status":"remained closed"}`; got.IsError || got.Text() != want {
					t.Errorf("channel_decline = %s (isError %v)\nwant %s", got.Text(), got.IsError, want)
				}
				synctest.Wait()
				rg.srv.none()
				checkDeclined(t, rg, before, "")
			})
		})
	}
}

// TestDeclineAcknowledgedTwice: a second decline of the same channel
// writes no new decision, only the decline with its own acknowledgment.
func TestDeclineAcknowledgedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, before := newAckRig(t)
		declineWithAck(t, rg, func(c *call) { c.answer(map[string]any{"acknowledged": true}) })
		synctest.Wait()
		checkDeclined(t, rg, before, "👀")
		before = len(logRecords(t, rg))
		res := rg.toolAsync(ToolDecline, `{"channelId":"c","messageId":"m8","acknowledge":"ok"}`)
		// The decline sends the closed decision again, as every decline
		// does.
		calls := takeCalls(t, rg.srv, 2)
		if diff := cmp.Diff([]string{methodAck + " c", "close c"}, callKeys(calls)); diff != "" {
			t.Fatalf("requests (-want +got):\n%s", diff)
		}
		calls["close c"].ok()
		ack := calls[methodAck+" c"]
		checkJSON(t, "channels/acknowledge params", ack.params, `{"channelId":"c","messageId":"m8","intent":"seen-not-opening","value":"ok"}`)
		ack.answer(map[string]any{"acknowledged": true, "representation": "✅"})
		got := recv(t, res)
		if want := `{"acknowledged":true,"channelId":"c","representation":"✅","status":"remained closed"}`; got.IsError || got.Text() != want {
			t.Errorf("second channel_decline = %s (isError %v)\nwant %s", got.Text(), got.IsError, want)
		}
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{fmt.Sprintf(`%s s/c / msg="m8" ack="✅"`, store.KindDeclined)}, declinedRecords(t, rg, before)); diff != "" {
			t.Errorf("records of the second decline (-want +got):\n%s", diff)
		}
	})
}

// TestDeclineAcknowledgedDeclineUnrecorded: the decline record failing
// after the acknowledgment went out is logged; the agent still reads the
// acknowledgment, and the closed decision stands.
func TestDeclineAcknowledgedDeclineUnrecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, before := newAckRig(t)
		rg.st.failAfter(1) // the decision is recorded, the decline is not
		res := declineWithAck(t, rg, func(c *call) {
			c.answer(map[string]any{"acknowledged": true, "representation": "👀"})
		})
		rg.st.setFail(false)
		want := `{"acknowledged":true,"channelId":"c","representation":"👀","status":"remained closed"}`
		if res.IsError || res.Text() != want {
			t.Errorf("channel_decline = %s (isError %v)\nwant %s", res.Text(), res.IsError, want)
		}
		synctest.Wait()
		if diff := cmp.Diff([]string{`decision s/c closed/invitation-declined msg="" ack=""`}, declinedRecords(t, rg, before)); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
		if got := rg.decision("c"); got != "closed/invitation-declined" {
			t.Errorf("decision = %s", got)
		}
		rg.logs.One(t, "a declined invitation could not be recorded (the channel's closed decision is)")
	})
}

// TestSeen: with the server's acknowledgeSeen set and the grant, a turn's
// pickup of an addressed message sends channels/acknowledge with intent
// "seen"; without either, nothing.
func TestSeen(t *testing.T) {
	t.Run("sent", func(t *testing.T) {
		rg := newRig(t, rigCaps("channels.acknowledge")...)
		rg.reg.AddServer("s", rg.srv, ServerConfig{AcknowledgeSeen: "👀"})
		done := seenAsync(rg, SeenMessage{"s", "c", "m1"}) // it waits for the answer (seen_test.go)
		c := <-rg.srv.calls
		if c.method != methodAck {
			t.Fatalf("sent %s", c)
		}
		checkJSON(t, "channels/acknowledge params", c.params, `{"channelId":"c","messageId":"m1","intent":"seen","value":"👀"}`)
		c.answer(map[string]any{"acknowledged": true, "representation": "👀"})
		recv(t, done)
	})
	for name, caps := range map[string][]string{"no setting": rigCaps("channels.acknowledge"), "no grant": rigCaps()} {
		t.Run(name, func(t *testing.T) {
			rg := newRig(t, caps...)
			if name == "no grant" {
				rg.reg.AddServer("s", rg.srv, ServerConfig{AcknowledgeSeen: "👀"})
			}
			rg.reg.SeenAll([]SeenMessage{{"s", "c", "m1"}})
			rg.reg.Close()
			select {
			case c := <-rg.srv.calls:
				t.Errorf("sent %s", c)
			default:
			}
		})
	}
}
