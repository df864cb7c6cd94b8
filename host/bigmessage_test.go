package host_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// TestAgentBigMessageThenSmall is issue 22's 10 MB message through the
// path a user takes: a chat server delivers a 10 MiB message, then ten
// small ones, each after the turn before has ended, to an agent on an
// OpenAI-compatible model that refuses (HTTP 413) any request over 1 MB,
// with the default context window (contextWindow 0: 128,000 tokens for
// OpenAI). The turn the big message wakes shows its first part and says
// it is cut; that turn and the ten after it all succeed, none of their
// requests near the limit, though the cut message stays in the history.
func TestAgentBigMessageThenSmall(t *testing.T) {
	const limit = 1000 * 1000
	var replies []fakeapi.Reply
	for i := range 11 {
		replies = append(replies, fakeapi.Reply{Text: fmt.Sprintf("Noted, %d.", i+1)})
	}
	api := fakeapi.NewOpenAI(t, replies...)
	api.Limit(limit)
	r := newAgentRig(t, strings.Replace(openaiConfig, "APIURL", api.URL, 1), nil)
	r.serverLog(3)

	big := strings.Repeat("all work and no play ", (10<<20)/21+1)[:10<<20] // 10,485,760 bytes
	r.incoming("a", "big", big)
	r.tr.turnEnd(t, "ada", 1)
	for i := 1; i <= 10; i++ {
		r.incoming("a", fmt.Sprintf("small-%d", i), fmt.Sprintf("and a small one, %d", i))
		r.tr.turnEnd(t, "ada", int64(i+1))
	}

	// A message shows at most a sixteenth of the window, 8,000 tokens:
	// its text to what is left once the cut line and two blocks are
	// counted, (8000-4-30-4-4)*4 = 31,832 bytes.
	const cutLine = "[host] This is cut: it is 10.5 MB, more than this agent is shown of one message, and the first 31.8 KB are shown above."
	shown := find(r.tr.turn("ada", 1), agent.EventShown)
	if len(shown) != 1 || !strings.HasSuffix(shown[0].Text, "\n"+big[:31832]+"\n"+cutLine) {
		t.Errorf("turn 1 shows %d events, the first ending %q; want it to end with the first 31,832 bytes and\n%s",
			len(shown), tail(shown), cutLine)
	}
	for n := int64(1); n <= 11; n++ {
		evs := r.tr.turn("ada", n)
		if end := find(evs, agent.EventTurnEnd); len(end) != 1 || end[0].Reason != "end_turn" {
			t.Errorf("turn %d ended %+v, want end_turn", n, end)
		}
		for _, ev := range find(evs, agent.EventNotice) {
			if strings.Contains(ev.Text, "the model call failed") {
				t.Errorf("turn %d: %s", n, ev.Text)
			}
		}
		if sp := find(evs, agent.EventSpeech); len(sp) != 1 || sp[0].Outcome != "delivered" || sp[0].Text != fmt.Sprintf("Noted, %d.", n) {
			t.Errorf("turn %d speech = %+v", n, sp)
		}
	}
	if got := api.Refused(); len(got) != 0 {
		t.Errorf("the model refused requests of %v bytes", got)
	}
	reqs := api.Requests()
	if len(reqs) != 11 {
		t.Errorf("the model was asked %d times, want 11", len(reqs))
	}
	for i, b := range reqs {
		// The whole window is 512,000 bytes at 4 a token.
		if len(b) > 128000*4 {
			t.Errorf("request %d is %d bytes, more than the window", i+1, len(b))
		}
	}
}

// tail is the end of the first event's text, for a failure message.
func tail(evs []agent.Event) string {
	if len(evs) == 0 {
		return ""
	}
	s := evs[0].Text
	return s[max(len(s)-200, 0):]
}
