package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemo runs mcplhost demo as a newcomer does, and checks its account
// shows the story: a reply typed, streamed and published; a join; a
// failed tool call; a decline acknowledged; and the summary, in time.
func TestDemo(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the demo's folder, removed after
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"demo", "--color", "never"}, &out, &errOut)
	took := time.Since(start)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if took > demoDeadline {
		t.Errorf("the demo took %s, more than %s", took, demoDeadline)
	}
	text := out.String()
	for _, want := range []string{
		"ada typing start in chatroom:#general",
		"ada streamed to chatroom:#general: Morning, alice! We settled on Thursday for the release.",
		"ada says in chatroom:#general (delivered): Morning, alice! We settled on Thursday for the release.",
		`ada channel_open: ok: {"channelId":"chatroom:#dev","status":"opened"}`,
		`ada room--history: tool-error: There is no channel "#nope"; the channels are #general, #random, #dev.`,
		"ada says in chatroom:#dev (delivered): Joined #dev. Looking at PR 12 now; the retry logic is the part to check.",
		`ada channel_decline: ok: {"acknowledged":true,"channelId":"chatroom:#random","representation":"👀","status":"remained closed"}`,
		"mcplhost demo: 3 turns, 2 replies delivered, 3 tool calls (1 failed), 2 notices",
		"  transcript: ",
		"  store: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo did not show %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b[") {
		t.Errorf("--color never printed colour")
	}
}
