package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

func TestStartWithoutAgents(t *testing.T) {
	if _, err := Start(Options{Store: store.NewMemory(), Env: newEnv()}); err == nil {
		t.Error("Start with no agents: no error")
	}
}

// TestStartAtTheInboxEnd: an agent with no cursor doesn't read what came
// before it; its starting place is recorded.
func TestStartAtTheInboxEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := Options{}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		old := addMessages(t, h.st, chanMsg("chat", "general", "m1", "before ada"), chanMsg("chat", "general", "m2", "also before"))
		h.start(opts)
		defer h.rt.Close()
		synctest.Wait()

		if n := len(h.model.requests()); n != 0 {
			t.Errorf("%d model calls for messages from before the agent", n)
		}
		if evs := h.rec.of("ada", EventTurnStart); len(evs) != 0 {
			t.Errorf("turns for messages from before the agent: %+v", evs)
		}
		if c, ok := h.cursors()["agent/ada"]; !ok || c != old[1].Seq {
			t.Errorf("cursor agent/ada = %d, %v; want %d", c, ok, old[1].Seq)
		}

		h.add(chanMsg("chat", "general", "m3", "after ada"))
		reqs := h.model.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d model calls, want 1", len(reqs))
		}
		texts := userTexts(reqs[0].Messages)
		if !containsText(texts, "after ada") || containsText(texts, "before ada") || containsText(texts, "also before") {
			t.Errorf("the model was shown %q", texts)
		}
	})
}

// TestStartAtTheCursor: an agent with a cursor reads what came after it,
// and only that.
func TestStartAtTheCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := Options{}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		msgs := addMessages(t, h.st, chanMsg("chat", "general", "m1", "consumed"), chanMsg("chat", "general", "m2", "second"), chanMsg("chat", "general", "m3", "third"))
		if _, err := h.st.Record(context.Background(), nil, map[string]int64{"agent/ada": msgs[0].Seq}); err != nil {
			t.Fatal(err)
		}
		h.start(opts)
		defer h.rt.Close()
		synctest.Wait()

		var shown []string
		for _, ev := range h.rec.of("ada", EventShown) {
			shown = append(shown, ev.Text)
		}
		all := strings.Join(shown, "\n")
		if strings.Contains(all, "consumed") || !strings.Contains(all, "second") || !strings.Contains(all, "third") {
			t.Errorf("shown %q; want the messages after the cursor", shown)
		}
		if strings.Index(all, "second") > strings.Index(all, "third") {
			t.Errorf("shown out of order: %q", all)
		}
		if c := h.cursor("ada", "chat"); c != msgs[2].Seq {
			t.Errorf("cursor agent/ada = %d, want %d", c, msgs[2].Seq)
		}
		// The recorded conversation has them too.
		var recorded []string
		for _, e := range history(t, h.st, "ada") {
			for _, b := range e.Content {
				recorded = append(recorded, b.Text)
			}
		}
		if !containsText(recorded, "second") || !containsText(recorded, "third") {
			t.Errorf("recorded %q", recorded)
		}
	})
}

// TestRestartReadsHistory: a restarted agent's model is sent what it said
// before, and counts its turns on.
func TestRestartReadsHistory(t *testing.T) {
	st := store.NewMemory()
	run := func(text string) *harness {
		var h *harness
		synctest.Test(t, func(t *testing.T) {
			opts := Options{Store: st}
			h = setup(t, &opts)
			h.env.channel("chat", "general", "open")
			h.model.respond = script(respond(model.EndTurn, textBlock("reply to "+text)))
			h.start(opts)
			defer h.rt.Close()
			synctest.Wait()
			h.add(chanMsg("chat", "general", text, text))
		})
		return h
	}
	run("one")
	h := run("two")
	reqs := h.model.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(reqs))
	}
	var said []string
	for _, m := range reqs[0].Messages {
		if m.Role == model.Assistant {
			said = append(said, m.Content[0].Text)
		}
	}
	if len(said) != 1 || said[0] != "reply to one" {
		t.Errorf("the restarted agent's model was sent %q of what it said", said)
	}
	if evs := h.rec.of("ada", EventTurnStart); len(evs) != 1 || evs[0].Turn != 2 {
		t.Errorf("turn_start after a restart: %+v, want turn 2", evs)
	}
}

func TestVisibility(t *testing.T) {
	bubble(t, Options{}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "quiet", "closed")
		h.env.channel("chat", "general", "open")

		// Closed, not addressed: consumed unseen.
		m := h.add(chanMsg("chat", "quiet", "q1", "not for ada"))
		if evs := h.rec.of("ada", EventTurnStart); len(evs) != 0 {
			t.Errorf("a closed channel's message woke the agent: %+v", evs)
		}
		if n := len(h.model.requests()); n != 0 {
			t.Errorf("%d model calls", n)
		}
		if c := h.cursor("ada", "chat"); c != m[0].Seq {
			t.Errorf("cursor agent/ada = %d, want %d (consumed)", c, m[0].Seq)
		}

		// An unknown channel (registered when it came, gone since, and
		// nobody decided: closed by default on a server the host
		// directs): the same.
		gone := chanMsg("chat", "nowhere", "n1", "unknown channel")
		gone.Directed = true
		m = h.add(gone)
		if evs := h.rec.of("ada", EventTurnStart); len(evs) != 0 {
			t.Errorf("an unknown channel's message woke the agent: %+v", evs)
		}
		if c := h.cursor("ada", "chat"); c != m[0].Seq {
			t.Errorf("cursor agent/ada = %d, want %d (consumed)", c, m[0].Seq)
		}

		// Closed, addressed: a turn, with the invitation.
		m = h.add(chanMsg("chat", "quiet", "q2", "ada, look", "chat:addressed"))
		evs := h.rec.of("ada", EventShown)
		if len(evs) != 1 {
			t.Fatalf("shown events %+v, want one", evs)
		}
		if !strings.Contains(evs[0].Text, "[Channel invitation]") || !strings.Contains(evs[0].Text, "ada, look") || strings.Contains(evs[0].Text, "not for ada") {
			t.Errorf("shown %q", evs[0].Text)
		}
		if ts := h.rec.of("ada", EventTurnStart); len(ts) != 1 || len(ts[0].WokenBy) != 1 || ts[0].WokenBy[0] != (Wake{Kind: "channel", Server: "chat", Channel: "quiet", MessageID: "q2"}) {
			t.Errorf("turn_start %+v", ts)
		}
		if c := h.cursor("ada", "chat"); c != m[0].Seq {
			t.Errorf("cursor agent/ada = %d, want %d", c, m[0].Seq)
		}

		// Open: any message wakes, with no invitation; addressed or not.
		h.add(chanMsg("chat", "general", "g1", "hello all"))
		h.add(chanMsg("chat", "general", "g2", "hello ada", "chat:addressed"))
		evs = h.rec.of("ada", EventShown)
		if len(evs) != 3 {
			t.Fatalf("shown events %+v, want three", evs)
		}
		for i, want := range []string{"hello all", "hello ada"} {
			ev := evs[i+1]
			if !strings.Contains(ev.Text, want) || strings.Contains(ev.Text, "[Channel invitation]") {
				t.Errorf("shown %q; want %q without an invitation", ev.Text, want)
			}
		}
		if n := len(h.model.requests()); n != 3 {
			t.Errorf("%d model calls, want 3", n)
		}
	})
}

// TestPushEventWakes: a push event is shown, as an event.
func TestPushEventWakes(t *testing.T) {
	bubble(t, Options{}, func(h *harness) {
		h.add(pushMsg("feed", "e1", "the build broke"))
		evs := h.rec.of("ada", EventShown)
		if len(evs) != 1 || !strings.Contains(evs[0].Text, "the build broke") || !strings.Contains(evs[0].Text, "feed") {
			h.t.Errorf("shown %+v", evs)
		}
		if ts := h.rec.of("ada", EventTurnStart); len(ts) != 1 || ts[0].WokenBy[0] != (Wake{Kind: "push", Server: "feed", MessageID: "e1"}) {
			h.t.Errorf("turn_start %+v", ts)
		}
	})
}

var openedGeneral = channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByDelivery, Server: "chat", Agent: "ada",
	Channels: []channels.ChannelRef{{ID: "general", Label: "#general"}}}

// TestNoticeWhileIdle: a notice is recorded, and doesn't wake the agent;
// its next turn's model call reads it before what woke it.
func TestNoticeWhileIdle(t *testing.T) {
	bubble(t, Options{}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		want := textOpened(openedGeneral, "", Reader{Name: "ada"})
		h.rt.Notice(openedGeneral)
		synctest.Wait()
		if evs := h.rec.of("ada", EventNotice); len(evs) != 1 || evs[0].Text != want {
			t.Errorf("notice events %+v, want one of %q", evs, want)
		}
		if evs := h.rec.of("ada", EventTurnStart); len(evs) != 0 {
			t.Errorf("a notice woke the agent: %+v", evs)
		}
		if n := len(h.model.requests()); n != 0 {
			t.Errorf("%d model calls after a notice", n)
		}
		if hist := history(t, h.st, "ada"); len(hist) != 1 || hist[0].Role != model.User || hist[0].Content[0].Text != want {
			t.Errorf("recorded %+v, want the notice as a user message", hist)
		}

		h.add(chanMsg("chat", "general", "g1", "hi"))
		reqs := h.model.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d model calls, want 1", len(reqs))
		}
		texts := userTexts(reqs[0].Messages)
		if len(texts) < 2 || texts[0] != want || !strings.Contains(strings.Join(texts[1:], "\n"), "hi") {
			t.Errorf("the model read %q; want the notice, then the message", texts)
		}
		if evs := h.rec.of("ada", EventNotice); len(evs) != 1 {
			t.Errorf("the notice was read %d times", len(evs))
		}
	})
}

// TestNoticeDuringToolCall: a notice that comes while a tool runs goes in
// after that round's tool results.
func TestNoticeDuringToolCall(t *testing.T) {
	m := &fakeModel{respond: script(respond(model.StopToolUse, callBlock("c1", "slow--wait"), callBlock("c2", "fast--go")))}
	bubble(t, Options{Env: newEnv("slow--wait", "fast--go"), Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		release := h.env.gate("slow--wait")
		defer release()
		h.add(chanMsg("chat", "general", "g1", "do it"))
		if entered, _, _, _ := h.env.snapshot(); !containsText(entered, "slow--wait") {
			t.Fatalf("entered %q", entered)
		}
		want := textOpened(openedGeneral, "", Reader{Name: "ada"})
		h.rt.Notice(openedGeneral)
		synctest.Wait()
		if n := len(m.requests()); n != 1 {
			t.Fatalf("%d model calls while the tool runs, want 1", n)
		}
		release()
		synctest.Wait()
		reqs := m.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2", len(reqs))
		}
		last := lastUser(t, reqs[1])
		if len(last.Content) != 3 || last.Content[0].Type != model.ToolResult || last.Content[1].Type != model.ToolResult ||
			last.Content[2].Type != model.Text || last.Content[2].Text != want {
			t.Errorf("the user message after the tools: %+v; want the two results, then the notice", last.Content)
		}
		if evs := h.rec.of("ada", EventTurnStart); len(evs) != 1 {
			t.Errorf("turns %+v, want 1: the notice doesn't wake", evs)
		}
	})
}

// TestCloseDuringModelCall: Close aborts the model call, records the turn
// as it stands, and returns.
func TestCloseDuringModelCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{held: true}
		hooks := &fakeHooks{}
		opts := Options{Hooks: hooks, Agents: []Spec{{Name: "ada", Model: m}}}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		h.start(opts)
		msgs := h.add(chanMsg("chat", "general", "g1", "think hard"))
		if n := len(m.requests()); n != 1 {
			t.Fatalf("%d model calls, want 1 in flight", n)
		}
		h.rt.Close()

		m.mu.Lock()
		errs := m.errs
		m.mu.Unlock()
		if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
			t.Errorf("the model returned %v; want its ctx canceled", errs)
		}
		hooks.mu.Lock()
		ends := hooks.ends
		hooks.mu.Unlock()
		if len(ends) != 1 || ends[0] != "aborted" {
			t.Errorf("lifecycle %q, want exactly one aborted", ends)
		}
		if evs := h.rec.of("ada", EventTurnEnd); len(evs) != 1 || evs[0].Reason != "aborted" {
			t.Errorf("turn_end %+v, want aborted", evs)
		}
		// Cut short before it did anything: nothing recorded, so the
		// message is shown again at the next start.
		if hist := history(t, h.st, "ada"); len(hist) != 0 {
			t.Errorf("recorded %+v", hist)
		}
		if c := h.cursor("ada", "chat"); c >= msgs[0].Seq {
			t.Errorf("cursor agent/ada = %d, want below %d", c, msgs[0].Seq)
		}
	})
}

// TestCloseDuringToolCall: Close ends a tool call's ctx, and the turn
// still ends and is recorded.
func TestCloseDuringToolCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{respond: script(respond(model.StopToolUse, callBlock("c1", "slow--wait")))}
		opts := Options{Env: newEnv("slow--wait"), Agents: []Spec{{Name: "ada", Model: m}}}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		h.env.gate("slow--wait") // never released
		h.start(opts)
		h.add(chanMsg("chat", "general", "g1", "wait"))
		h.rt.Close()
		_, _, calls, _ := h.env.snapshot()
		if len(calls) != 1 || !errors.Is(calls[0].CtxErr, context.Canceled) {
			t.Errorf("tool calls %+v; want one, its ctx canceled", calls)
		}
		if evs := h.rec.of("ada", EventTurnEnd); len(evs) != 1 || evs[0].Reason != "aborted" {
			t.Errorf("turn_end %+v, want aborted", evs)
		}
	})
}

// TestModelFailure: a failed model call ends the turn with a note in the
// agent's terms, and its lifecycle fails.
func TestModelFailure(t *testing.T) {
	m := &fakeModel{respond: func(int, model.Request) (model.Response, error) {
		return model.Response{}, &model.Error{Text: "the provider is overloaded."}
	}}
	hooks := &fakeHooks{}
	bubble(t, Options{Hooks: hooks, Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "hi"))
		if evs := h.rec.of("ada", EventTurnEnd); len(evs) != 1 || evs[0].Reason != "error" {
			h.t.Errorf("turn_end %+v, want error", evs)
		}
		// Not retryable: made once, and the provider's words stay out.
		want := "[host] This turn ended early: the model call failed, and trying it again would not help; the message was not answered. What you said before it stands; nothing after it was sent. The next message that wakes you starts a new turn."
		if evs := h.rec.of("ada", EventNotice); len(evs) != 1 || evs[0].Text != want {
			h.t.Errorf("notices %+v, want %q", evs, want)
		}
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		if len(hooks.ends) != 1 || hooks.ends[0] != "failed" {
			h.t.Errorf("lifecycle %q, want one failed", hooks.ends)
		}
	})
}
