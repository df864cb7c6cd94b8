package host_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// The agents end to end: host.Host from a config file, a scripted model,
// the channel server as a real subprocess, a SQLite store, and the
// transcript the host writes.

// agentRig is a host running agents, with the channel server "chat".
type agentRig struct {
	t    *testing.T
	dir  string
	cfg  string // the config file's text
	st   *sqlite.DB
	h    *host.Host
	tr   *lines
	rec  *recorder
	stop func()
	now  func() time.Time // the host's clock (Options.Now); nil for time.Now
}

// chatChannels are the channel server's: a open from the start, b and d
// closed.
const chatChannels = `[{"id":"a","type":"chat","label":"#a","address":{"room":"a"},"initiallyOpen":true},` +
	`{"id":"b","type":"chat","label":"#b","address":{"room":"b"}},` +
	`{"id":"d","type":"chat","label":"#d","address":{"room":"d"}}]`

// newAgentRig writes files (name: text) into a temporary folder, the
// config among them as config.yaml with SERVER replaced by the channel
// server's command, and starts a host on it, waiting for its connects to
// settle.
func newAgentRig(t *testing.T, cfgText string, files map[string]string) *agentRig {
	t.Helper()
	r := prepareAgentRig(t, cfgText, files)
	r.start()
	return r
}

// prepareAgentRig writes the files as newAgentRig does, and starts
// nothing: begin or start does.
func prepareAgentRig(t *testing.T, cfgText string, files map[string]string) *agentRig {
	t.Helper()
	r := &agentRig{t: t, dir: t.TempDir()}
	cmd := list(chanserver.Binary(t), "-channels", chatChannels)
	r.cfg = strings.ReplaceAll(cfgText, "SERVER", cmd)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.dir, "config.yaml"), []byte(r.cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.stop != nil {
			r.stop()
		}
	})
	return r
}

// start starts a host on the files and waits for its connects to settle.
func (r *agentRig) start() {
	r.t.Helper()
	r.begin()
	<-r.h.Settled()
}

// begin starts a host on the files, and does not wait for its connects.
func (r *agentRig) begin() {
	r.t.Helper()
	cfg, err := config.Load(filepath.Join(r.dir, "config.yaml"))
	if err != nil {
		r.t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(r.dir, "host.db"), nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.tr, r.rec = newLines(), newRecorder()
	h, err := host.New(host.Options{Logger: r.rec.Logger(), Store: st, Transcript: r.tr, Now: r.now, LookupEnv: func(k string) (string, bool) {
		if k == "TEST_MODEL_KEY" {
			return "test-key", true
		}
		return "", false
	}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.st, r.h = st, h
	r.stop = sync.OnceFunc(func() {
		h.Close()
		st.Close()
	})
	if err := h.Start(cfg); err != nil {
		r.t.Fatal(err)
	}
}

// must calls a tool and fails the test if it fails.
func (r *agentRig) must(name, args string) string {
	r.t.Helper()
	res, err := r.h.CallTool(context.Background(), name, json.RawMessage(args))
	if err != nil {
		r.t.Fatalf("%s %s: %v", name, args, err)
	}
	return res.Text()
}

// incoming sends a message into channel from the server, as alice.
func (r *agentRig) incoming(channel, id, text string, tags ...string) {
	r.t.Helper()
	tj, _ := json.Marshal(tags)
	if tags == nil {
		tj = []byte("null")
	}
	out := r.must("chat--incoming", fmt.Sprintf(`{"channelId":%q,"messageId":%q,"text":%q,"tags":%s}`, channel, id, text, tj))
	if !strings.Contains(out, `"accepted":true`) {
		r.r().Fatalf("incoming %s: %s", id, out)
	}
}

func (r *agentRig) r() *testing.T { return r.t }

// serverLog waits for the server to have received n requests and returns
// them.
func (r *agentRig) serverLog(n int) []string {
	r.t.Helper()
	var got []string
	json.Unmarshal([]byte(r.must("chat--log", fmt.Sprintf(`{"count":%d}`, n))), &got)
	return got
}

// lines is a transcript being written: a test waits for the event it
// expects.
type lines struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLines() *lines { return &lines{changed: make(chan struct{})} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

func (l *lines) events() []agent.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []agent.Event
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev agent.Event
		json.Unmarshal(sc.Bytes(), &ev)
		out = append(out, ev)
	}
	return out
}

// wait waits (up to 30 s) until match holds for an event, and returns it.
func (l *lines) wait(t *testing.T, what string, match func(agent.Event) bool) agent.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		ch := l.changed
		l.mu.Unlock()
		for _, ev := range l.events() {
			if match(ev) {
				return ev
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no transcript event %s in:\n%s", what, l.String())
		}
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// turnEnd waits for the end of the agent's turn n.
func (l *lines) turnEnd(t *testing.T, agentName string, n int64) agent.Event {
	t.Helper()
	return l.wait(t, fmt.Sprintf("turn_end %s %d", agentName, n), func(ev agent.Event) bool {
		return ev.Event == agent.EventTurnEnd && ev.Agent == agentName && ev.Turn == n
	})
}

// turn returns the agent's events of turn n.
func (l *lines) turn(agentName string, n int64) []agent.Event {
	var out []agent.Event
	for _, ev := range l.events() {
		if ev.Agent == agentName && ev.Turn == n {
			out = append(out, ev)
		}
	}
	return out
}

func find(evs []agent.Event, kind string) []agent.Event {
	var out []agent.Event
	for _, ev := range evs {
		if ev.Event == kind {
			out = append(out, ev)
		}
	}
	return out
}

const echoConfig = `
servers:
  - id: chat
    command: SERVER
    channels: {sendTools: [send_message]}
agents:
  - name: ada
    model: {provider: scripted, echo: true}
    system: You are Ada.
`

func TestAgentEchoesInOpenChannel(t *testing.T) {
	r := newAgentRig(t, echoConfig, nil)
	r.incoming("a", "m1", "hello there", "chat:mention")
	r.tr.turnEnd(t, "ada", 1)
	evs := r.tr.turn("ada", 1)
	if got := find(evs, agent.EventTurnStart); len(got) != 1 || len(got[0].WokenBy) != 1 || got[0].WokenBy[0].MessageID != "m1" {
		t.Errorf("turn_start = %+v", got)
	}
	shown := find(evs, agent.EventShown)
	if len(shown) != 1 || unstamp(shown[0].Text) != "[#a (a) on chat · from Ada · addressed to you · message m1]\nhello there" || !stamp.MatchString(shown[0].Text) {
		t.Errorf("shown = %+v", shown)
	}
	sp := find(evs, agent.EventSpeech)
	if len(sp) != 1 || sp[0].Channel != "a" || sp[0].Outcome != "delivered" || sp[0].Text != "hello there" {
		t.Errorf("speech = %+v", sp)
	}
	notes := find(evs, agent.EventNotice)
	if len(notes) != 1 || notes[0].Text != "[delivered] Your reply was posted to #a (a)." {
		t.Errorf("notices = %+v", notes)
	}
	if end := find(evs, agent.EventTurnEnd); end[0].Reason != "end_turn" {
		t.Errorf("turn_end = %+v", end)
	}
	// The registration's opens and closes, then the reply.
	if got := r.serverLog(4); !slices.Contains(got, "publish a: hello there") {
		t.Errorf("server log = %q", got)
	}
	// The turn is in the store: the history, the transcript, the cursor.
	r.stop()
	st, err := sqlite.Open(filepath.Join(r.dir, "host.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var roles []string
	st.History(context.Background(), "ada", func(e store.Entry) error {
		var b struct{ Role string }
		json.Unmarshal(e.Body, &b)
		roles = append(roles, b.Role)
		return nil
	})
	if strings.Join(roles, ",") != "user,assistant,user" {
		t.Errorf("history roles = %v", roles)
	}
	cur, _ := st.Cursors(context.Background())
	if cur["agent/ada/chat"] == 0 {
		t.Errorf("cursors = %v", cur)
	}
}

// stamp is the time a header says its message came; unstamp leaves it
// out, for headers compared whole.
var stamp = regexp.MustCompile(` · at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\]`)

func unstamp(s string) string { return stamp.ReplaceAllString(s, "]") }

// scriptConfig runs ada on the script ada.yaml.
const scriptConfig = `
servers:
  - id: chat
    command: SERVER
    channels: {sendTools: [send_message]}
agents:
  - name: ada
    model: {provider: scripted, script: ./ada.yaml}
    system: You are Ada.
    allowedTools: all
`

func TestAgentJoinsWhenInvitedAndDeclinesAnother(t *testing.T) {
	r := newAgentRig(t, scriptConfig, map[string]string{"ada.yaml": `
steps:
  - call: [{tool: channel_open, args: {channelId: b}}]
  - say: Joined b.
  - call: [{tool: channel_decline, args: {channelId: d, serverId: chat, messageId: m2}}]
  - silent: true
`})
	r.incoming("b", "m1", "come to b", "chat:mention")
	r.tr.turnEnd(t, "ada", 1)
	evs := r.tr.turn("ada", 1)
	shown := find(evs, agent.EventShown)[0].Text
	invitation := `[Channel invitation] Ada addressed you in #b (b), a channel you haven't joined. Only messages that address you reach you from it; the rest of its traffic is invisible to you. Your options:
1. Reply there: what you say this turn is posted to #b (b), and posting it opens the channel, so its traffic reaches you from then on.
2. Join without replying: call channel_open with channelId "b" and serverId "chat".
3. Stay out: call channel_decline with channelId "b", serverId "chat" and messageId "m1".
Doing nothing is also fine.`
	if want := "[#b (b) on chat · from Ada · addressed to you · message m1]\n" + invitation + "\ncome to b"; unstamp(shown) != want {
		t.Errorf("shown:\n%s\nwant:\n%s", shown, want)
	}
	tools := find(evs, agent.EventTool)
	if len(tools) != 1 || tools[0].Tool != "channel_open" || tools[0].Outcome != "ok" {
		t.Errorf("tool events = %+v", tools)
	}
	if sp := find(evs, agent.EventSpeech); len(sp) != 1 || sp[0].Channel != "b" || sp[0].Outcome != "delivered" {
		t.Errorf("speech = %+v", sp)
	}
	log := r.serverLog(5)
	if !slices.Contains(log, "open b") || log[len(log)-1] != "publish b: Joined b." {
		t.Errorf("server log = %q", log)
	}

	// Another invitation, declined.
	r.incoming("d", "m2", "and d?", "chat:mention")
	r.tr.turnEnd(t, "ada", 2)
	tools = find(r.tr.turn("ada", 2), agent.EventTool)
	if len(tools) != 1 || tools[0].Tool != "channel_decline" || tools[0].Outcome != "ok" {
		t.Errorf("turn 2 tools = %+v", tools)
	}
	if sp := find(r.tr.turn("ada", 2), agent.EventSpeech); len(sp) != 0 {
		t.Errorf("turn 2 spoke: %+v", sp)
	}
	// Ambient traffic in the declined channel is not shown; in the
	// joined one it wakes ada (whose script has run out: silent).
	r.incoming("d", "m3", "chatter in d")
	r.incoming("b", "m4", "chatter in b")
	end := r.tr.turnEnd(t, "ada", 3)
	start := find(r.tr.turn("ada", 3), agent.EventTurnStart)[0]
	if len(start.WokenBy) != 1 || start.WokenBy[0].MessageID != "m4" || end.Reason != "end_turn" {
		t.Errorf("turn 3 woken by %+v, ended %q", start.WokenBy, end.Reason)
	}
	r.h.Close()
	got := map[string]string{}
	r.st.Replay(context.Background(), func(rec store.Record) error {
		if rec.Kind == store.KindDecision {
			got[rec.Channel] = string(rec.State) + "/" + rec.Source
		}
		return nil
	})
	if got["b"] != "open/agent-tool" || got["d"] != "closed/invitation-declined" {
		t.Errorf("decisions = %v", got)
	}
}

func TestAgentBatchesTrafficDuringATurn(t *testing.T) {
	r := newAgentRig(t, echoConfig, nil)
	r.serverLog(3) // the registration's lifecycle work is done
	r.must("chat--script", `{"channelId":"a","publish":"hold"}`)
	r.incoming("a", "m1", "first", "chat:mention")
	r.must("chat--held", `{"channelId":"a","method":"publish"}`)
	// Turn 1 is waiting on its reply's publish: these wait for turn 2.
	r.incoming("a", "m2", "second", "chat:mention")
	r.incoming("a", "m3", "third")
	r.must("chat--script", `{"channelId":"a","publish":"ok"}`)
	r.must("chat--release", `{"channelId":"a","method":"publish","answer":"ok"}`)
	r.tr.turnEnd(t, "ada", 2)
	start := find(r.tr.turn("ada", 2), agent.EventTurnStart)[0]
	if len(start.WokenBy) != 2 || start.WokenBy[0].MessageID != "m2" || start.WokenBy[1].MessageID != "m3" {
		t.Errorf("turn 2 woken by %+v, want m2 and m3", start.WokenBy)
	}
	// Echo answers the newest message addressed to it.
	if sp := find(r.tr.turn("ada", 2), agent.EventSpeech); len(sp) != 1 || sp[0].Text != "second" {
		t.Errorf("turn 2 speech = %+v", sp)
	}
}

func TestAgentSpeechIntoClosedChannel(t *testing.T) {
	t.Run("opens it", func(t *testing.T) {
		r := newAgentRig(t, echoConfig, nil)
		r.incoming("b", "m1", "psst", "chat:mention")
		r.tr.turnEnd(t, "ada", 1)
		note := r.tr.wait(t, "the auto-open notice", func(ev agent.Event) bool {
			return ev.Event == agent.EventNotice && strings.HasPrefix(ev.Text, "[channels]")
		})
		want := "[channels] Now open: #b (b) — your own message into the closed channel engaged it. Ongoing traffic from this channel will reach you. If you don't want it, use channel_close — your choice sticks; neither policy nor a later send will silently reopen it."
		if note.Text != want {
			t.Errorf("notice = %q\nwant %q", note.Text, want)
		}
		if sp := find(r.tr.turn("ada", 1), agent.EventSpeech); len(sp) != 1 || sp[0].Outcome != "delivered" {
			t.Errorf("speech = %+v", sp)
		}
	})
	t.Run("a failed open posts nothing", func(t *testing.T) {
		r := newAgentRig(t, echoConfig, nil)
		r.serverLog(3)
		r.must("chat--script", `{"channelId":"b","open":"fail"}`)
		r.incoming("b", "m1", "psst", "chat:mention")
		r.tr.turnEnd(t, "ada", 1)
		evs := r.tr.turn("ada", 1)
		if sp := find(evs, agent.EventSpeech); len(sp) != 1 || sp[0].Outcome != "failed" {
			t.Errorf("speech = %+v", sp)
		}
		notes := find(evs, agent.EventNotice)
		want := `[not delivered] Your reply: Not sent to b (#b): channel is closed and open failed: The "chat" server answered with an error: open of b failed, as scripted. Nothing was posted.`
		if len(notes) == 0 || notes[len(notes)-1].Text != want {
			t.Errorf("notices = %+v\nwant last %q", notes, want)
		}
		for _, l := range r.serverLog(5) {
			if strings.HasPrefix(l, "publish") {
				t.Errorf("the server got %q", l)
			}
		}
	})
}

func TestAgentReplyThroughSendTool(t *testing.T) {
	r := newAgentRig(t, scriptConfig, map[string]string{"ada.yaml": `
steps:
  - call: [{tool: chat--send_message, args: {channelId: b, text: over here}}]
  - silent: true
`})
	r.incoming("a", "m1", "anyone?")
	r.tr.turnEnd(t, "ada", 1)
	note := r.tr.wait(t, "the reply's auto-open notice", func(ev agent.Event) bool {
		return ev.Event == agent.EventNotice && strings.HasPrefix(ev.Text, "[channels]")
	})
	if !strings.HasPrefix(note.Text, "[channels] Now open: #b (b) — your own message into the closed channel engaged it.") || note.Agent != "ada" {
		t.Errorf("notice = %+v", note)
	}
	log := r.serverLog(5)
	if !slices.Contains(log, "send b: over here") || log[len(log)-1] != "open b" {
		t.Errorf("server log = %q", log)
	}
}

func TestAgentPushEventIsATurn(t *testing.T) {
	r := newAgentRig(t, strings.Replace(scriptConfig, "allowedTools: all", "allowedTools: [channel_list]", 1),
		map[string]string{"ada.yaml": "steps:\n  - say: On it.\n"})
	out := r.must("chat--push", `{"eventId":"e1","text":"build failed"}`)
	if !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("push: %s", out)
	}
	r.tr.turnEnd(t, "ada", 1)
	evs := r.tr.turn("ada", 1)
	if w := find(evs, agent.EventTurnStart)[0].WokenBy; len(w) != 1 || w[0].Kind != "push" || w[0].MessageID != "e1" {
		t.Errorf("woken by %+v", w)
	}
	if s := find(evs, agent.EventShown)[0].Text; unstamp(s) != "[event from chat · test.agent · event e1]\nbuild failed" || !stamp.MatchString(s) {
		t.Errorf("shown = %q", s)
	}
	notes := find(evs, agent.EventNotice)
	want := "[not delivered] Your reply went nowhere: this turn wasn't woken by a channel message, so your plain text has no channel to go to. It is kept in this conversation only."
	if len(notes) != 1 || notes[0].Text != want {
		t.Errorf("notices = %+v", notes)
	}
}

const forkConfig = scriptConfig + "conversations: per-channel\n"

func TestAgentForks(t *testing.T) {
	r := newAgentRig(t, forkConfig, map[string]string{"ada.yaml": `
steps:
  - call: [{tool: channel_open, args: {channelId: b}}, {tool: channel_publish, args: {text: from a}}]
  - say: Staying in a.
`})
	r.incoming("a", "m1", "hi a")
	fork := "ada@chat/a"
	r.tr.turnEnd(t, fork, 1)
	evs := r.tr.turn(fork, 1)
	tools := find(evs, agent.EventTool)
	want := `This conversation is bound to channel "a", so it can't open other channels, and nothing was opened. Reply in "a".`
	if len(tools) != 2 || tools[0].Text != want || tools[0].Outcome != "refused" || tools[1].Outcome != "ok" {
		t.Errorf("tools = %+v", tools)
	}
	if sp := find(evs, agent.EventSpeech); len(sp) != 1 || sp[0].Channel != "a" || sp[0].Text != "Staying in a." {
		t.Errorf("speech = %+v", sp)
	}
	if n := len(r.tr.turn("ada", 1)); n != 0 {
		t.Errorf("the primary had a turn: %d events", n)
	}
	log := r.serverLog(5)
	if !slices.Contains(log, "publish a: from a") || !slices.Contains(log, "publish a: Staying in a.") || slices.Contains(log, "open b") {
		t.Errorf("server log = %q", log)
	}
}

func TestAgentToolNotAllowed(t *testing.T) {
	r := newAgentRig(t, strings.Replace(scriptConfig, "allowedTools: all", "allowedTools: [channel_list]", 1), map[string]string{"ada.yaml": `
steps:
  - call: [{tool: channel_open, args: {channelId: b}}]
`})
	r.incoming("a", "m1", "open b please")
	r.tr.turnEnd(t, "ada", 1)
	tools := find(r.tr.turn("ada", 1), agent.EventTool)
	want := "channel_open is not a tool this agent may use, so it was not called, and nothing was done. Use only the tools you were given."
	if len(tools) != 1 || tools[0].Text != want || tools[0].Outcome != "refused" {
		t.Errorf("tools = %+v", tools)
	}
}

func TestAgentToolRoundsAreBounded(t *testing.T) {
	steps := strings.Repeat("  - call: [{tool: channel_list, args: {}}]\n", agent.DefaultMaxRounds+1)
	r := newAgentRig(t, scriptConfig, map[string]string{"ada.yaml": "steps:\n" + steps})
	r.incoming("a", "m1", "loop")
	end := r.tr.turnEnd(t, "ada", 1)
	evs := r.tr.turn("ada", 1)
	if end.Reason != "max_rounds" || len(find(evs, agent.EventModel)) != agent.DefaultMaxRounds {
		t.Errorf("turn ended %q after %d model calls", end.Reason, len(find(evs, agent.EventModel)))
	}
	notes := find(evs, agent.EventNotice)
	want := "[host] This turn reached its limit of 16 tool rounds, so it ended here: the results above are in, and nothing more runs until a new message wakes you."
	if len(notes) == 0 || notes[len(notes)-1].Text != want {
		t.Errorf("notices = %+v", notes)
	}
}

func TestAgentResumesAfterRestart(t *testing.T) {
	r := newAgentRig(t, echoConfig, nil)
	r.incoming("a", "m1", "one", "chat:mention")
	r.tr.turnEnd(t, "ada", 1)
	r.stop()
	// While the host is down, a message lands in the inbox unconsumed
	// (as one a crash left before its turn was recorded would).
	st, err := sqlite.Open(filepath.Join(r.dir, "host.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"channelId":"a","messageId":"m2","author":{"name":"bob"},"content":[{"type":"text","text":"two"}]}`
	if _, err := st.AddMessages(context.Background(), []store.Message{{Server: "chat", Channel: "a", MessageID: "m2", Tags: []string{"chat:addressed"}, Body: json.RawMessage(body), At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	r.start()
	end := r.tr.turnEnd(t, "ada", 2)
	evs := r.tr.turn("ada", 2)
	if w := find(evs, agent.EventTurnStart)[0].WokenBy; len(w) != 1 || w[0].MessageID != "m2" || end.Reason != "end_turn" {
		t.Errorf("turn 2 woken by %+v", w)
	}
	if sp := find(evs, agent.EventSpeech); len(sp) != 1 || sp[0].Text != "two" {
		t.Errorf("speech = %+v", sp)
	}
}

// The notices of seeds/000 through the host: who reads each.
func TestAgentReplyNotices(t *testing.T) {
	sendToB := map[string]string{"ada.yaml": `
steps:
  - call: [{tool: chat--send_message, args: {channelId: b, text: over here}}]
  - silent: true
`}
	t.Run("a reply's failed open is told to the agent", func(t *testing.T) {
		r := newAgentRig(t, scriptConfig, sendToB)
		r.serverLog(3)
		r.must("chat--script", `{"channelId":"b","open":"fail"}`)
		r.incoming("a", "m1", "anyone?")
		note := r.tr.wait(t, "the reply-open-failed notice", func(ev agent.Event) bool {
			return ev.Event == agent.EventNotice && strings.HasPrefix(ev.Text, "[channels] Not open")
		})
		want := `[channels] Not open: #b (b). Your reply through chat--send_message went out, but opening the channel failed: The "chat" server answered with an error: open of b failed, as scripted. channel_open tries again.`
		if note.Text != want || note.Agent != "ada" {
			t.Errorf("notice to %s: %q\nwant %q", note.Agent, note.Text, want)
		}
	})
	t.Run("an agent that can't close the channel, and the primary by name", func(t *testing.T) {
		r := newAgentRig(t, `
servers:
  - id: chat
    command: SERVER
    channels: {sendTools: [send_message]}
agents:
  - name: ada
    model: {provider: scripted, echo: true}
  - name: bob
    model: {provider: scripted, script: ./ada.yaml}
    allowedTools: [chat--send_message, channel_list]
`, sendToB)
		r.incoming("a", "m1", "anyone?")
		bob := r.tr.wait(t, "bob's notice", func(ev agent.Event) bool {
			return ev.Event == agent.EventNotice && ev.Agent == "bob" && strings.HasPrefix(ev.Text, "[channels] Now open")
		})
		if want := "[channels] Now open: #b (b) — your own message into the closed channel engaged it. Ongoing traffic from this channel will reach you."; bob.Text != want {
			t.Errorf("bob read %q\nwant %q", bob.Text, want)
		}
		ada := r.tr.wait(t, "the primary's notice", func(ev agent.Event) bool {
			return ev.Event == agent.EventNotice && ev.Agent == "ada" && strings.HasPrefix(ev.Text, "[channels] Now open")
		})
		want := "[channels] Now open: #b (b) — bob's message into the closed channel engaged it. Ongoing traffic from this channel will reach you. If you don't want it, use channel_close — your choice sticks; neither policy nor a later send will silently reopen it."
		if ada.Text != want {
			t.Errorf("the primary read %q\nwant %q", ada.Text, want)
		}
	})
	t.Run("a fork replies only at home", func(t *testing.T) {
		r := newAgentRig(t, forkConfig, sendToB)
		r.incoming("a", "m1", "anyone?")
		r.tr.turnEnd(t, "ada@chat/a", 1)
		tools := find(r.tr.turn("ada@chat/a", 1), agent.EventTool)
		want := "This conversation is bound to channel a; posting with chat--send_message to b is not allowed."
		if len(tools) != 1 || tools[0].Text != want || tools[0].Outcome != "refused" {
			t.Errorf("tools = %+v", tools)
		}
	})
}
