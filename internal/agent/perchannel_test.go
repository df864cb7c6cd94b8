package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/model"
)

const (
	forkGeneral = "ada@chat/general"
	forkRandom  = "ada@chat/random"
)

// requestsShowing returns the requests whose user messages contain s.
func requestsShowing(reqs []model.Request, s string) []model.Request {
	var out []model.Request
	for _, r := range reqs {
		if containsText(userTexts(r.Messages), s) {
			out = append(out, r)
		}
	}
	return out
}

// TestPerChannelRouting: each open channel's messages go to a fork of its
// own, whose speech goes home; the primary reads push events only.
func TestPerChannelRouting(t *testing.T) {
	m := &fakeModel{respond: func(n int, req model.Request) (model.Response, error) {
		return respond(model.EndTurn, textBlock("reply")), nil
	}}
	bubble(t, Options{PerChannel: true, Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.env.channel("chat", "random", "open")
		h.env.channel("chat", "quiet", "closed")

		g1 := h.add(chanMsg("chat", "general", "g1", "general one"))[0]
		if evs := h.rec.of("ada", EventTurnStart); len(evs) != 0 {
			t.Errorf("the primary had a turn for a channel message: %+v", evs)
		}
		evs := h.rec.of(forkGeneral, EventTurnStart)
		if len(evs) != 1 || evs[0].Turn != 1 || evs[0].WokenBy[0].MessageID != "g1" {
			t.Fatalf("the fork's turns: %+v", evs)
		}
		if _, _, _, pubs := h.env.snapshot(); !slices.Equal(pubs, []publication{{forkGeneral, "chat", "general", "reply"}}) {
			t.Errorf("published %+v", pubs)
		}
		c := h.cursors()
		if c[routeCursorName("chat")] != g1.Seq || c["agent/"+forkGeneral] != g1.Seq {
			t.Errorf("cursors %v; want the router's and the fork's at %d", c, g1.Seq)
		}
		rd, ok := h.rt.Readers()[forkGeneral]
		if !ok || rd.Home != "general" || rd.Name != forkGeneral {
			t.Errorf("the fork as a reader: %+v, %v", rd, ok)
		}

		// Another channel: another fork, that reads only its own.
		h.add(chanMsg("chat", "random", "r1", "random one"))
		h.add(chanMsg("chat", "general", "g2", "general two"))
		reqs := m.requests()
		random := requestsShowing(reqs, "random one")
		if len(random) != 1 || containsText(userTexts(random[0].Messages), "general") {
			t.Errorf("the random fork was sent %+v", random)
		}
		general := requestsShowing(reqs, "general two")
		if len(general) != 1 || !containsText(userTexts(general[0].Messages), "general one") || containsText(userTexts(general[0].Messages), "random one") {
			t.Errorf("the general fork was sent %+v", general)
		}
		if evs := h.rec.of(forkGeneral, EventTurnStart); len(evs) != 2 || evs[1].Turn != 2 {
			t.Errorf("the general fork's turns: %+v", evs)
		}
		if _, _, _, pubs := h.env.snapshot(); len(pubs) != 3 || pubs[1] != (publication{forkRandom, "chat", "random", "reply"}) || pubs[2] != (publication{forkGeneral, "chat", "general", "reply"}) {
			t.Errorf("published %+v", pubs)
		}

		// A closed channel's message nobody is shown makes no fork.
		q := h.add(chanMsg("chat", "quiet", "q1", "quiet one"))[0]
		if _, ok := h.rt.Readers()["ada@chat/quiet"]; ok {
			t.Error("a fork for a closed channel's unaddressed message")
		}
		if c := h.cursor("ada", "chat"); c != q.Seq {
			t.Errorf("cursor agent/ada = %d, want %d", c, q.Seq)
		}

		// A push event: the primary's, not the forks'.
		before := len(m.requests())
		h.add(pushMsg("ci", "e1", "build failed"))
		if evs := h.rec.of("ada", EventTurnStart); len(evs) != 1 || evs[0].WokenBy[0].Kind != "push" {
			t.Errorf("the primary's turns: %+v", evs)
		}
		if n := len(m.requests()); n != before+1 {
			t.Errorf("%d model calls for a push event, want 1", n-before)
		}
		for _, f := range []string{forkGeneral, forkRandom} {
			for _, ev := range h.rec.of(f, EventShown) {
				if strings.Contains(ev.Text, "build failed") {
					t.Errorf("fork %s was shown the push event", f)
				}
			}
		}
		// Its speech has no channel to go to.
		if _, _, _, pubs := h.env.snapshot(); len(pubs) != 3 {
			t.Errorf("published %+v", pubs)
		}
		if rs := requestsShowing(m.requests(), "build failed"); len(rs) != 1 || containsText(userTexts(rs[0].Messages), "general one") {
			t.Errorf("the primary was sent %+v", rs)
		}
	})
}

// TestForkInvitation: an addressed message from a closed channel makes a
// fork, shown the invitation without channel_open, which it can't call.
func TestForkInvitation(t *testing.T) {
	bubble(t, Options{PerChannel: true}, func(h *harness) {
		h.env.channel("chat", "quiet", "closed")
		h.add(chanMsg("chat", "quiet", "q1", "ada, here", "chat:addressed"))
		evs := h.rec.of("ada@chat/quiet", EventShown)
		if len(evs) != 1 {
			h.t.Fatalf("the fork's shown events %+v", evs)
		}
		if s := evs[0].Text; !strings.Contains(s, "[Channel invitation]") || !strings.Contains(s, "ada, here") || strings.Contains(s, "channel_open") {
			h.t.Errorf("shown %q", s)
		}
		if !strings.Contains(evs[0].Text, "channel_decline") {
			h.t.Errorf("shown %q; want channel_decline offered", evs[0].Text)
		}
	})
}

// TestForkTools: a fork is not offered channel_open, and its call of it is
// refused with the fork's text, never reaching the env; the primary is
// offered it.
func TestForkTools(t *testing.T) {
	m := &fakeModel{respond: func(n int, req model.Request) (model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.User && last.Content[0].Type == model.ToolResult {
			return respond(model.EndTurn), nil
		}
		if containsText(userTexts(req.Messages), "open news") {
			return respond(model.StopToolUse, callBlock("c1", channels.ToolOpen), callBlock("c2", channels.ToolPublish)), nil
		}
		return respond(model.EndTurn), nil
	}}
	env := newEnv(channels.ToolList, channels.ToolOpen, channels.ToolPublish, "a--x")
	bubble(t, Options{PerChannel: true, Env: env, Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "open news"))
		h.add(pushMsg("ci", "e1", "an event"))
		reqs := m.requests()
		if len(reqs) != 3 {
			t.Fatalf("%d model calls, want 3", len(reqs))
		}
		if got := toolNames(reqs[0].Tools); !slices.Equal(got, []string{channels.ToolList, channels.ToolPublish, "a--x"}) {
			t.Errorf("the fork was offered %q", got)
		}
		if got := toolNames(reqs[2].Tools); !slices.Equal(got, []string{channels.ToolList, channels.ToolOpen, channels.ToolPublish, "a--x"}) {
			t.Errorf("the primary was offered %q", got)
		}
		want := [][2]string{{"c1", textForkOpen("general")}, {"c2", "result of channel_publish"}}
		if diff := cmp.Diff(want, results(t, reqs[1])); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		_, _, calls, _ := h.env.snapshot()
		if len(calls) != 1 || calls[0].Name != channels.ToolPublish || calls[0].Agent != forkGeneral || string(calls[0].Args) != `{"channelId":"general","serverId":"chat"}` {
			t.Errorf("env calls %+v; want the publish only, held to home", calls)
		}
		if evs := h.rec.of(forkGeneral, EventTool); len(evs) != 2 || evs[0].Outcome != "refused" {
			t.Errorf("tool events %+v", evs)
		}
	})
}

// TestForkNotice: a notice for a fork reaches the fork, not the primary.
func TestForkNotice(t *testing.T) {
	bubble(t, Options{PerChannel: true}, func(h *harness) {
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "hi"))
		n := channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByReply, Server: "chat", Agent: forkGeneral,
			Channels: []channels.ChannelRef{{ID: "general", Label: "#general"}}}
		h.rt.Notice(n)
		h.add()
		evs := h.rec.of(forkGeneral, EventNotice)
		if len(evs) != 1 || !strings.HasPrefix(evs[0].Text, "[channels] Now open: #general (general)") {
			h.t.Errorf("the fork's notices %+v", evs)
		}
		if evs := h.rec.of("ada", EventNotice); len(evs) != 0 {
			h.t.Errorf("the primary's notices %+v", evs)
		}
		if evs := h.rec.of("", EventTurnStart); len(evs) != 1 {
			h.t.Errorf("turns %+v; the notice woke someone", evs)
		}
	})
}
