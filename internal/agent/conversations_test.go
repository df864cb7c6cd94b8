package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

// sayBack answers every call with one line of text, so each turn speaks.
func sayBack() *fakeModel {
	return &fakeModel{respond: func(n int, req model.Request) (model.Response, error) {
		return respond(model.EndTurn, textBlock(fmt.Sprintf("reply %d", n))), nil
	}}
}

// listed sets a channel as the host lists it.
func (e *fakeEnv) listed(ch channels.ListedChannel) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch.Registered = true
	if ch.Desired == "" {
		ch.Desired = "open"
	}
	e.chans[[2]string{ch.ServerID, ch.ID}] = ch
}

func (e *fakeEnv) publications() ([]publication, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.pubs), slices.Clone(e.threads)
}

func threaded(m store.Message, thread string) store.Message {
	m.ThreadID = thread
	return m
}

// A reply carries the woken message's thread on an exact channel (the
// root as null), and none on a root or undeclared channel.
func TestReplyThreads(t *testing.T) {
	for _, tc := range []struct {
		name, target, thread, want string
	}{
		{"exact, in a thread", "exact", "T1", "T1"},
		{"exact, at the root", "exact", "", ""},
		{"root channel", "root", "", "-"},
		{"undeclared channel", "", "T1", "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, Options{Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
				h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "room", Label: "#room", PublishTarget: tc.target})
				h.add(threaded(chanMsg("chat", "room", "m1", "hi", content.TagAddressed), tc.thread))
				pubs, threads := h.env.publications()
				if len(pubs) != 1 || pubs[0].Channel != "room" || threads[0] != tc.want {
					t.Errorf("published %+v with threads %q, want one into room with thread %q", pubs, threads, tc.want)
				}
			})
		})
	}
}

// A fork answers in its own channel, in the thread of what woke it.
func TestForkReplyThread(t *testing.T) {
	bubble(t, Options{PerChannel: true, Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "room", PublishTarget: "exact"})
		h.add(threaded(chanMsg("chat", "room", "m1", "hi", content.TagAddressed), "T7"))
		pubs, threads := h.env.publications()
		if len(pubs) != 1 || pubs[0].Agent != forkName("ada", forkKey{"chat", "room"}) || threads[0] != "T7" {
			t.Errorf("published %+v with threads %q, want the fork's reply in thread T7", pubs, threads)
		}
	})
}

// privateMsg is a whisper in channel ch with privateReply hint.
func privateMsg(ch, id, text, hint string) store.Message {
	body := map[string]any{
		"author":  map[string]string{"name": "eve"},
		"content": []map[string]string{{"type": "text", "text": text}},
	}
	if hint != "" {
		body["metadata"] = map[string]json.RawMessage{"privateReply": json.RawMessage(hint)}
	}
	b, _ := json.Marshal(body)
	return store.Message{Server: "chat", Channel: ch, MessageID: id, Tags: content.Close([]string{"chat:private", "chat:mention"}), Body: b}
}

// A private message on a shared channel goes where its server offers to
// answer privately; where it offers nowhere the host can post, the agent
// is warned before it speaks, and answers in the channel.
func TestPrivateReplies(t *testing.T) {
	for _, tc := range []struct {
		name, hint        string
		lobbyTarget       string
		wantChannel       string
		wantThread, reads string
	}{
		{"a DM named", `{"channelId":"dm:eve"}`, "", "dm:eve", "", "What you say this turn goes privately to @eve (dm:eve), not to #lobby (lobby)."},
		{"a DM and a thread in it, the DM exact", `{"channelId":"dm:eve","threadId":"x"}`, "", "dm:eve", "x", "goes privately to @eve (dm:eve) in thread x, not to"},
		{"a private thread of an exact channel", `{"threadId":"p9"}`, "exact", "lobby", "p9", "goes privately to #lobby (lobby) in thread p9, not to"},
		{"a thread of a channel that isn't exact", `{"threadId":"p9"}`, "", "lobby", "-", "but this host has no private way to answer it: what you say this turn is posted in #lobby (lobby)"},
		{"a channel not registered", `{"channelId":"dm:nobody"}`, "", "lobby", "-", "has no private way to answer it"},
		{"no hint", "", "", "lobby", "-", "has no private way to answer it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, Options{Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
				h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "lobby", Label: "#lobby", PublishTarget: tc.lobbyTarget})
				h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "dm:eve", Label: "@eve", Private: true, PublishTarget: "exact", Desired: "closed"})
				h.add(privateMsg("lobby", "w1", "psst", tc.hint))
				pubs, threads := h.env.publications()
				if len(pubs) != 1 || pubs[0].Channel != tc.wantChannel || threads[0] != tc.wantThread {
					t.Errorf("published %+v, threads %q; want one into %s, thread %q", pubs, threads, tc.wantChannel, tc.wantThread)
				}
				reqs := h.model.requests()
				if len(reqs) == 0 || !containsText(userTexts(reqs[0].Messages), tc.reads) {
					t.Errorf("the agent read %q, want %q before it spoke", userTexts(reqs[0].Messages), tc.reads)
				}
				if !containsText(userTexts(reqs[0].Messages), "· from eve · private · addressed to you · message w1") {
					t.Errorf("the header has no private mark: %q", userTexts(reqs[0].Messages))
				}
			})
		})
	}
}

// A direct message, or a private message in a private channel, is
// answered where it came, with no warning.
func TestPrivateChannelAnsweredInPlace(t *testing.T) {
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "dm:eve", Label: "@eve"})
		m := chanMsg("chat", "dm:eve", "d1", "hello", content.Close([]string{content.TagDM})...)
		h.add(m)
		pubs, _ := h.env.publications()
		if len(pubs) != 1 || pubs[0].Channel != "dm:eve" {
			t.Fatalf("published %+v", pubs)
		}
		texts := userTexts(h.model.requests()[0].Messages)
		if containsText(texts, "[private]") || !containsText(texts, "· from bob · direct message · addressed to you · message d1") {
			t.Errorf("the agent read %q", texts)
		}
	})
}

func botMsg(channel, id, text string) store.Message {
	return chanMsg("chat", channel, id, text, content.TagAddressed, tagFromBot)
}

// By default a bot's message wakes nobody, even addressed: it goes into
// the conversation between turns, and the next turn something else wakes
// reads it.
func TestBotsDoNotWake(t *testing.T) {
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "room"})
		h.add(botMsg("room", "b1", "beep"))
		if n := len(h.model.requests()); n != 0 {
			t.Fatalf("a bot's message woke the agent: %d model calls", n)
		}
		var shown bool
		for _, e := range history(t, h.st, "ada") {
			for _, b := range e.Content {
				shown = shown || strings.Contains(b.Text, "beep")
			}
		}
		if !shown {
			t.Error("the bot's message is not in the conversation")
		}
		h.add(chanMsg("chat", "room", "p1", "a person", content.TagAddressed))
		reqs := h.model.requests()
		if len(reqs) != 1 || !containsText(userTexts(reqs[0].Messages), "beep") || !containsText(userTexts(reqs[0].Messages), "a person") {
			t.Errorf("the person's turn read %v, want the bot's message before it", userTexts(reqs[len(reqs)-1].Messages))
		}
	})
}

// Where bots may wake the agent, at most Bound turns in a row; the turn
// that reaches it says so; a person's message ends the run.
func TestBotBound(t *testing.T) {
	env := newEnv()
	env.bots = map[[2]string]BotRule{{"chat", "room"}: {Wake: true, Bound: 2}}
	bubble(t, Options{Env: env, Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "room", Label: "#room"})
		for i := 1; i <= 3; i++ {
			h.add(botMsg("room", fmt.Sprint("b", i), fmt.Sprint("beep ", i)))
		}
		reqs := h.model.requests()
		if len(reqs) != 2 {
			t.Fatalf("bots woke %d turns, want 2 (the bound)", len(reqs))
		}
		want := textBotBound("#room (room)", 2)
		if !containsText(userTexts(reqs[1].Messages), want) {
			t.Errorf("the second turn read %q, want %q", userTexts(reqs[1].Messages), want)
		}
		h.add(chanMsg("chat", "room", "p1", "a person", content.TagAddressed))
		h.add(botMsg("room", "b4", "beep 4"))
		if n := len(h.model.requests()); n != 4 {
			t.Errorf("%d model calls, want 4: the person's, then the bot's again", n)
		}
	})
}

// The agent's own post, echoed back (chat:from-self), never wakes it,
// whatever the bot rule says.
func TestOwnPostDoesNotWake(t *testing.T) {
	env := newEnv()
	env.bots = map[[2]string]BotRule{{"chat", "room"}: {Wake: true}}
	bubble(t, Options{Env: env, Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "room"})
		h.add(chanMsg("chat", "room", "s1", "my own words", content.TagAddressed, tagFromSelf))
		if n := len(h.model.requests()); n != 0 {
			t.Errorf("the agent's own post woke it: %d model calls", n)
		}
	})
}

// A message read while its channel's initial decision is still being
// recorded waits for it: then it is judged as from the open channel it
// is, with no invitation.
func TestMessageWaitsForTheLift(t *testing.T) {
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "general", Label: "#general", Desired: "closed", Lifting: true})
		h.add(chanMsg("chat", "general", "g1", "hello", content.TagAddressed))
		if n := len(h.model.requests()); n != 0 {
			t.Fatalf("judged before its channel's lift was recorded: %d model calls", n)
		}
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "general", Label: "#general", Desired: "open"})
		h.rt.Wake()
		synctest.Wait()
		reqs := h.model.requests()
		if len(reqs) != 1 || containsText(userTexts(reqs[0].Messages), "[Channel invitation]") || !containsText(userTexts(reqs[0].Messages), "hello") {
			t.Fatalf("after the lift: %d calls, reading %v; want the message shown as from an open channel", len(reqs), userTexts(reqs[len(reqs)-1].Messages))
		}
	})
}

// The stream of a reply in a thread carries the thread, as its publish
// does (RFC-011 §6).
func TestStreamAsksForTheReplyThread(t *testing.T) {
	env := newEnv()
	env.streams = map[string]bool{"chat/room": true}
	bubble(t, Options{Env: env, Agents: []Spec{{Name: "ada", Model: streamingModel{sayBack()}}}}, func(h *harness) {
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "room", PublishTarget: "exact"})
		h.add(threaded(chanMsg("chat", "room", "m1", "hi", content.TagAddressed), "T3"))
		h.env.mu.Lock()
		got := slices.Clone(h.env.streamThreads)
		h.env.mu.Unlock()
		if _, threads := h.env.publications(); !slices.Equal(got, []string{"T3"}) || !slices.Equal(threads, []string{"T3"}) {
			t.Errorf("streams asked for %q and publications for %q, want T3 both", got, threads)
		}
	})
}

// A whisper with a private way to answer, in a turn that answers another
// message: the agent reads how to answer it privately.
func TestPrivateWayWhenTheTurnAnswersAnother(t *testing.T) {
	m := &fakeModel{held: true, respond: sayBack().respond}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "lobby", Label: "#lobby"})
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "dm:eve", Label: "@eve", Private: true})
		h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "dev", Label: "#dev"})
		// A first turn holds the agent, so the next two come together.
		h.add(chanMsg("chat", "dev", "d0", "first", content.TagAddressed))
		addMessages(t, h.st, privateMsg("lobby", "w1", "psst", `{"channelId":"dm:eve"}`), chanMsg("chat", "dev", "d1", "later", content.TagAddressed))
		h.rt.Wake()
		synctest.Wait()
		release(m)
		release(m)
		reqs := m.requests()
		want := `[private] eve wrote to you privately in #lobby (lobby), which others there can read. To answer privately, call channel_publish with channelId "dm:eve" and serverId "chat", which posts to @eve (dm:eve); a reply posted in #lobby (lobby) can be read by everyone in it.`
		if len(reqs) != 2 || !containsText(userTexts(reqs[1].Messages), want) {
			t.Fatalf("the second turn read %q, want %q", userTexts(reqs[len(reqs)-1].Messages), want)
		}
		if pubs, _ := h.env.publications(); len(pubs) != 2 || pubs[1].Channel != "dev" {
			t.Errorf("published %+v, want the second turn's reply in dev", pubs)
		}
	})
}

// A fork answers a whisper in its own channel only: in the private thread
// its server offers there, else where it came, warned it is public.
func TestForkPrivateReply(t *testing.T) {
	for _, tc := range []struct{ name, hint, thread, reads string }{
		{"a private thread here", `{"threadId":"p9"}`, "p9", "What you say this turn goes privately to #lobby (lobby) in thread p9"},
		{"a DM elsewhere", `{"channelId":"dm:eve"}`, "", "what you say this turn is posted in #lobby (lobby), where everyone in it can read it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, Options{PerChannel: true, Agents: []Spec{{Name: "ada", Model: sayBack()}}}, func(h *harness) {
				h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "lobby", Label: "#lobby", PublishTarget: "exact"})
				h.env.listed(channels.ListedChannel{ServerID: "chat", ID: "dm:eve", Label: "@eve", Private: true})
				h.add(privateMsg("lobby", "w1", "psst", tc.hint))
				pubs, threads := h.env.publications()
				if len(pubs) != 1 || pubs[0].Channel != "lobby" || threads[0] != tc.thread {
					t.Fatalf("published %+v, threads %q; want the fork's reply in lobby, thread %q", pubs, threads, tc.thread)
				}
				if texts := userTexts(h.model.requests()[0].Messages); !containsText(texts, tc.reads) {
					t.Errorf("the fork read %q, want %q", texts, tc.reads)
				}
			})
		})
	}
}
