package channels

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
)

// Typing ends when its channel closes (outgoing.go): the stop is sent at
// once, once, and nothing after it; the turn's own stop does nothing more.

// TestTypingStopsWhenAgentCloses: the agent closes the channel it types
// in: the stop is written before channels/close goes out, and no start
// follows; the turn's stop, later, sends nothing.
func TestTypingStopsWhenAgentCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, stop := typingInOpen(t)
		synctest.Wait()
		start, stopped := typingNote(t, "c", "start"), typingNote(t, "c", "stop")
		ch := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		c := rg.srv.expect("close", "c")
		// The close is out only once the stop is.
		checkNotes(t, rg.srv, "as the close went out", start, stopped)
		c.ok()
		if res := recv(t, ch); res.IsError {
			t.Fatal(res.Text())
		}
		time.Sleep(3 * TypingInterval)
		synctest.Wait()
		stop()
		synctest.Wait()
		checkNotes(t, rg.srv, "after the close and the turn's stop", start, stopped)
	})
}

// TestTypingStopsWhenRegistrationGoes: the server removes the channel:
// the stop goes at once (the server is still there, and granted), and
// nothing after it.
func TestTypingStopsWhenRegistrationGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, stop := typingInOpen(t)
		synctest.Wait()
		_, begin := rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"c"}}, false)
		begin()
		synctest.Wait()
		start, stopped := typingNote(t, "c", "start"), typingNote(t, "c", "stop")
		checkNotes(t, rg.srv, "once the registration went", start, stopped)
		time.Sleep(3 * TypingInterval)
		synctest.Wait()
		stop()
		synctest.Wait()
		checkNotes(t, rg.srv, "after the turn's stop", start, stopped)
		rg.srv.none()
	})
}

// TestTypingCloseChecksGrant: a close of a channel whose server has lost
// channels.typing sends no stop.
func TestTypingCloseChecksGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg, stop := typingInOpen(t)
		synctest.Wait()
		rg.srv.setGrant("channels.typing", false)
		ch := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		rg.srv.expect("close", "c").ok()
		recv(t, ch)
		stop()
		synctest.Wait()
		checkNotes(t, rg.srv, "after the close without the grant", typingNote(t, "c", "start"))
	})
}

// TestTypingCloseEndsEverySession: two sessions type in c and one in d;
// closing c stops both of c's, and d's goes on (its next start comes at
// 7 s) until its own stop.
func TestTypingCloseEndsEverySession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, rigCaps("channels.typing")...)
		openedChannel(rg, desc("c", true))
		openedChannel(rg, desc("d", true))
		var stops []func()
		for _, id := range []string{"c", "c", "d"} {
			stop, ok := rg.reg.Typing("s", id)
			if !ok {
				t.Fatalf("Typing in %s: ok false", id)
			}
			stops = append(stops, stop)
		}
		synctest.Wait()
		ch := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		rg.srv.expect("close", "c").ok()
		recv(t, ch)
		time.Sleep(TypingInterval)
		synctest.Wait()
		count := map[string]int{}
		for _, n := range sentNotes(t, rg.srv) {
			p := n.Params.(map[string]any)
			count[p["channelId"].(string)+" "+p["op"].(string)]++
		}
		want := map[string]int{"c start": 2, "c stop": 2, "d start": 2}
		for k, n := range want {
			if count[k] != n {
				t.Errorf("%q sent %d times, want %d (all: %v)", k, count[k], n, count)
			}
		}
		if len(count) != len(want) {
			t.Errorf("sent %v, want %v", count, want)
		}
		for _, stop := range stops {
			stop()
		}
		if got := sentNotes(t, rg.srv); !cmpNote(got[len(got)-1], typingNote(t, "d", "stop")) {
			t.Errorf("last notification %v, want d's stop", got[len(got)-1])
		}
	})
}

func cmpNote(a, b sentNote) bool {
	pa, pb := a.Params.(map[string]any), b.Params.(map[string]any)
	return a.Method == b.Method && pa["channelId"] == pb["channelId"] && pa["op"] == pb["op"]
}

// TestTypingStartedAsChannelCloses: a session that starts while the
// channel is closing either sees the close at its start (no start, no
// stop) or is ended by it (a start, then one stop): never a start with no
// stop after it. Run many times, as the close and Typing race.
func TestTypingStartedAsChannelCloses(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			rg := newRig(t, rigCaps("channels.typing")...)
			openedChannel(rg, desc("c", true))
			ch := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
			stop, _ := rg.reg.Typing("s", "c")
			rg.srv.expect("close", "c").ok()
			recv(t, ch)
			time.Sleep(2 * TypingInterval)
			synctest.Wait()
			notes := sentNotes(t, rg.srv)
			stop()
			if len(notes) != 0 && (len(notes) != 2 || !cmpNote(notes[0], typingNote(t, "c", "start")) || !cmpNote(notes[1], typingNote(t, "c", "stop"))) {
				t.Fatalf("notifications %v, want none or a start then a stop", notes)
			}
			checkNotes(t, rg.srv, "after the turn's stop", notes...)
		})
	}
}
