package host_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
}

// chatChannels are the channel server's: a open from the start, b and d
// closed.
const chatChannels = `[{"id":"a","type":"chat","label":"#a","address":{"room":"a"},"initiallyOpen":true},` +
	`{"id":"b","type":"chat","label":"#b","address":{"room":"b"}},` +
	`{"id":"d","type":"chat","label":"#d","address":{"room":"d"}}]`

// newAgentRig writes files (name: text) into a temporary folder, the
// config among them as config.yaml with SERVER replaced by the channel
// server's command, and starts a host on it.
func newAgentRig(t *testing.T, cfgText string, files map[string]string) *agentRig {
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
	r.start()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *agentRig) start() {
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
	h, err := host.New(host.Options{Logger: r.rec.Logger(), Store: st, Transcript: r.tr})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := h.Start(cfg); err != nil {
		r.t.Fatal(err)
	}
	<-h.Settled()
	r.st, r.h = st, h
	once := sync.OnceFunc(func() {
		h.Close()
		st.Close()
	})
	r.stop = once
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
	r.incoming("a", "m1", "hello there")
	r.tr.turnEnd(t, "ada", 1)
	evs := r.tr.turn("ada", 1)
	if got := find(evs, agent.EventTurnStart); len(got) != 1 || len(got[0].WokenBy) != 1 || got[0].WokenBy[0].MessageID != "m1" {
		t.Errorf("turn_start = %+v", got)
	}
	shown := find(evs, agent.EventShown)
	if len(shown) != 1 || !strings.Contains(shown[0].Text, "[#a (a) on chat · ") || !strings.HasSuffix(shown[0].Text, "hello there") {
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
	if cur["agent/ada"] == 0 {
		t.Errorf("cursors = %v", cur)
	}
}
