package channels

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/store"
)

// An incidental open whose success comes after the agent closed the
// channel is overtaken: nothing is posted, and no notice says it opened.
func TestDeliveryOpenSupersededByClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		out := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		synctest.Wait()
		open.ok()
		// The close's own work carries out the decision: one close, not
		// one for the open's work and another for the close's.
		rg.srv.expect("close", "c").ok()
		o := recv(t, out)
		if want := "Not sent to c (#c): Channel open was superseded by a newer lifecycle decision. Nothing was posted."; o.Text != want {
			t.Errorf("publish = %q\nwant %q", o.Text, want)
		}
		recv(t, closing)
		synctest.Wait()
		rg.srv.none() // no publish, no second close
		if diff := cmp.Diff([]string{"close c", "open c", "close c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if n := rg.takeNotices(); len(n) != 0 {
			t.Errorf("notices = %+v, want none", n)
		}
		if got := rg.decision("c"); got != "closed/agent-tool" {
			t.Errorf("decision = %s", got)
		}
	})
}

// A delivery whose caller stops waiting still gets its open's outcome
// told: the lane gives the notice.
func TestDeliveryOpenNoticeWithoutWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan PublishOutcome, 1)
		go func() {
			done <- rg.reg.Publish(ctx, "s", "c", nil, []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi"}`)}, Caller{Agent: "a"})
		}()
		open := rg.srv.expect("open", "c")
		cancel()
		o := recv(t, done)
		if !strings.Contains(o.Text, textStoppedWaiting) {
			t.Errorf("publish = %q, want it to say this host stopped waiting", o.Text)
		}
		open.ok()
		synctest.Wait()
		want := []Notice{{Kind: NoticeOpened, Cause: SourceOpenedByDelivery, Server: "s", Agent: "a", Channels: []ChannelRef{{"c", "#c"}}}}
		if diff := cmp.Diff(want, rg.takeNotices()); diff != "" {
			t.Errorf("notices (-want +got):\n%s", diff)
		}
	})
}

// An incidental open decided as the registry closes is never sent, so its
// decision is put back at once.
func TestIncidentalOpenWhileClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		rg.reg.Close()
		o := rg.reg.Publish(context.Background(), "s", "c", nil, []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi"}`)}, Caller{})
		if want := "Not sent to c (#c): channel is closed and open failed: this host is shutting down, so no open was sent. Nothing was posted."; o.Text != want {
			t.Errorf("publish = %q\nwant %q", o.Text, want)
		}
		synctest.Wait()
		rg.srv.none()
		if got := rg.decision("c"); got != "closed/default-closed" {
			t.Errorf("decision = %s, want closed/default-closed", got)
		}
		rg.checkReplay()
	})
}

// Registered channels whose decisions can't be recorded are left
// undecided: no request goes out, and the log names them.
func TestRegisterUnrecordedSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.st.setFail(true)
		res := rg.register(desc("c", true))
		if !res.Results[0].Accepted {
			t.Errorf("results = %+v, want the registration accepted", res.Results)
		}
		synctest.Wait()
		rg.srv.none()
		recs := rg.logs.Find("registered channels left undecided: their decisions could not be recorded, so no lifecycle request is sent until they are registered again")
		if len(recs) != 1 || !strings.Contains(recs[0].Attr("channels"), "c") {
			t.Errorf("log = %v", recs)
		}
		rg.st.setFail(false)
		rg.register(desc("c", true))
		rg.srv.expect("open", "c").ok()
		synctest.Wait()
		if got := rg.decision("c"); got != "open/server-bootstrap" {
			t.Errorf("decision = %s", got)
		}
	})
}

// A decline records the acknowledgment it sent: none, while
// channels.acknowledge has no consumer here; a backscroll under 1 asks for
// no history.
func TestDeclineRecordsNoUnsentAcknowledgment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c", "d")
		if text, failed := rg.tool(ToolDecline, `{"channelId":"c","messageId":"m1","acknowledge":"👀"}`); failed || !strings.Contains(text, `"acknowledged":false`) {
			t.Errorf("channel_decline = %s", text)
		}
		rg.srv.expect("close", "c").ok()
		var declined []store.Record
		rg.st.Replay(context.Background(), func(r store.Record) error {
			if r.Kind == store.KindDeclined {
				declined = append(declined, r)
			}
			return nil
		})
		if len(declined) != 1 || declined[0].MessageID != "m1" || declined[0].Acknowledgment != "" {
			t.Errorf("decline records = %+v, want one for m1 with no acknowledgment", declined)
		}
		opening := rg.toolAsync(ToolOpen, `{"channelId":"d","backscroll":0.5}`)
		open := rg.srv.expect("open", "d")
		if strings.Contains(string(open.params), "history") {
			t.Errorf("channels/open params = %s, want no history", open.params)
		}
		open.ok()
		recv(t, opening)
	})
}
