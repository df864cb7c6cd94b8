package agent

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

// What comes while a turn thinks waits for the next turn, which is shown
// all of it at once: a model that blocks until released holds the first
// turn while the test adds messages.

func heldModel() *fakeModel {
	return &fakeModel{held: true, respond: func(int, model.Request) (model.Response, error) {
		return respond(model.EndTurn, textBlock("reply")), nil
	}}
}

func wokenBy(h *harness, agent string) [][]string {
	var out [][]string
	for _, ev := range h.rec.of(agent, EventTurnStart) {
		var ids []string
		for _, w := range ev.WokenBy {
			ids = append(ids, w.MessageID)
		}
		out = append(out, ids)
	}
	return out
}

// TestLocus: a turn shown several messages replies to the newest that
// addresses the agent, else to the newest.
func TestLocus(t *testing.T) {
	m := heldModel()
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.env.channel("chat", "random", "open")
		h.env.channel("chat", "quiet", "closed")
		h.add(chanMsg("chat", "general", "g0", "first"))
		// Held: these wait for the next turn.
		h.add(chanMsg("chat", "quiet", "q1", "ada?", "chat:addressed"), chanMsg("chat", "general", "g1", "newer, not addressed"))
		release(m)
		h.add(chanMsg("chat", "general", "g2", "not addressed"), chanMsg("chat", "random", "r1", "newest, not addressed"))
		release(m)
		release(m)
		if got, want := wokenBy(h, "ada"), [][]string{{"g0"}, {"q1", "g1"}, {"g2", "r1"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("turns woken by %q, want %q", got, want)
		}
		_, _, _, pubs := h.env.snapshot()
		var where []string
		for _, p := range pubs {
			where = append(where, p.Channel)
		}
		if want := []string{"general", "quiet", "random"}; !slices.Equal(where, want) {
			t.Errorf("replies went to %q, want %q", where, want)
		}
	})
}

// TestMaxBatch: a turn is shown at most MaxBatch messages: of a backlog
// of more, the newest, with a line that counts the rest, which are
// consumed, not shown later.
func TestMaxBatch(t *testing.T) {
	m := heldModel()
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "first", "first"))
		var msgs []store.Message
		for i := range MaxBatch + 50 {
			msgs = append(msgs, chanMsg("chat", "general", fmt.Sprint("m", i), fmt.Sprint("message ", i)))
		}
		msgs = h.add(msgs...)
		release(m)
		release(m)
		var sizes []int
		for _, ids := range wokenBy(h, "ada") {
			sizes = append(sizes, len(ids))
		}
		if !slices.Equal(sizes, []int{1, MaxBatch}) {
			t.Errorf("turns shown %v messages, want [1 %d]", sizes, MaxBatch)
		}
		if ids := wokenBy(h, "ada"); len(ids) == 2 && (ids[1][0] != "m50" || ids[1][MaxBatch-1] != fmt.Sprint("m", MaxBatch+49)) {
			t.Errorf("the second turn shows %s to %s, want the newest: m50 to m%d", ids[1][0], ids[1][MaxBatch-1], MaxBatch+49)
		}
		reqs := m.requests()
		want := "[host] 50 earlier messages were left out of this turn, to keep it within what this agent is shown at once: 50 from #general (general). The newest are shown below; those left out are not shown later."
		if len(reqs) != 2 || !containsText(userTexts([]model.Message{lastUser(t, reqs[1])}), want) {
			t.Errorf("the second turn doesn't say %q", want)
		}
		if c := h.cursor("ada", "chat"); c != msgs[len(msgs)-1].Seq {
			t.Errorf("cursor %d, want %d", c, msgs[len(msgs)-1].Seq)
		}
	})
}

// TestSharedAgents: with several agents, each reads every message in a
// conversation of its own, with a cursor of its own.
func TestSharedAgents(t *testing.T) {
	ada, bob := &fakeModel{}, &fakeModel{}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: ada}, {Name: "bob", Model: bob}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		msg := h.add(chanMsg("chat", "general", "g1", "hello both"))[0]
		for name, m := range map[string]*fakeModel{"ada": ada, "bob": bob} {
			reqs := m.requests()
			if len(reqs) != 1 || !containsText(userTexts(reqs[0].Messages), "hello both") {
				t.Errorf("%s's model calls: %+v", name, reqs)
			}
			if c := h.cursor(name, "chat"); c != msg.Seq {
				t.Errorf("cursor agent/%s = %d, want %d", name, c, msg.Seq)
			}
			if hist := history(t, h.st, name); len(hist) == 0 {
				t.Errorf("%s recorded nothing", name)
			}
		}
		// A notice with no agent named is the primary's.
		n := openedGeneral
		n.Agent = ""
		h.rt.Notice(n)
		h.add()
		if len(h.rec.of("ada", EventNotice)) != 1 || len(h.rec.of("bob", EventNotice)) != 0 {
			t.Errorf("notices: ada %+v, bob %+v", h.rec.of("ada", EventNotice), h.rec.of("bob", EventNotice))
		}
	})
}

// TestAgentsStartAtTheirOwnCursors: the inbox is read again from the
// lowest cursor, and each agent is shown only what is after its own.
func TestAgentsStartAtTheirOwnCursors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ada, bob := &fakeModel{}, &fakeModel{}
		opts := Options{Agents: []Spec{{Name: "ada", Model: ada}, {Name: "bob", Model: bob}}}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		msgs := addMessages(t, h.st, chanMsg("chat", "general", "m1", "one"), chanMsg("chat", "general", "m2", "two"), chanMsg("chat", "general", "m3", "three"))
		if _, err := h.st.Record(context.Background(), nil, map[string]int64{"agent/ada": msgs[0].Seq, "agent/bob": msgs[2].Seq}); err != nil {
			t.Fatal(err)
		}
		h.start(opts)
		defer h.rt.Close()
		synctest.Wait()
		if n := len(bob.requests()); n != 0 {
			t.Errorf("bob, at the inbox's end, had %d model calls", n)
		}
		var shown []string
		for _, ids := range wokenBy(h, "ada") {
			shown = append(shown, ids...)
		}
		if !slices.Equal(shown, []string{"m2", "m3"}) {
			t.Errorf("ada was woken by %q, want m2, m3", shown)
		}
	})
}

// TestForkStartsAtItsCursor: a fork's recorded cursor, older than the
// primary's, has the inbox read again from it for the fork.
func TestForkStartsAtItsCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := Options{PerChannel: true}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		msgs := addMessages(t, h.st, chanMsg("chat", "general", "m1", "one"), chanMsg("chat", "general", "m2", "two"), chanMsg("chat", "general", "m3", "three"))
		if _, err := h.st.Record(context.Background(), nil, map[string]int64{"agent/ada": msgs[2].Seq, "agent/" + forkGeneral: msgs[0].Seq}); err != nil {
			t.Fatal(err)
		}
		h.start(opts)
		defer h.rt.Close()
		synctest.Wait()
		var shown []string
		for _, ids := range wokenBy(h, forkGeneral) {
			shown = append(shown, ids...)
		}
		if !slices.Equal(shown, []string{"m2", "m3"}) {
			t.Errorf("the fork was woken by %q, want m2, m3", shown)
		}
		if evs := h.rec.of("ada", EventTurnStart); len(evs) != 0 {
			t.Errorf("the primary's turns %+v", evs)
		}
		if c := h.cursors()["agent/"+forkGeneral]; c != msgs[2].Seq {
			t.Errorf("the fork's cursor %d, want %d", c, msgs[2].Seq)
		}
	})
}
