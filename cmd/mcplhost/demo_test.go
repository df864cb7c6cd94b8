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
// reply in a thread, landed in it; a direct message answered privately;
// a decline acknowledged; chatter that never reaches the agent; and the
// summary, in time. The host's transcript (the file the summary names)
// says the same of the thread's reply and the DM's.
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
		// frank asks in a thread of #dev: the reply lands in the thread.
		"  room #dev frank (in thread pr-12): @agent is the retry backoff in PR 12 capped?",
		"ada turn 3, woken by chatroom-5 in chatroom:#dev on room",
		"    | [#dev (chatroom:#dev) on room · from frank · thread pr-12 · addressed to you · message chatroom-5 · at ",
		"  room #dev AGENT (in thread pr-12): Yes, frank: the backoff doubles from 1s and is capped at 30s.",
		"ada says in chatroom:#dev (delivered): Yes, frank: the backoff doubles from 1s and is capped at 30s.",
		"ada is told: [delivered] Your reply was posted to #dev (chatroom:#dev), in thread pr-12.",
		// bob writes to ada directly: the reply opens the DM and lands
		// there, privately.
		"  room @bob bob (to the agent, privately): between us, is PR 12 safe to merge before the release?",
		"    | [chatroom:dm:bob on room · from bob · direct message · addressed to you · message chatroom-6 · at ",
		"  room @bob (the agent opened the channel)",
		"  room @bob AGENT (to bob, privately): Between us, bob: yes, once CI is green; the retry change is small.",
		"ada says in chatroom:dm:bob (delivered): Between us, bob: yes, once CI is green; the retry change is small.",
		"  channel chatroom:dm:bob opened: ada's own message into the closed channel engaged it",
		"  channel chatroom:#random stays closed: ada declined the invitation, acknowledged with 👀",
		"  room #random bob: spaces, obviously   (not delivered: #random is not open)",
		"  room (the script has played out: nobody posts from here on)",
		"mcplhost demo: 5 turns, 4 replies delivered, 3 tool calls (1 failed), 5 notices",
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
		{"  room #dev AGENT (in thread pr-12): Yes, frank:", "ada says in chatroom:#dev (delivered): Yes, frank:"},
		{"  room @bob (the agent opened the channel)", "  room @bob AGENT (to bob, privately): Between us, bob:", "ada says in chatroom:dm:bob (delivered): Between us, bob:"},
		{"  room #random (the agent saw carol's message and stays out: 👀)", "ada channel_decline: ok:"},
		{"  room (the script has played out", "mcplhost demo: 5 turns"},
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
	// Nothing else of the agent's landed in the thread or the DM.
	if n := strings.Count(text, "  room #dev AGENT (in thread "); n != 1 {
		t.Errorf("%d posts of the agent in a thread, want 1:\n%s", n, text)
	}
	if n := strings.Count(text, "  room @bob AGENT "); n != 1 {
		t.Errorf("%d posts of the agent in bob's DM, want 1:\n%s", n, text)
	}
	demoTranscriptPlaces(t, text)
}

// demoTranscriptPlaces reads the host's transcript, at the path the
// demo's summary gives, and checks where it says the thread's reply and
// the DM's went: each speech delivered into its channel, and the thread's
// confirmed in the thread (the room echoed it, RFC-011 §5).
func demoTranscriptPlaces(t *testing.T, text string) {
	t.Helper()
	_, rest, ok := strings.Cut(text, "\n  transcript: ")
	path, _, _ := strings.Cut(rest, " ")
	if !ok || path == "" {
		t.Fatalf("the summary names no transcript:\n%s", text)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev agent.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	// speech finds the speech of text and the notice after it.
	speech := func(prefix string) (agent.Event, string) {
		for i, ev := range evs {
			if ev.Event == agent.EventSpeech && strings.HasPrefix(ev.Text, prefix) {
				for _, n := range evs[i+1:] {
					if n.Event == agent.EventNotice && n.Turn == ev.Turn {
						return ev, n.Text
					}
				}
				return ev, ""
			}
		}
		t.Errorf("the transcript has no speech %q", prefix)
		return agent.Event{}, ""
	}
	if sp, notice := speech("Yes, frank:"); sp.Channel != "chatroom:#dev" || sp.Outcome != "delivered" ||
		notice != "[delivered] Your reply was posted to #dev (chatroom:#dev), in thread pr-12." {
		t.Errorf("the thread's reply: %+v, told %q; want delivered into chatroom:#dev, in thread pr-12", sp, notice)
	}
	if sp, notice := speech("Between us, bob:"); sp.Channel != "chatroom:dm:bob" || sp.Outcome != "delivered" ||
		notice != "[delivered] Your reply was posted to chatroom:dm:bob." {
		t.Errorf("the DM's reply: %+v, told %q; want delivered into chatroom:dm:bob", sp, notice)
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
		{Text: "Capped at 30s, frank."},
		{Text: "Yes, bob, once CI is green."},
	}
	for _, tc := range []struct {
		provider, key, baseURL, model string
		fake                          func(testing.TB, ...fakeapi.Reply) *fakeapi.Server
		last                          fakeapi.Reply
		want                          []string
	}{
		{"anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", demoAnthropicModel, fakeapi.NewAnthropic,
			fakeapi.Reply{Calls: []fakeapi.Call{{Name: "channel_decline", Args: `{"channelId":"chatroom:#random","serverId":"room","messageId":"chatroom-7","acknowledge":"👀"}`}}},
			[]string{
				"  channel chatroom:#random stays closed: ada declined the invitation, acknowledged with 👀",
				"mcplhost demo: 5 turns, 4 replies delivered, 2 tool calls (0 failed), 5 notices",
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
				"  room #dev AGENT (in thread pr-12): Capped at 30s, frank.",
				"ada says in chatroom:#dev (delivered): Capped at 30s, frank.",
				"  room @bob AGENT (to bob, privately): Yes, bob, once CI is green.",
				"ada says in chatroom:dm:bob (delivered): Yes, bob, once CI is green.",
				"  room (the script has played out: nobody posts from here on)",
				"  model:      " + tc.model + " on " + tc.provider + "\n",
			}, tc.want...) {
				if !strings.Contains(text, want) {
					t.Errorf("the demo did not show %q:\n%s", want, text)
				}
			}
			// The stand-in checks tool schemas as the hosted API does.
			if refused := api.SchemaRefusals(); len(refused) != 0 {
				t.Errorf("the stand-in refused the demo's tools: %q", refused)
			}
			reqs := api.Requests()
			if len(reqs) < 6 {
				t.Errorf("the model was asked %d times, want 6 or more (one in the first turn, two in the second, one each in the thread's and the DM's, one or two in the last)", len(reqs))
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
