package channels

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// listedNow is the channel as Snapshot lists it now; the test fails when
// it is not registered.
func listedNow(rg *rig, id string) ListedChannel {
	rg.t.Helper()
	for _, s := range rg.reg.Snapshot() {
		if s.Key == (Key{"s", id}) && s.Listed != nil {
			return *s.Listed
		}
	}
	rg.t.Fatalf("Snapshot lacks a registered %s", id)
	return ListedChannel{}
}

// A failed open is kept beside the decision, which stays open: Snapshot
// (and Channels, for the metrics) show the decision open, the channel not
// open on the server, and the operator's reason, from when it failed
// until a later request for it settles; while a request is out, it says
// which.
func TestFailedOpenShownUntilSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		if l := listedNow(rg, "c"); l.OpenFailed != "" || l.CloseFailed != "" || l.Pending != "" || !l.Lifecycle || !l.Confirmed || !l.FailedAt.IsZero() {
			t.Errorf("after the registration's close: %+v, want nothing failed or out, lifecycle directed", l)
		}
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		open := rg.srv.expect("open", "c")
		synctest.Wait()
		if l := listedNow(rg, "c"); l.Pending != "open" || l.Open {
			t.Errorf("while the open is out: %+v, want pending open, not open", l)
		}
		failedAt := time.Now().UTC()
		open.fail("open of c failed, as scripted")
		if res := recv(t, opening); !res.IsError {
			t.Errorf("channel_open = %q, want a failure", res.Text())
		}
		synctest.Wait()
		l := listedNow(rg, "c")
		if l.Desired != "open" || l.Open || l.Confirmed || l.Pending != "" || l.CloseFailed != "" {
			t.Errorf("after the failed open: %+v, want desired open, not open, nothing out", l)
		}
		if want := "open of c failed, as scripted"; !strings.Contains(l.OpenFailed, want) || !strings.Contains(l.OpenFailed, "-32024") {
			t.Errorf("OpenFailed = %q, want the error answer's code and %q", l.OpenFailed, want)
		}
		if !l.FailedAt.Equal(failedAt) {
			t.Errorf("FailedAt = %v, want %v (the step the answer came in)", l.FailedAt, failedAt)
		}
		if got := rg.decision("c"); got != "open/agent-tool" {
			t.Errorf("decision = %s, want open/agent-tool", got)
		}
		rg.checkReplay() // Channels and Snapshot agree

		// Later, the view is published again (the agent's close, while
		// its request is out): the failure keeps its time.
		time.Sleep(time.Minute)
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		cl := rg.srv.expect("close", "c")
		synctest.Wait()
		if l := listedNow(rg, "c"); l.Pending != "close" || l.OpenFailed == "" || !l.FailedAt.Equal(failedAt) {
			t.Errorf("while the close is out: %+v, want pending close, the open's failure at %v", l, failedAt)
		}
		cl.ok()
		recv(t, closing)
		synctest.Wait()
		if l := listedNow(rg, "c"); l.OpenFailed != "" || l.CloseFailed != "" || !l.FailedAt.IsZero() || l.Pending != "" || l.Desired != "closed" {
			t.Errorf("after the close settled: %+v, want nothing failed", l)
		}

		// A failed close reads as one, and the open that settles next
		// clears it.
		closing = rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		rg.srv.expect("open", "c").ok()
		recv(t, closing)
		closing = rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		rg.srv.expect("close", "c").fail("close refused")
		recv(t, closing)
		synctest.Wait()
		if l := listedNow(rg, "c"); !strings.Contains(l.CloseFailed, "close refused") || l.OpenFailed != "" || l.Open {
			t.Errorf("after the failed close: %+v, want CloseFailed, not open (unconfirmed)", l)
		}
		opening = rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		rg.srv.expect("open", "c").ok()
		recv(t, opening)
		synctest.Wait()
		if l := listedNow(rg, "c"); l.CloseFailed != "" || l.OpenFailed != "" || !l.Open || !l.Confirmed {
			t.Errorf("after the open settled: %+v, want open, nothing failed", l)
		}
	})
}

// A deadline and an open answered for another channel are failures too;
// the registration's removal clears a failure, and a new registration
// starts with none.
func TestFailedOpenDeadlineSubstitutedRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		opening := rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		rg.srv.expect("open", "c") // never answered: its deadline passes
		recv(t, opening)
		synctest.Wait()
		if l := listedNow(rg, "c"); !strings.Contains(l.OpenFailed, "channels/open to \"s\": no answer within 60s") {
			t.Errorf("after the deadline: OpenFailed = %q, want the deadline said", l.OpenFailed)
		}

		opening = rg.toolAsync(ToolOpen, `{"channelId":"c"}`)
		rg.srv.expect("open", "c").answer(map[string]any{"channel": map[string]string{"id": "other"}})
		recv(t, opening)
		synctest.Wait()
		if l := listedNow(rg, "c"); !strings.Contains(l.OpenFailed, "with a different channel") || l.Open {
			t.Errorf("after the substituted open: %+v, want the substitution said, not open", l)
		}

		rg.reg.Disconnected("s", false)
		synctest.Wait()
		for _, s := range rg.reg.Snapshot() {
			if s.Key == (Key{"s", "c"}) && s.Listed != nil {
				t.Errorf("after the disconnect: still listed %+v", *s.Listed)
			}
		}
		rg.register(desc("c", false))
		open := rg.srv.expect("open", "c") // the decision, open, carried out
		synctest.Wait()
		if l := listedNow(rg, "c"); l.OpenFailed != "" || !l.FailedAt.IsZero() || l.Pending != "open" {
			t.Errorf("re-registered, its open out: %+v, want no failure, pending open", l)
		}
		open.ok()
		synctest.Wait()
		if l := listedNow(rg, "c"); !l.Open || l.OpenFailed != "" {
			t.Errorf("re-registered and opened: %+v", l)
		}
	})
}

// The reason is one bounded line; work a removal or the host's shutdown
// cancelled is no failure; an op that did not converge is one.
func TestOperatorReasonBounded(t *testing.T) {
	long := strings.Repeat("x", 2*MaxFailureBytes) + "\n\x1b[2J"
	got := operatorReason(&lifecycleError{text: long})
	if len(got) > MaxFailureBytes+len("…") || !strings.HasSuffix(got, "…") || strings.ContainsAny(got, "\n") {
		t.Errorf("operatorReason of a long, multi-line text: %d bytes %q", len(got), got)
	}
	m := newMachine(func(string, string) bool { return true }, nil)
	c := m.chanOf(Key{"s", "c"})
	m.failed(c, true, errClosing)
	if c.failure != nil {
		t.Errorf("a shutdown's cancellation was kept as a failure: %+v", c.failure)
	}
	m.failed(c, true, &lifecycleError{text: "gone", kind: kindGone})
	if c.failure != nil {
		t.Errorf("a removal's cancellation was kept as a failure: %+v", c.failure)
	}
	m.failed(c, false, &lifecycleError{text: "Channel c did not converge", kind: kindNotConverged})
	if c.failure == nil || c.failure.open || c.failure.reason != "Channel c did not converge" {
		t.Errorf("a close that did not converge: %+v", c.failure)
	}
}
