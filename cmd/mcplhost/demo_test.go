package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// noKeys clears the providers' keys and base URLs for the test, so the
// demo runs on the scripted model and never reaches the network.
func noKeys(t *testing.T) {
	for _, v := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"} {
		t.Setenv(v, "")
	}
}

// inOrder reports the first of lines that text lacks, or has before the
// line before it ("" when all are there, in order).
func inOrder(text string, lines ...string) string {
	at := 0
	for _, l := range lines {
		i := strings.Index(text[at:], l)
		if i < 0 {
			return l
		}
		at += i + len(l)
	}
	return ""
}

// TestDemo runs mcplhost demo as a newcomer does (building the chat room
// from this source), and checks its account shows the story, the room's
// side interleaved with the agent's: a reply typed, streamed and
// published; a join, with the channel's opening; a failed tool call; a
// decline acknowledged; chatter that never reaches the agent; and the
// summary, in time.
func TestDemo(t *testing.T) {
	noKeys(t)
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
		"mcplhost demo: ada runs on the scripted model (no key, no network), which plays its part of the story",
		"  room #general (open from the start)",
		"  channel #general is open: the room registers it open from the start",
		"  room #random bob: has anyone tried the new coffee machine?   (not delivered: #random is not open)",
		"  room #general alice: @agent morning! what did we decide about the release date?",
		"ada typing start in chatroom:#general",
		"  room #general (the agent is typing…)",
		"  room #general (the agent reacted to alice's message: 👀)",
		"ada streamed to chatroom:#general: Morning, alice! We settled on Thursday for the release.",
		"  room #general (streamed to the room in 9 chunks: Morning, alice! We settled on Thursday for the release.)",
		"ada says in chatroom:#general (delivered): Morning, alice! We settled on Thursday for the release.",
		"  room #dev erin: CI is green on main again   (not delivered: #dev is not open)",
		"  room #dev dave: @agent can you review PR 12? it touches the retry logic   (delivered though #dev is not open: it addresses the agent)",
		`ada channel_open: ok: {"channelId":"chatroom:#dev","status":"opened"}`,
		"  channel chatroom:#dev opened: ada joined it with channel_open",
		`ada room--history: tool-error: There is no channel "#nope"; the channels are #general, #random, #dev.`,
		"ada says in chatroom:#dev (delivered): Joined #dev. Looking at PR 12 now; the retry logic is the part to check.",
		`ada channel_decline: ok: {"acknowledged":true,"channelId":"chatroom:#random","representation":"👀","status":"remained closed"}`,
		"  channel chatroom:#random stays closed: ada declined the invitation, acknowledged with 👀",
		"  room #random bob: spaces, obviously   (not delivered: #random is not open)",
		"  room (the script has played out: nobody posts from here on)",
		"mcplhost demo: 3 turns, 2 replies delivered, 3 tool calls (1 failed), 2 notices",
		"  model:      scripted\n",
		"  transcript: ",
		"  store: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo did not show %q:\n%s", want, text)
		}
	}
	// What the room wrote before it answered the host comes before the
	// host's account of that answer: the FIFO's marks keep that order.
	for _, pair := range [][]string{
		{"  room #general AGENT: Morning, alice!", "ada says in chatroom:#general (delivered): Morning, alice!"},
		{"  room #dev (the agent opened the channel)", `ada channel_open: ok: {"channelId":"chatroom:#dev","status":"opened"}`},
		{"  room #dev AGENT: Joined #dev.", "ada says in chatroom:#dev (delivered): Joined #dev."},
		{"  room #random (the agent saw carol's message and stays out: 👀)", "ada channel_decline: ok:"},
		{"  room (the script has played out", "mcplhost demo: 3 turns"},
	} {
		if l := inOrder(text, pair...); l != "" {
			t.Errorf("%q is missing or out of order (want %q first):\n%s", l, pair[0], text)
		}
	}
	// The host's bootstrap of the channels (it opens #general, open from
	// the start, and closes the others) changes nothing in the room.
	if strings.Contains(text, "room #general (the agent opened the channel)") || strings.Contains(text, "room #random (the agent closed the channel)") {
		t.Errorf("the room wrote lines for opens and closes that changed nothing:\n%s", text)
	}
	if strings.Contains(text, "\x1b[") {
		t.Errorf("--color never printed colour")
	}
}

// TestDemoProviders runs the demo with a provider's key set, against a
// local fake of its API (the base URL from ANTHROPIC_BASE_URL or
// OPENAI_BASE_URL): the agent runs on the provider's model, and the demo
// ends when the room's script has played out and the agent has been
// quiet, naming the model that ran. On Anthropic's the fake answers as
// the script does; on OpenAI's the agent answers carol in #random instead
// of declining, and its reply opens the channel, which the demo tells
// from the host's notice.
func TestDemoProviders(t *testing.T) {
	bin := buildChatroom(t)
	old := demoQuiet
	demoQuiet = 300 * time.Millisecond
	t.Cleanup(func() { demoQuiet = old })
	story := []fakeapi.Reply{
		{Text: "Thursday, alice."},
		{Calls: []fakeapi.Call{{Name: "channel_open", Args: `{"channelId":"chatroom:#dev","serverId":"room"}`}}},
		{Text: "Looking at PR 12 now."},
	}
	for _, tc := range []struct {
		provider, key, baseURL, model string
		fake                          func(testing.TB, ...fakeapi.Reply) *fakeapi.Server
		last                          fakeapi.Reply
		want                          []string
	}{
		{"anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", demoAnthropicModel, fakeapi.NewAnthropic,
			fakeapi.Reply{Calls: []fakeapi.Call{{Name: "channel_decline", Args: `{"channelId":"chatroom:#random","serverId":"room","messageId":"chatroom-5","acknowledge":"👀"}`}}},
			[]string{
				"  channel chatroom:#random stays closed: ada declined the invitation, acknowledged with 👀",
				"mcplhost demo: 3 turns, 2 replies delivered, 2 tool calls (0 failed), 2 notices",
			}},
		// bob's last post in #random may come before the reply opens it or
		// after (then it wakes the agent once more): the counts vary.
		{"openai", "OPENAI_API_KEY", "OPENAI_BASE_URL", demoOpenAIModel, fakeapi.NewOpenAI,
			fakeapi.Reply{Text: "Spaces."},
			[]string{
				"ada says in chatroom:#random (delivered): Spaces.",
				"  room #random (the agent opened the channel)",
				"  channel #random (chatroom:#random) opened: ada's own message into the closed channel engaged it",
			}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			noKeys(t)
			t.Setenv("TMPDIR", t.TempDir())
			api := tc.fake(t, append(slices.Clone(story), tc.last)...)
			t.Setenv(tc.key, "test-key")
			t.Setenv(tc.baseURL, api.URL)
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"demo", "--color", "never", "--chatroom", bin}, &out, &errOut)
			text := out.String()
			if code != exitOK {
				t.Fatalf("exit %d\n%s\n%s", code, text, errOut.String())
			}
			if strings.Contains(text, "building examples/chatroom") {
				t.Errorf("the demo built the chat room though --chatroom named one:\n%s", text)
			}
			for _, want := range append([]string{
				"mcplhost demo: ada runs on " + tc.provider + "'s " + tc.model + " at " + api.URL + " (" + tc.key + " is set; --scripted runs the scripted model instead)",
				"ada says in chatroom:#general (delivered): Thursday, alice.",
				"  channel chatroom:#dev opened: ada joined it with channel_open",
				"ada says in chatroom:#dev (delivered): Looking at PR 12 now.",
				"  room (the script has played out: nobody posts from here on)",
				"  model:      " + tc.model + " on " + tc.provider + "\n",
			}, tc.want...) {
				if !strings.Contains(text, want) {
					t.Errorf("the demo did not show %q:\n%s", want, text)
				}
			}
			reqs := api.Requests()
			if len(reqs) < 4 {
				t.Errorf("the model was asked %d times, want 4 or more (one in the first turn, two in the second, one or two in the third)", len(reqs))
			}
			for _, r := range reqs {
				var body struct {
					Model string `json:"model"`
				}
				if json.Unmarshal(r, &body) != nil || body.Model != tc.model {
					t.Errorf("a request for model %q, want %q", body.Model, tc.model)
				}
			}
		})
	}
}

// TestPickDemoModel: the scripted model unless a key is set (white space
// is not a key) and --scripted is not; Anthropic's before OpenAI's; a
// provider's base URL from its own variable only.
func TestPickDemoModel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		scripted bool
		env      map[string]string
		want     demoModel
		yaml     string
	}{
		{"no key", false, nil, demoModel{provider: "scripted"}, "{provider: scripted, script: ./ada.yaml}"},
		{"a blank key", false, map[string]string{"ANTHROPIC_API_KEY": " "}, demoModel{provider: "scripted"}, "{provider: scripted, script: ./ada.yaml}"},
		{"--scripted", true, map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}, demoModel{provider: "scripted"}, "{provider: scripted, script: ./ada.yaml}"},
		{"anthropic", false, map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://o"},
			demoModel{"anthropic", demoAnthropicModel, "ANTHROPIC_API_KEY", ""},
			`{provider: anthropic, model: "claude-haiku-4-5", apiKeyEnv: ANTHROPIC_API_KEY}`},
		{"openai", false, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "ANTHROPIC_BASE_URL": "http://a"},
			demoModel{"openai", demoOpenAIModel, "OPENAI_API_KEY", "http://127.0.0.1:1/v1"},
			`{provider: openai, model: "gpt-4.1-mini", apiKeyEnv: OPENAI_API_KEY, baseURL: "http://127.0.0.1:1/v1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pickDemoModel(tc.scripted, func(k string) string { return tc.env[k] })
			if got != tc.want || got.yaml() != tc.yaml {
				t.Errorf("got %+v, %s; want %+v, %s", got, got.yaml(), tc.want, tc.yaml)
			}
		})
	}
}

// TestDemoFeedOrder: the feed prints the room's lines and the host's
// events in the order they reached its FIFO, joins a room line a mark
// split, and prints what is left at close.
func TestDemoFeedOrder(t *testing.T) {
	feed, err := openDemoFeed(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	story := newDemoStory(transcriptPrinter{p: printer{&out}}, true)
	feed.start(story)
	event := func(text string) {
		b, _ := json.Marshal(agent.Event{Agent: "ada", Turn: 1, Event: agent.EventNotice, Text: text})
		if _, err := feed.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	room := func(s string) {
		if _, err := feed.f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	room("[#general] alice: one\n")
	event("first")
	room("[#general] bob: a line ") // a mark comes in the middle of it
	event("second")
	room("cut in two\n")
	room("[#dev] (the agent opened the channel)\n")
	event("third")
	feed.close()
	feed.close() // a second close does nothing
	want := "  room #general alice: one\n" +
		"  ada is told: first\n" +
		"  ada is told: second\n" +
		"  room #general bob: a line cut in two\n" +
		"  room #dev (the agent opened the channel)\n" +
		"  ada is told: third\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if story.sum.notices != 3 {
		t.Errorf("%d notices counted, want 3", story.sum.notices)
	}
	if _, err := os.Stat(feed.path); !os.IsNotExist(err) {
		t.Errorf("the FIFO is still there after close: %v", err)
	}
}

// TestDemoChannelLines: a channel opened by the agent's reply, or selected
// by the subscription policy, or whose open failed after a reply, gets its
// line from the host's notice; channel_close and a decline without an
// acknowledgment from the tool's result. The notices are the host's own
// texts (agent.Route), so a reworded notice the demo no longer reads
// fails here.
func TestDemoChannelLines(t *testing.T) {
	var out bytes.Buffer
	story := newDemoStory(transcriptPrinter{p: printer{&out}}, true)
	readers := map[string]agent.Reader{"ada": {Name: "ada"}, "bob": {Name: "bob", Ended: true}}
	notice := func(n channels.Notice, label string) agent.Event {
		n.Server = "chat"
		n.Channels = []channels.ChannelRef{{ID: "chat:" + label, Label: "#" + label}}
		d := agent.Route(n, readers, "ada")
		if len(d) != 1 || d[0].To != "ada" {
			t.Fatalf("the notice on #%s went to %+v, want ada alone", label, d)
		}
		return agent.Event{Agent: "ada", Event: agent.EventNotice, Text: d[0].Text}
	}
	for _, ev := range []agent.Event{
		notice(channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByReply, Agent: "ada"}, "b"),
		notice(channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByReply, Agent: "bob"}, "c"),
		notice(channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceSubscriptionPolicy}, "d"),
		notice(channels.Notice{Kind: channels.NoticeReplyOpenFailed, Agent: "ada", Tool: "chat--send", Reason: "no"}, "e"),
		{Agent: "ada", Event: agent.EventTool, Tool: "channel_close", Outcome: "ok", Text: `{"channelId":"chat:f","status":"closed"}`},
		{Agent: "ada", Event: agent.EventTool, Tool: "channel_decline", Outcome: "ok", Text: `{"acknowledged":false,"channelId":"chat:g","status":"remained closed"}`},
		{Agent: "ada", Event: agent.EventTool, Tool: "channel_open", Outcome: "refused", Text: "channel_open is not a tool this agent may use"},
	} {
		story.event(ev)
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "  channel ") {
			got = append(got, l)
		}
	}
	want := []string{
		"  channel #b (chat:b) opened: ada's own message into the closed channel engaged it",
		"  channel #c (chat:c) opened: bob's message into the closed channel engaged it",
		"  channel #d (chat:d) selected for opening: the subscription policy admits it",
		"  channel #e (chat:e) is not open: a reply into it went out, but opening it failed",
		"  channel chat:f closed: ada left it with channel_close",
		"  channel chat:g stays closed: ada declined the invitation, without an acknowledgment",
	}
	if !slices.Equal(got, want) {
		t.Errorf("channel lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
