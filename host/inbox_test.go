package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// openaiConfig runs ada on an OpenAI-compatible server at APIURL (fakeapi).
const openaiConfig = `
servers:
  - id: chat
    command: SERVER
agents:
  - name: ada
    model: {provider: openai, model: m, baseURL: APIURL, apiKeyEnv: TEST_MODEL_KEY}
`

// shownHeader is the header of a message of channel a, as a turn shows it.
var shownHeader = regexp.MustCompile(`(?m)^\[#a \(a\) on chat · from Ada · message (\S+) · at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\]$`)

// shownIDs are the ids of the messages a shown event shows, in order.
func shownIDs(text string) []string {
	var out []string
	for _, m := range shownHeader.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// waitEvents waits (up to 60 s) until cond holds for the transcript's
// events.
func (l *lines) waitEvents(t *testing.T, what string, cond func([]agent.Event) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		l.mu.Lock()
		ch := l.changed
		l.mu.Unlock()
		if cond(l.events()) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the transcript did not come to %s within 60 s; it has %d bytes", what, len(l.String()))
		}
	}
}

// inversions counts the adjacent pairs of got out of the order of want
// (each id's place in want).
func inversions(got, want []string) int {
	place := map[string]int{}
	for i, id := range want {
		place[id] = i
	}
	n := 0
	for i := 1; i < len(got); i++ {
		if place[got[i]] < place[got[i-1]] {
			n++
		}
	}
	return n
}

// TestInboxOrderPipelined is issue 22's pipelined server through the
// path a user takes: the chat server sends 500 channels/incoming
// requests of one message each, up to 16 unanswered at once on its one
// connection (20 bursts of 25, each sent while the agent's model call is
// held, so each turn sees a batch of what came meanwhile), into the open
// channel a. The agent is shown every one of them, in the order sent,
// across its turns, and the inbox's Seq order is that order too.
func TestInboxOrderPipelined(t *testing.T) {
	api := fakeapi.NewOpenAI(t) // no replies: each answer ends its turn, silent
	api.Hold()
	r := newAgentRig(t, strings.Replace(openaiConfig, "APIURL", api.URL, 1), nil)
	r.serverLog(3) // the registration's opens and closes are done

	// A turn's batch is what came between two pulls: at most the rest of one
	// burst and the start of the next, 2*each, within MaxBatch.
	const bursts, each = 20, 25
	var sent []string
	for k := range bursts {
		prefix := fmt.Sprintf("s%d", k)
		out := r.must("chat--incoming_burst", fmt.Sprintf(`{"channelId":"a","count":%d,"inflight":16,"prefix":%q}`, each, prefix))
		var res chanserver.BurstResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Accepted != each {
			t.Fatalf("burst %d: %s", k, out)
		}
		for i := 1; i <= each; i++ {
			sent = append(sent, chanserver.BurstMessageID(prefix, i))
		}
		// A turn is under way, woken by this burst or holding its
		// remainder: let it end, so the next turn takes what came.
		api.WaitHeld(1)
		api.ReleaseOne()
	}
	api.Release()

	collect := func(evs []agent.Event) (shown []string, batches []int) {
		for _, ev := range evs {
			if ev.Agent == "ada" && ev.Event == agent.EventShown {
				ids := shownIDs(ev.Text)
				shown = append(shown, ids...)
				batches = append(batches, len(ids))
				if strings.Contains(ev.Text, "[host]") {
					t.Errorf("turn %d says something was left out or cut:\n%.500s", ev.Turn, ev.Text)
				}
			}
		}
		return shown, batches
	}
	r.tr.waitEvents(t, "every message shown", func(evs []agent.Event) bool {
		n := 0
		for _, ev := range evs {
			if ev.Agent == "ada" && ev.Event == agent.EventShown {
				n += len(shownIDs(ev.Text))
			}
		}
		return n >= len(sent)
	})
	shown, batches := collect(r.tr.events())
	t.Logf("%d turns showed batches of %v", len(batches), batches)
	if n := inversions(shown, sent); n != 0 {
		t.Errorf("the agent was shown the messages with %d adjacent inversions", n)
	}
	if strings.Join(shown, " ") != strings.Join(sent, " ") {
		t.Errorf("the agent was shown %d messages, not the %d sent, in order:\n%s", len(shown), len(sent), strings.Join(shown, " "))
	}
	several := 0
	for _, b := range batches {
		if b > 1 {
			several++
		}
	}
	if several < 5 {
		t.Errorf("only %d turns saw more than one message (%v): the test did not batch", several, batches)
	}

	// The inbox's order is the order sent.
	r.stop()
	st, err := sqlite.Open(filepath.Join(r.dir, "host.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var inbox []string
	last := int64(0)
	st.Messages(context.Background(), 0, func(m store.Message) error {
		if m.Seq <= last {
			t.Errorf("Messages gave Seq %d after %d", m.Seq, last)
		}
		last = m.Seq
		if m.Server == "chat" && m.Channel == "a" {
			inbox = append(inbox, m.MessageID)
		}
		return nil
	})
	if n := inversions(inbox, sent); n != 0 || strings.Join(inbox, " ") != strings.Join(sent, " ") {
		t.Errorf("the inbox holds %d messages, with %d adjacent inversions against the order sent:\n%s", len(inbox), n, strings.Join(inbox, " "))
	}
}
