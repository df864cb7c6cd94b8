package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/internal/treat"
)

// Issue 25 through the path a user takes: mcplhost run with the default
// wake rules and debounce (1.5 s), a real channel server subprocess and
// an agent on an OpenAI-compatible model (a local stand-in), counting the
// model calls the API got. Each case ends with a marker message that
// addresses the agent: once the marker's turn has ended, everything sent
// before it has been read, so what did not wake a turn never will.

type wakeRig struct {
	t   *testing.T
	run *runProc
	ctl control
	api *fakeapi.Server
	n   int // markers sent
}

func newWakeRig(t *testing.T) *wakeRig {
	t.Helper()
	api := fakeapi.NewOpenAI(t)
	return newAgentRunRig(t, api, "{provider: openai, model: m, baseURL: "+api.URL+", keyOptional: true}", "")
}

// newAgentRunRig runs mcplhost run with a channel server subprocess and
// one agent, ada, whose model is model (a YAML flow mapping) on api, and
// whose other keys are extra (YAML lines, indented for an agent's keys).
func newAgentRunRig(t *testing.T, api *fakeapi.Server, model, extra string) *wakeRig {
	t.Helper()
	dir := t.TempDir()
	ctlPath := filepath.Join(dir, "control.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`store: ./host.db
servers:
  - id: chat
    command: `+chanserverCommand(t, ctlPath)+`
agents:
  - name: ada
    model: `+model+`
`+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &wakeRig{t: t, api: api}
	r.run = startRun(t, dir, cfg, "run")
	r.ctl = awaitControl(t, ctlPath, r.run)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcplhost logged:\n%s", clip(r.run.stderr.String()))
		}
	})
	return r
}

func (r *wakeRig) incoming(id, text, tags string) {
	r.t.Helper()
	if out := r.ctl.call(r.t, waitFor, "incoming", fmt.Sprintf(`{"channelId":"a","messageId":%q,"text":%q,"tags":%s}`, id, text, tags)); !strings.Contains(out, `"accepted":true`) {
		r.t.Fatalf("incoming %s: %s", id, out)
	}
}

// turnEnded waits for the end of the turn that was woken by the message
// id, and returns that turn's start.
func (r *wakeRig) turnEnded(id string) agent.Event {
	r.t.Helper()
	var start agent.Event
	r.run.tr.wait(r.t, 60*time.Second, "the turn woken by "+id+" to end", func(evs []agent.Event) bool {
		turn := int64(-1)
		for _, ev := range evs {
			if ev.Agent != "ada" {
				continue
			}
			if ev.Event == agent.EventTurnStart && slices.ContainsFunc(ev.WokenBy, func(w agent.Wake) bool { return w.MessageID == id }) {
				turn, start = ev.Turn, ev
			}
			if ev.Event == agent.EventTurnEnd && ev.Turn == turn {
				return true
			}
		}
		return false
	})
	return start
}

// marker sends a message that addresses the agent and waits for its turn
// to end.
func (r *wakeRig) marker() {
	r.t.Helper()
	r.n++
	id := fmt.Sprint("marker-", r.n)
	r.incoming(id, "marker "+id, `["chat:mention"]`)
	r.turnEnded(id)
}

// turnsWokenBy counts the turns woken by a message whose id starts with
// prefix.
func (r *wakeRig) turnsWokenBy(prefix string) int {
	n := 0
	for _, ev := range r.run.tr.all() {
		if ev.Event == agent.EventTurnStart && slices.ContainsFunc(ev.WokenBy, func(w agent.Wake) bool { return strings.HasPrefix(w.MessageID, prefix) }) {
			n++
		}
	}
	return n
}

func TestRunWake(t *testing.T) {
	r := newWakeRig(t)

	t.Run("40 ambient messages, then one that addresses the agent", func(t *testing.T) {
		r.t = t
		calls := len(r.api.Requests())
		r.ctl.burst(t, waitFor, `{"channelId":"a","count":40,"inflight":1,"prefix":"amb","tags":["chat:ambient"]}`)
		r.incoming("ask", "what did they say?", `["chat:mention"]`)
		start := r.turnEnded("ask")
		made := len(r.api.Requests()) - calls
		if made > 2 {
			t.Errorf("%d model calls for 40 ambient messages and one addressed, want at most 2", made)
		}
		last := string(r.api.Requests()[len(r.api.Requests())-1])
		for _, id := range []string{"amb-1", "amb-40", "what did they say?"} {
			if !strings.Contains(last, id) {
				t.Errorf("the addressed message's request holds no %q", id)
			}
		}
		if c := start.Carried; c == nil || c.Batched+countBatchedBefore(r.run.tr.all(), start) < 40 {
			t.Errorf("the turn carried %+v; with the reads before it, want the 40 ambient messages batched", c)
		}
		r.marker()
		if n := r.turnsWokenBy("amb-"); n != 0 {
			t.Errorf("%d turns were woken by ambient messages, want none", n)
		}
	})

	t.Run("10 addressed messages in one second", func(t *testing.T) {
		r.t = t
		before := time.Now()
		r.ctl.burst(t, waitFor, `{"channelId":"a","count":10,"inflight":1,"prefix":"q","tags":["chat:mention"]}`)
		if took := time.Since(before); took > time.Second {
			t.Logf("the burst took %v, more than the second the case is about; the debounce still folds what came within 1.5 s of the one before", took)
		}
		r.turnEnded("q-10")
		r.marker()
		if n := r.turnsWokenBy("q-"); n > 2 {
			t.Errorf("%d turns for 10 addressed messages sent in one go, want at most 2", n)
		}
	})

	t.Run("messages that come during a turn: one follow-up turn", func(t *testing.T) {
		r.t = t
		r.api.Hold()
		r.incoming("long", "a question that takes a while", `["chat:mention"]`)
		r.api.WaitHeld(1)
		r.incoming("during", "and another thing", `["chat:mention"]`)
		r.incoming("chatter", "people talking", `["chat:ambient"]`)
		r.api.Release()
		start := r.turnEnded("during")
		r.marker()
		if n := r.turnsWokenBy("during"); n != 1 {
			t.Errorf("%d turns woken by the message that came during a turn, want exactly 1", n)
		}
		if c := start.Carried; c == nil || c.Held != 1 || c.Batched != 1 {
			t.Errorf("the follow-up carried %+v, want 1 held and 1 batched", c)
		}
	})
}

// countBatchedBefore counts the messages batched by reads that woke no
// turn (treated events outside a turn) before start.
func countBatchedBefore(evs []agent.Event, start agent.Event) int {
	n := 0
	for _, ev := range evs {
		if ev.Agent != "ada" || ev.Event != agent.EventTreated || ev.Turn >= start.Turn {
			continue
		}
		for _, c := range ev.Treated {
			if c.Treat == "batch" {
				n += c.N
			}
		}
	}
	return n
}

// A server's suggested treatment through mcplhost run: the chat server's
// ontology suggests that ambient messages wake the agent. Accepted by its
// pin, an ambient message wakes a turn; the log names the pin. A pin that
// isn't the ontology's accepts nothing, and the log says so.
func TestRunAcceptTreatment(t *testing.T) {
	const ontology = `{"coreTags":["chat:ambient"],"suggestedTreatment":[{"tagsAny":["chat:ambient"],"behavior":"immediate"}]}`
	pin := treat.Pin([]treat.Ontology{{FeatureSet: chanserver.FeatureSet, Raw: json.RawMessage(ontology)}})
	for _, tc := range []struct {
		name, accept string
		wakes        bool
		log          string
	}{
		{"accepted", pin, true, "a server's suggested treatment is accepted"},
		{"another pin", "sha256:" + strings.Repeat("0", 64), false, "a server's tag ontology is not the one its configuration accepts"},
		{"not accepted", "", false, "none is applied unless its configuration accepts them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctlPath := filepath.Join(dir, "control.json")
			accept := ""
			if tc.accept != "" {
				accept = "    acceptTreatment: " + tc.accept + "\n"
			}
			cfg := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(cfg, []byte(`store: ./host.db
servers:
  - id: chat
    command: `+chanserverCommand(t, ctlPath, "-ontology", ontology)+`
`+accept+`agents:
  - name: ada
    model: {provider: scripted, echo: true}
    wake: {debounce: 0s}
`), 0o600); err != nil {
				t.Fatal(err)
			}
			r := &wakeRig{t: t}
			r.run = startRun(t, dir, cfg, "run", "-v")
			r.ctl = awaitControl(t, ctlPath, r.run)
			r.incoming("amb", "people talking", `["chat:ambient"]`)
			r.marker()
			if n := r.turnsWokenBy("amb"); (n == 1) != tc.wakes {
				t.Errorf("%d turns woken by the ambient message; want it to wake one: %v", n, tc.wakes)
			}
			if log := r.run.stderr.String(); !strings.Contains(log, tc.log) || (tc.accept == "" && !strings.Contains(log, pin)) {
				t.Errorf("the log doesn't say %q (and, unaccepted, the pin %s):\n%s", tc.log, pin, clip(log))
			}
		})
	}
}
