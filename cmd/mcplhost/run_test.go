package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// The acceptance, as a user runs it: mcplhost run with a scripted
// agent in the chat room (examples/chatroom, a real subprocess), whose
// people address the agent in its channel, in one it hasn't joined, and in
// another; the agent answers, joins the second and declines the third,
// and its transcript shows each step.
func TestRunChatroomAgent(t *testing.T) {
	bin := buildChatroom(t)
	t.Run("scripted", func(t *testing.T) {
		runChatroomAgent(t, bin, "{provider: scripted, script: ./ada.yaml}")
	})
	// The second acceptance item: the same configuration on the
	// hosted providers, given a key and a base URL, here local servers
	// speaking their wire formats and answering as the script does.
	replies := []fakeapi.Reply{
		{Text: "Thursday, as I recall."},
		{Calls: []fakeapi.Call{{Name: "channel_open", Args: `{"channelId":"chatroom:#dev","serverId":"room"}`}}},
		{Text: "Looking at PR 12 now."},
		{Calls: []fakeapi.Call{{Name: "channel_decline", Args: `{"channelId":"chatroom:#random","serverId":"room","messageId":"chatroom-3"}`}}},
	}
	t.Setenv("TEST_MODEL_KEY", "test-key")
	for _, tc := range []struct {
		provider string
		fake     func(testing.TB, ...fakeapi.Reply) *fakeapi.Server
	}{{"anthropic", fakeapi.NewAnthropic}, {"openai", fakeapi.NewOpenAI}} {
		t.Run(tc.provider, func(t *testing.T) {
			api := tc.fake(t, replies...)
			runChatroomAgent(t, bin, "{provider: "+tc.provider+", model: m, baseURL: "+api.URL+", apiKeyEnv: TEST_MODEL_KEY}")
			if n := len(api.Requests()); n != 5 {
				t.Errorf("the model was asked %d times, want 5 (one in the first turn, two in each other)", n)
			}
		})
	}
}

// runChatroomAgent runs the scenario with ada on model (a YAML mapping).
func runChatroomAgent(t *testing.T, bin, model string) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Each post after the first waits for the agent's answer to the one
	// before ("+agent"), so each post is a turn of its own.
	room := write("room.script", `+0s #general alice @agent: what did we decide about the release date?
+agent #dev dave @agent: can you review PR 12?
+agent #random carol @agent: tabs or spaces?
`)
	write("ada.yaml", `steps:
  - say: Thursday, as I recall.
  - call: [{tool: channel_open, args: {channelId: "chatroom:#dev", serverId: room}}]
  - say: Looking at PR 12 now.
  - call: [{tool: channel_decline, args: {channelId: "chatroom:#random", serverId: room, messageId: chatroom-3}}]
  - silent: true
`)
	cfg := write("config.yaml", `store: ./host.db
servers:
  - id: room
    command: [`+bin+`, -q, -run=, -script, `+room+`]
agents:
  - name: ada
    model: `+model+`
    system: You are Ada, in the team's chat room.
    allowedTools: all
`)
	got := runTurns(t, cfg, 3)
	turn := func(n int64, kind string) []agent.Event {
		var out []agent.Event
		for _, ev := range got {
			if ev.Turn == n && ev.Event == kind {
				out = append(out, ev)
			}
		}
		return out
	}
	// 1: alice, in #general (open from the start): answered there.
	if sp := turn(1, agent.EventSpeech); len(sp) != 1 || sp[0].Channel != "chatroom:#general" || sp[0].Outcome != "delivered" || sp[0].Text != "Thursday, as I recall." {
		t.Errorf("turn 1 speech = %+v", sp)
	}
	// 2: dave, in #dev (closed): invited, joins, answers there.
	if s := turn(2, agent.EventShown); len(s) != 1 || !strings.Contains(s[0].Text, "[Channel invitation] dave addressed you in #dev (chatroom:#dev)") {
		t.Errorf("turn 2 shown = %+v", s)
	}
	if tl := turn(2, agent.EventTool); len(tl) != 1 || tl[0].Tool != "channel_open" || tl[0].Outcome != "ok" {
		t.Errorf("turn 2 tools = %+v", tl)
	}
	if sp := turn(2, agent.EventSpeech); len(sp) != 1 || sp[0].Channel != "chatroom:#dev" || sp[0].Outcome != "delivered" {
		t.Errorf("turn 2 speech = %+v", sp)
	}
	// 3: carol, in #random (closed): invited, declines, says nothing.
	if tl := turn(3, agent.EventTool); len(tl) != 1 || tl[0].Tool != "channel_decline" || tl[0].Outcome != "ok" || !strings.Contains(tl[0].Text, `"status":"remained closed"`) {
		t.Errorf("turn 3 tools = %+v", tl)
	}
	if sp := turn(3, agent.EventSpeech); len(sp) != 0 {
		t.Errorf("turn 3 spoke: %+v", sp)
	}
	// The store kept the decisions.
	code, out, errOut := runCLI("channels", "--store", filepath.Join(dir, "host.db"))
	if code != exitOK || !strings.Contains(out, "chatroom:#dev") || !strings.Contains(out, "invitation-declined") {
		t.Errorf("channels: exit %d\n%s%s", code, out, errOut)
	}
}

func TestRunUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("servers: []\nagents:\n  - name: ada\n    model: {provider: scripted, script: ./missing.yaml}\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no config", []string{"run"}, exitUsage, "mcplhost run: --config FILE is required"},
		{"unknown flag", []string{"run", "--nope"}, exitUsage, "mcplhost run: unknown flag --nope"},
		{"an argument", []string{"run", "x"}, exitUsage, `mcplhost run: unexpected argument "x"`},
		{"a log format", []string{"run", "--log-format", "xml", "--config", bad}, exitUsage, `mcplhost run: --log-format "xml" is not text or json`},
		{"a log level", []string{"run", "--log-level", "loud", "--config", bad}, exitUsage, `mcplhost run: --log-level "loud" is not debug, info, warn or error`},
		{"no such config", []string{"run", "--config", filepath.Join(dir, "none.yaml")}, exitUsage, "none.yaml"},
		{"an agent that can't start", []string{"run", "--config", bad}, exitFail, "agent ada: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// runTurns runs mcplhost run on cfg, in-process, until the agents' turns
// have ended n times, then stops it, and returns the transcript's events.
// The transcript is a FIFO, read as it is written.
func runTurns(t *testing.T, cfg string, n int) []agent.Event {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "transcript.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	events := make(chan agent.Event, 100)
	go func() {
		defer close(events)
		f, err := os.Open(fifo)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var ev agent.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
	}()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run", "--config", cfg, "--transcript", fifo}, &stdout, &stderr) }()
	var got []agent.Event
	timeout := time.After(60 * time.Second)
	for turns := 0; turns < n; {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the transcript ended early:\n%s", stderr.String())
			}
			got = append(got, ev)
			if ev.Event == agent.EventTurnEnd {
				turns++
			}
		case <-timeout:
			cancel()
			<-done
			t.Fatalf("%d turns did not end; the transcript has %+v\nstderr:\n%s", n, got, stderr.String())
		}
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("run ended with %d\n%s", code, stderr.String())
	}
	for ev := range events {
		got = append(got, ev)
	}
	return got
}

// TestRunJSONLog: --log-format json writes the log as JSON lines.
func TestRunJSONLog(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("store: ./host.db\nservers:\n  - id: gone\n    command: ["+filepath.Join(dir, "no-such-server")+"]\n"), 0o600)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "--config", cfg, "--log-format", "json", "-v"}, io.Discard, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var rec map[string]any
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %s", sc.Text())
		}
		if rec["server"] == "gone" {
			break
		}
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if code := <-done; code != exitOK || rec["server"] != "gone" || rec["level"] == nil || rec["msg"] == nil {
		t.Errorf("exit %d, last record %v", code, rec)
	}
}

// -v shows each line a server writes to its stderr, at info: the chat
// room's own account, here. --log-level debug before it (which -v does
// not lower) shows them too.
func TestRunVerboseShowsServerStderr(t *testing.T) {
	for _, flags := range [][]string{{"-v"}, {"--log-level", "debug", "-v"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) { testRunShowsServerStderr(t, flags) })
	}
}

func testRunShowsServerStderr(t *testing.T, flags []string) {
	bin := buildChatroom(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "room.script")
	cfg := filepath.Join(dir, "config.yaml")
	for path, text := range map[string]string{
		script: "+0s #random alice: hello from the room\n",
		cfg:    "store: ./host.db\nservers:\n  - id: room\n    command: [" + bin + ", -script, " + script + "]\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"run", "--config", cfg, "--log-format", "json"}, flags...), io.Discard, pw)
		pw.Close()
	}()
	bound := time.AfterFunc(30*time.Second, cancel) // the line never came: stop, and fail below
	defer bound.Stop()
	sc := bufio.NewScanner(pr)
	var line string
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %s", sc.Text())
		}
		if l, _ := rec["line"].(string); rec["msg"] == "server stderr" && rec["server"] == "room" && strings.Contains(l, "hello from the room") {
			if rec["level"] != "INFO" {
				t.Errorf("the room's stderr line at level %v, want INFO", rec["level"])
			}
			line = l
			break
		}
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if code := <-done; code != exitOK || line == "" {
		t.Errorf("exit %d; the room's stderr line %q", code, line)
	}
}
