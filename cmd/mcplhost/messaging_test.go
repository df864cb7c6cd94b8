package main

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
)

// Issue 12's acceptance: a chat server whose messaging feature set uses
// all seven channel leaves (examples/chatroom declares chat.messaging so)
// is accepted whole, and a scripted agent's reply reaches it typed,
// streamed and published; a declined invitation is acknowledged. Over
// stdio and over WebSocket.
func TestRunChatroomMessaging(t *testing.T) {
	bin := buildChatroom(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	room := write("room.script", `+0s #general alice @agent: hello there
+agent #dev dave @agent: can you review PR 12?
`)
	write("ada.yaml", `steps:
  - say: Hello alice, here I am.
  - call: [{tool: channel_decline, args: {channelId: "chatroom:#dev", serverId: room, messageId: chatroom-2, acknowledge: "👀"}}]
  - silent: true
`)
	agents := `
agents:
  - name: ada
    model: {provider: scripted, script: ./ada.yaml}
`
	// firstTurn checks turn 1: typed, streamed and published, in order.
	firstTurn := func(t *testing.T, got []agent.Event, reply string) {
		t.Helper()
		var turn1 []string
		for _, ev := range got {
			if ev.Turn != 1 {
				continue
			}
			switch ev.Event {
			case agent.EventTyping:
				turn1 = append(turn1, "typing "+ev.Outcome+" "+ev.Channel)
			case agent.EventStreamed, agent.EventSpeech:
				turn1 = append(turn1, ev.Event+" "+ev.Channel+": "+ev.Text)
			}
		}
		want := []string{
			"typing start chatroom:#general",
			"streamed chatroom:#general: " + reply,
			"speech chatroom:#general: " + reply,
			"typing stop chatroom:#general",
		}
		if !slices.Equal(turn1, want) {
			t.Errorf("turn 1:\n%s\nwant:\n%s", strings.Join(turn1, "\n"), strings.Join(want, "\n"))
		}
	}
	check := func(t *testing.T, got []agent.Event) {
		t.Helper()
		firstTurn(t, got, "Hello alice, here I am.")
		var decline *agent.Event
		for i, ev := range got {
			if ev.Turn == 2 && ev.Event == agent.EventTool {
				decline = &got[i]
			}
		}
		if decline == nil || decline.Tool != "channel_decline" || !strings.Contains(decline.Text, `"acknowledged":true`) || !strings.Contains(decline.Text, `"representation":"👀"`) {
			t.Errorf("turn 2's decline: %+v", decline)
		}
	}

	t.Run("stdio", func(t *testing.T) {
		// probe: the policy is accepted and the messaging set enabled.
		code, out, errOut := runCLI("probe", "--", bin, "-q", "-script", room)
		if code != exitOK || !strings.Contains(out, "\npolicy: accepted\n") || !strings.Contains(out, "\n  chat.messaging: enabled\n") {
			t.Fatalf("probe: exit %d\n%s%s", code, out, errOut)
		}
		cfg := write("stdio.yaml", "store: ./stdio.db\nservers:\n  - id: room\n    command: ["+bin+", -q, -run=, -script, "+room+"]\n"+agents)
		check(t, runTurns(t, cfg, 2))
	})

	// The acceptance's own words: the scripted echo model.
	t.Run("echo", func(t *testing.T) {
		one := write("one.script", "+0s #general alice @agent: hello there\n")
		cfg := write("echo.yaml", "store: ./echo.db\nservers:\n  - id: room\n    command: ["+bin+", -q, -script, "+one+"]\n"+
			"agents:\n  - name: ada\n    model: {provider: scripted, echo: true}\n")
		firstTurn(t, runTurns(t, cfg, 1), "@agent hello there")
	})

	t.Run("websocket", func(t *testing.T) {
		url, roomLog := listenRoom(t, bin, "-run=", "-script", room)
		code, out, errOut := runCLI("probe", "--url", url)
		if code != exitOK || !strings.Contains(out, "\npolicy: accepted\n") || !strings.Contains(out, "\n  chat.messaging: enabled\n") {
			t.Fatalf("probe: exit %d\n%s%s", code, out, errOut)
		}
		cfg := write("ws.yaml", "store: ./ws.db\nservers:\n  - id: room\n    url: "+url+"\n    channels: {acknowledgeSeen: \"👀\"}\n"+agents)
		check(t, runTurns(t, cfg, 2))
		// The room saw alice's message acknowledged as seen
		// (acknowledgeSeen), the reply typed, streamed whole, then posted,
		// and dave's invitation declined with an acknowledgment (the
		// probe's visit wrote nothing of these).
		roomLog.waitFor(t, "(the agent saw dave's message and stays out: 👀)")
		roomLog.waitFor(t, "(the agent reacted to alice's message: 👀)") // sent beside the turn, in no set order
		want := []string{"(the agent is typing…)", "(streamed to the room", "AGENT: Hello alice", "(the agent saw dave"}
		var seen []string
		for _, l := range roomLog.lines() {
			for _, mark := range want {
				if strings.Contains(l, mark) {
					seen = append(seen, mark)
				}
			}
		}
		if !slices.Equal(seen, want) {
			t.Errorf("the room saw, in order, %q; want %q\nroom:\n%s", seen, want, strings.Join(roomLog.lines(), "\n"))
		}
		for _, l := range roomLog.lines() {
			// Streamed word by word: five chunks, and the whole reply.
			if strings.Contains(l, "(streamed to the room") && !strings.HasSuffix(l, "(streamed to the room in 5 chunks: Hello alice, here I am.)") {
				t.Errorf("the streamed text was not the reply: %s", l)
			}
		}
	})
}

// lineLog collects the lines a chat room writes to stderr.
type lineLog struct {
	mu      sync.Mutex
	all     []string
	changed chan struct{}
}

// follow reads r's lines until it ends, and returns the ws:// URL the room
// prints first.
func (l *lineLog) follow(t *testing.T, r interface{ Read([]byte) (int, error) }) string {
	t.Helper()
	l.changed = make(chan struct{})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "ws://"); i >= 0 {
				select {
				case found <- strings.Fields(line[i:])[0]:
				default:
				}
			}
			l.mu.Lock()
			l.all = append(l.all, line)
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("the chat room printed no ws:// URL")
		return ""
	}
}

func (l *lineLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// waitFor waits (up to 30 s) for a line that contains s.
func (l *lineLog) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		ch := l.changed
		for _, line := range l.all {
			if strings.Contains(line, s) {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the room never wrote %q:\n%s", s, strings.Join(l.lines(), "\n"))
		}
	}
}
