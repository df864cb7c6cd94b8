package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/model"
)

// toolTurn runs one turn on an open channel whose first model call asks
// for calls, and hands the harness to f while the calls run.
func toolTurn(t *testing.T, opts Options, calls []model.Block, gated []string, f func(h *harness, release map[string]func())) {
	m := &fakeModel{respond: script(respond(model.StopToolUse, calls...))}
	if len(opts.Agents) == 0 {
		opts.Agents = []Spec{{Name: "ada", Model: m}}
	}
	bubble(t, opts, func(h *harness) {
		h.env.channel("chat", "general", "open")
		release := map[string]func(){}
		for _, g := range gated {
			release[g] = h.env.gate(g)
			defer release[g]()
		}
		h.add(chanMsg("chat", "general", "g1", "go"))
		f(h, release)
	})
}

// results reads the tool results of the newest user message: call id and
// text.
func results(t *testing.T, req model.Request) [][2]string {
	t.Helper()
	var out [][2]string
	for _, b := range lastUser(t, req).Content {
		if b.Type == model.ToolResult {
			out = append(out, [2]string{b.Result.CallID, blocksText(b.Result.Content)})
		}
	}
	return out
}

// TestToolsOfServersRunAtOnce: calls to different servers run at once,
// and their results come back in the calls' order whichever ends first.
func TestToolsOfServersRunAtOnce(t *testing.T) {
	opts := Options{Env: newEnv("a--x", "b--y")}
	calls := []model.Block{callBlock("c1", "a--x"), callBlock("c2", "b--y")}
	toolTurn(t, opts, calls, []string{"a--x", "b--y"}, func(h *harness, release map[string]func()) {
		t := h.t
		entered, returned, _, _ := h.env.snapshot()
		slices.Sort(entered)
		if !slices.Equal(entered, []string{"a--x", "b--y"}) || len(returned) != 0 {
			t.Fatalf("entered %q, returned %q; want both entered, neither returned", entered, returned)
		}
		release["b--y"]()
		h.add()
		release["a--x"]()
		h.add()
		if _, returned, _, _ = h.env.snapshot(); !slices.Equal(returned, []string{"b--y", "a--x"}) {
			t.Errorf("returned %q", returned)
		}
		reqs := h.model.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2", len(reqs))
		}
		want := [][2]string{{"c1", "result of a--x"}, {"c2", "result of b--y"}}
		if diff := cmp.Diff(want, results(t, reqs[1])); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		var evs []string
		for _, ev := range h.rec.of("ada", EventTool) {
			evs = append(evs, ev.CallID+" "+ev.Tool+" "+ev.Outcome+" "+ev.Text)
		}
		if diff := cmp.Diff([]string{"c1 a--x ok result of a--x", "c2 b--y ok result of b--y"}, evs); diff != "" {
			t.Errorf("tool events (-want +got):\n%s", diff)
		}
	})
}

// TestToolsOfOneServerRunInOrder: calls to one server (the host's own
// tools are one) run one after another, in the order asked.
func TestToolsOfOneServerRunInOrder(t *testing.T) {
	opts := Options{Env: newEnv("a--x", "a--y", "channel_list", "channel_close")}
	calls := []model.Block{callBlock("c1", "a--x"), callBlock("c2", "channel_list"), callBlock("c3", "a--y"), callBlock("c4", "channel_close")}
	toolTurn(t, opts, calls, []string{"a--x", "channel_list"}, func(h *harness, release map[string]func()) {
		t := h.t
		entered, _, _, _ := h.env.snapshot()
		slices.Sort(entered)
		if !slices.Equal(entered, []string{"a--x", "channel_list"}) {
			t.Fatalf("entered %q; want the first of each server's only", entered)
		}
		release["a--x"]()
		h.add()
		entered, _, _, _ = h.env.snapshot()
		if len(entered) != 3 || entered[2] != "a--y" {
			t.Fatalf("entered %q; want a--y next", entered)
		}
		release["channel_list"]()
		h.add()
		_, returned, _, _ := h.env.snapshot()
		if i, j := slices.Index(returned, "a--x"), slices.Index(returned, "a--y"); i < 0 || j < i {
			t.Errorf("returned %q: a--y before a--x", returned)
		}
		if i, j := slices.Index(returned, "channel_list"), slices.Index(returned, "channel_close"); i < 0 || j < i {
			t.Errorf("returned %q: channel_close before channel_list", returned)
		}
		reqs := h.model.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2", len(reqs))
		}
		want := [][2]string{{"c1", "result of a--x"}, {"c2", "result of channel_list"}, {"c3", "result of a--y"}, {"c4", "result of channel_close"}}
		if diff := cmp.Diff(want, results(t, reqs[1])); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
	})
}

func TestGroup(t *testing.T) {
	for name, want := range map[string]string{"a--x": "a", "a--b--c": "a", "channel_list": "", "--x": "", "a-x": ""} {
		if got := group(name); got != want {
			t.Errorf("group(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestToolNotAllowed: a tool the agent may not use is neither offered nor
// called; a call of it is answered with the refusal.
func TestToolNotAllowed(t *testing.T) {
	allowed := func(n string) bool { return n != "a--secret" }
	m := &fakeModel{respond: script(respond(model.StopToolUse, callBlock("c1", "a--secret"), callBlock("c2", "a--x")))}
	opts := Options{Env: newEnv("a--x", "a--secret"), Agents: []Spec{{Name: "ada", Model: m, Allowed: allowed}}}
	toolTurn(t, opts, nil, nil, func(h *harness, _ map[string]func()) {
		t := h.t
		reqs := m.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2", len(reqs))
		}
		if got := toolNames(reqs[0].Tools); !slices.Equal(got, []string{"a--x"}) {
			t.Errorf("offered %q", got)
		}
		if entered, _, _, _ := h.env.snapshot(); !slices.Equal(entered, []string{"a--x"}) {
			t.Errorf("the env was called for %q", entered)
		}
		var refusal *model.Result
		for _, b := range lastUser(t, reqs[1]).Content {
			if b.Type == model.ToolResult && b.Result.CallID == "c1" {
				refusal = b.Result
			}
		}
		if refusal == nil || !refusal.IsError || len(refusal.Content) != 1 || refusal.Content[0].Text != textToolNotAllowed("a--secret") {
			t.Errorf("answer to the refused call: %+v", refusal)
		}
		if want := "a--secret is not a tool this agent may use, so it was not called, and nothing was done. Use only the tools you were given."; textToolNotAllowed("a--secret") != want {
			t.Errorf("textToolNotAllowed = %q", textToolNotAllowed("a--secret"))
		}
		evs := h.rec.of("ada", EventTool)
		if len(evs) != 2 || evs[0].Outcome != "refused" || evs[1].Outcome != "ok" {
			t.Errorf("tool events %+v; want refused, ok", evs)
		}
	})
}

// TestToolErrorOutcome: a failed tool's outcome is the env's.
func TestToolErrorOutcome(t *testing.T) {
	env := newEnv("a--x")
	env.answers["a--x"] = ToolAnswer{Content: []model.Block{textBlock("no")}, IsError: true, Outcome: "not-sent"}
	toolTurn(t, Options{Env: env}, []model.Block{callBlock("c1", "a--x")}, nil, func(h *harness, _ map[string]func()) {
		evs := h.rec.of("ada", EventTool)
		if len(evs) != 1 || evs[0].Outcome != "not-sent" || evs[0].Text != "no" {
			h.t.Errorf("tool events %+v", evs)
		}
		reqs := h.model.requests()
		if len(reqs) != 2 {
			h.t.Fatalf("%d model calls, want 2", len(reqs))
		}
		if c := lastUser(h.t, reqs[1]).Content; len(c) != 1 || !c[0].Result.IsError {
			h.t.Errorf("result %+v, want an error", c)
		}
	})
}

// TestMaxRounds: a turn that keeps calling tools ends at the limit, with
// its note.
func TestMaxRounds(t *testing.T) {
	m := &fakeModel{respond: func(int, model.Request) (model.Response, error) {
		return respond(model.StopToolUse, callBlock("c", "a--x")), nil
	}}
	opts := Options{Env: newEnv("a--x"), MaxRounds: 3, Agents: []Spec{{Name: "ada", Model: m}}}
	toolTurn(t, opts, nil, nil, func(h *harness, _ map[string]func()) {
		if n := len(m.requests()); n != 3 {
			h.t.Errorf("%d model calls, want 3", n)
		}
		if evs := h.rec.of("ada", EventTurnEnd); len(evs) != 1 || evs[0].Reason != "max_rounds" {
			h.t.Errorf("turn_end %+v", evs)
		}
		evs := h.rec.of("ada", EventNotice)
		if len(evs) != 1 || evs[0].Text != textMaxRounds(3) {
			h.t.Errorf("notices %+v, want %q", evs, textMaxRounds(3))
		}
	})
}

// TestHooks: the system injections follow Spec.System; the user ones go
// around the newest user message; the first call has the shown text; each
// call's lifecycle completes with its usage. Injections are not recorded.
func TestHooks(t *testing.T) {
	m := &fakeModel{respond: script(
		model.Response{Content: []model.Block{callBlock("c1", "a--x")}, Stop: model.StopToolUse, Usage: model.Usage{InputTokens: 10, OutputTokens: 2}},
		model.Response{Stop: model.EndTurn, Usage: model.Usage{InputTokens: 20, OutputTokens: 3}},
	)}
	hooks := &fakeHooks{system: []model.Block{textBlock("S1"), textBlock("S2")}, before: []model.Block{textBlock("BEFORE")}, after: []model.Block{textBlock("AFTER")}}
	opts := Options{Env: newEnv("a--x"), Hooks: hooks, Agents: []Spec{{Name: "ada", Model: m, System: "base"}}}
	toolTurn(t, opts, nil, nil, func(h *harness, _ map[string]func()) {
		t := h.t
		reqs := m.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2", len(reqs))
		}
		for i, r := range reqs {
			if r.System != "base\n\nS1\nS2" {
				t.Errorf("call %d: system %q", i, r.System)
			}
		}
		first := lastUser(t, reqs[0]).Content
		if n := len(first); n < 3 || first[0].Text != "BEFORE" || first[n-1].Text != "AFTER" || !strings.Contains(blocksText(first[1:n-1]), "go") {
			t.Errorf("first call's user message %+v", first)
		}
		second := lastUser(t, reqs[1]).Content
		if len(second) != 3 || second[0].Type != model.ToolResult || second[1].Text != "BEFORE" || second[2].Text != "AFTER" {
			t.Errorf("second call's user message %+v; want the result, then the injections", second)
		}

		hooks.mu.Lock()
		infs, ends, usage := hooks.infs, hooks.ends, hooks.usage
		hooks.mu.Unlock()
		shown := h.rec.of("ada", EventShown)
		if len(infs) != 2 || len(shown) != 1 {
			t.Fatalf("%d inferences, %d shown", len(infs), len(shown))
		}
		if infs[0].UserMessage == nil || *infs[0].UserMessage != shown[0].Text {
			t.Errorf("first inference's UserMessage %v, want %q", infs[0].UserMessage, shown[0].Text)
		}
		if infs[1].UserMessage != nil {
			t.Errorf("second inference's UserMessage %q, want nil", *infs[1].UserMessage)
		}
		for _, inf := range infs {
			if inf.Conversation != "ada" || inf.TurnIndex != 0 || inf.Model.ID != "fake-1" || !strings.HasPrefix(inf.ID, "inf_") {
				t.Errorf("inference %+v", inf)
			}
		}
		if infs[0].ID == infs[1].ID {
			t.Errorf("two inferences with one id %q", infs[0].ID)
		}
		if !slices.Equal(ends, []string{"completed", "completed"}) {
			t.Errorf("lifecycle %q", ends)
		}
		if diff := cmp.Diff([]model.Usage{{InputTokens: 10, OutputTokens: 2}, {InputTokens: 20, OutputTokens: 3}}, usage); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
		for _, e := range history(t, h.st, "ada") {
			for _, b := range e.Content {
				if b.Text == "BEFORE" || b.Text == "AFTER" {
					t.Errorf("an injection was recorded: %+v", e)
				}
			}
		}
	})
}

// TestHooksNextTurn: a later turn's first call has its own user message,
// and its TurnIndex counts on.
func TestHooksNextTurn(t *testing.T) {
	hooks := &fakeHooks{}
	bubble(t, Options{Hooks: hooks}, func(h *harness) {
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "one"))
		h.add(chanMsg("chat", "general", "g2", "two"))
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		if len(hooks.infs) != 2 {
			h.t.Fatalf("%d inferences", len(hooks.infs))
		}
		for i, inf := range hooks.infs {
			if inf.TurnIndex != i || inf.UserMessage == nil {
				h.t.Errorf("inference %d: %+v", i, inf)
			}
		}
		if !strings.Contains(*hooks.infs[1].UserMessage, "two") || strings.Contains(*hooks.infs[1].UserMessage, "one") {
			h.t.Errorf("second turn's UserMessage %q", *hooks.infs[1].UserMessage)
		}
	})
}

// TestSilencedSpeech: prose beside a call that posts itself is not
// published; beside another call it is.
func TestSilencedSpeech(t *testing.T) {
	m := &fakeModel{respond: script(
		respond(model.StopToolUse, textBlock("posting it"), callBlock("c1", "chat--send")),
		respond(model.StopToolUse, textBlock("looking it up"), callBlock("c2", "a--x")),
	)}
	env := newEnv("chat--send", "a--x")
	env.silences["chat--send"] = true
	toolTurn(t, Options{Env: env, Agents: []Spec{{Name: "ada", Model: m}}}, nil, nil, func(h *harness, _ map[string]func()) {
		_, _, _, pubs := h.env.snapshot()
		if diff := cmp.Diff([]publication{{"ada", "chat", "general", "looking it up"}}, pubs); diff != "" {
			h.t.Errorf("published (-want +got):\n%s", diff)
		}
		evs := h.rec.of("ada", EventSpeech)
		if len(evs) != 2 || evs[0].Outcome != "withheld" || evs[0].Tool != "chat--send" || evs[0].Text != "posting it" || evs[1].Text != "looking it up" {
			h.t.Errorf("speech events %+v", evs)
		}
		want := "[not posted] Your plain text beside your chat--send call was not posted: that call's post stands for it, so nothing was sent twice."
		if notes := h.rec.of("ada", EventNotice); len(notes) == 0 || notes[0].Text != want {
			h.t.Errorf("notices %+v\nwant first %q", notes, want)
		}
	})
}

// TestRefusedPostKeepsSpeech: a posting call that is refused leaves the
// prose beside it to be posted, rather than lost.
func TestRefusedPostKeepsSpeech(t *testing.T) {
	m := &fakeModel{respond: script(
		respond(model.StopToolUse, textBlock("here is my answer"), callBlock("c1", channels.ToolPublish)),
	)}
	env := newEnv(channels.ToolPublish)
	env.silences[channels.ToolPublish] = true
	allowed := func(n string) bool { return n != channels.ToolPublish }
	toolTurn(t, Options{Env: env, Agents: []Spec{{Name: "ada", Model: m, Allowed: allowed}}}, nil, nil, func(h *harness, _ map[string]func()) {
		_, _, _, pubs := h.env.snapshot()
		if diff := cmp.Diff([]publication{{"ada", "chat", "general", "here is my answer"}}, pubs); diff != "" {
			h.t.Errorf("published (-want +got):\n%s", diff)
		}
	})
}

// TestSpeechWithoutLocus: prose in a turn a push event woke goes nowhere,
// and the agent is told.
func TestSpeechWithoutLocus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed func(string) bool
		want    string
	}{
		{"may publish", nil, "[not delivered] Your reply went nowhere: this turn wasn't woken by a channel message, so your plain text has no channel to go to. It is kept in this conversation only. channel_publish posts to a channel you name."},
		{"may not publish", func(n string) bool { return n != channels.ToolPublish }, "[not delivered] Your reply went nowhere: this turn wasn't woken by a channel message, so your plain text has no channel to go to. It is kept in this conversation only."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeModel{respond: script(respond(model.EndTurn, textBlock("the build is fixed")))}
			bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Allowed: tc.allowed}}}, func(h *harness) {
				h.add(pushMsg("ci", "e1", "build failed"))
				if _, _, _, pubs := h.env.snapshot(); len(pubs) != 0 {
					h.t.Errorf("published %+v", pubs)
				}
				if evs := h.rec.of("ada", EventSpeech); len(evs) != 1 || evs[0].Outcome != channels.Failed || evs[0].Channel != "" {
					h.t.Errorf("speech events %+v", evs)
				}
				if evs := h.rec.of("ada", EventNotice); len(evs) != 1 || evs[0].Text != tc.want {
					h.t.Errorf("notices %+v\nwant %q", evs, tc.want)
				}
				hist := history(h.t, h.st, "ada")
				if n := len(hist); n == 0 || hist[n-1].Role != model.User || hist[n-1].Content[len(hist[n-1].Content)-1].Text != tc.want {
					h.t.Errorf("recorded %+v; want the note last", hist)
				}
			})
		})
	}
}

// TestSpeechOutcome: the agent reads how its reply went, in the words of
// each status.
func TestSpeechOutcome(t *testing.T) {
	for _, tc := range []struct {
		out  channels.PublishOutcome
		want string
	}{
		{channels.PublishOutcome{Status: channels.Delivered, Server: "chat", Channel: "general", Label: "#general", MessageID: "p1"}, "[delivered] Your reply was posted to #general (general)."},
		{channels.PublishOutcome{Status: channels.Unconfirmed, Channel: "general", Text: "the server sent no receipt."}, "[unconfirmed] Your reply: the server sent no receipt."},
		{channels.PublishOutcome{Status: channels.Failed, Channel: "general", Text: "the channel is gone."}, "[not delivered] Your reply: the channel is gone."},
	} {
		t.Run(tc.out.Status, func(t *testing.T) {
			if got := textSpeechOutcome(tc.out); got != tc.want {
				t.Errorf("textSpeechOutcome = %q, want %q", got, tc.want)
			}
			env := newEnv()
			env.outcome = func(string, string, string) channels.PublishOutcome { return tc.out }
			m := &fakeModel{respond: script(respond(model.EndTurn, textBlock("  hello there \n")))}
			bubble(t, Options{Env: env, Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
				h.env.channel("chat", "quiet", "closed")
				h.add(chanMsg("chat", "quiet", "q1", "ada?", "chat:addressed"))
				// The reply goes where the addressed message came from,
				// closed or not: Publish opens it.
				if _, _, _, pubs := h.env.snapshot(); len(pubs) != 1 || pubs[0] != (publication{"ada", "chat", "quiet", "hello there"}) {
					h.t.Errorf("published %+v", pubs)
				}
				if evs := h.rec.of("ada", EventSpeech); len(evs) != 1 || evs[0].Outcome != tc.out.Status || evs[0].Server != "chat" || evs[0].Channel != "quiet" {
					h.t.Errorf("speech events %+v", evs)
				}
				if evs := h.rec.of("ada", EventNotice); len(evs) != 1 || evs[0].Text != tc.want {
					h.t.Errorf("notices %+v, want %q", evs, tc.want)
				}
			})
		})
	}
}
