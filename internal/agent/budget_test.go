package agent

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/model"
)

// The budget's pieces on their own; lifecycle_test.go has them through
// the runtime.

// TestToolResultIsCut: a tool's 10 MB result reaches the model cut, with
// the line saying so, and is recorded cut.
func TestToolResultIsCut(t *testing.T) {
	m := &fakeModel{respond: script(respond(model.StopToolUse, callBlock("c1", "x--big")))}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		h.env.mu.Lock()
		h.env.answers["x--big"] = ToolAnswer{Content: []model.Block{{Type: model.Text, Text: strings.Repeat("r", 10<<20)}}, Outcome: "ok"}
		h.env.mu.Unlock()
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "call it"))
		reqs := m.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2", len(reqs))
		}
		texts := userTexts(reqs[1].Messages)
		n := 0
		for _, s := range texts {
			n += len(s)
		}
		if n > 1<<20 || !containsText(texts, "[host] This is cut: it is 10.5 MB, more than this agent is shown of one message") {
			t.Errorf("the second request carries %d bytes of user text, want the result cut, saying so", n)
		}
		for _, e := range history(t, h.st, "ada") {
			for _, b := range e.Content {
				if b.Result != nil && blocksTokens(b.Result.Content) > h.rt.agents[0].messageBound() {
					t.Errorf("the recorded result is %d tokens, past the bound", blocksTokens(b.Result.Content))
				}
			}
		}
	})
}

// TestFitTurnLeavesOutOldestResults: a turn past the room has its oldest
// tool results left out of the request, each said so, its calls and the
// newest message kept, and the turn itself unchanged.
func TestFitTurnLeavesOutOldestResults(t *testing.T) {
	big := strings.Repeat("r", 40000)
	turn := []model.Message{user(textBlock("go"))}
	for _, id := range []string{"c1", "c2", "c3"} {
		turn = append(turn, assistant(callBlock(id, "x--y")), user(resultBlock(id, big)))
	}
	fitted := fitTurn(turn, 15000)
	if n := messagesTokens(fitted); n > 15000 {
		t.Errorf("the fitted turn is %d tokens, over 15,000", n)
	}
	if len(fitted) != len(turn) {
		t.Fatalf("%d messages, want %d: calls and results stay paired", len(fitted), len(turn))
	}
	if got := fitted[2].Content[0].Result.Content[0].Text; got != textResultLeftOut {
		t.Errorf("the oldest result reads %.40q, want it left out", got)
	}
	if got := fitted[6].Content[0].Result.Content[0].Text; got != big {
		t.Error("the newest message's result was left out")
	}
	if turn[2].Content[0].Result.Content[0].Text != big {
		t.Error("the turn itself was changed")
	}
}

// TestImageTooLarge: an image past MaxImageBytes is shown as a line
// saying so.
func TestImageTooLarge(t *testing.T) {
	data := base64.StdEncoding.EncodeToString(make([]byte, 6_000_000))
	got := Parts([]content.Part{{Kind: content.KindImage, MimeType: "image/png", Data: data}})
	want := "[image image/png, 6.0 MB: not shown, as it is larger than the 5.0 MB this agent is shown of one image]"
	if len(got) != 1 || got[0].Type != model.Text || got[0].Text != want {
		t.Errorf("Parts = %+v\nwant %q", got, want)
	}
	small := base64.StdEncoding.EncodeToString(make([]byte, 1000))
	if got := Parts([]content.Part{{Kind: content.KindImage, MimeType: "image/png", Data: small}}); len(got) != 1 || got[0].Type != model.Image {
		t.Errorf("a small image: %+v", got)
	}
}

// TestHistoryHeldIsBounded: a runner holds at most 2 × MaxHistory of its
// conversation, and a request counts every earlier message it leaves out.
func TestHistoryHeldIsBounded(t *testing.T) {
	r := historyRunner(nil)
	for _, m := range longHistory(5 * MaxHistory) {
		r.remember(m)
	}
	if n := len(r.history); n > 2*MaxHistory {
		t.Errorf("%d messages held, want at most %d", n, 2*MaxHistory)
	}
	got := r.context([]model.Message{user(textBlock("now"))}, "", nil, 0)
	if want := textHistoryLeftOut(5*MaxHistory - MaxHistory); got[0].Content[0].Text != want {
		t.Errorf("the request starts %q, want %q", got[0].Content[0].Text, want)
	}
}

// TestNoticesHeldAreBounded: of more notices than MaxNotices unread, the
// oldest are left out, and the agent reads how many.
func TestNoticesHeldAreBounded(t *testing.T) {
	r := &runner{signal: make(chan struct{}, 1)}
	for i := range MaxNotices + 5 {
		r.notice(fmt.Sprint("notice ", i))
	}
	got := r.takeNotices()
	if len(got) != MaxNotices+1 || got[0] != textNoticesLeftOut(5) || got[1] != "notice 5" {
		t.Errorf("%d notices, first %q and %q; want the line counting 5, then notice 5 on", len(got), got[0], got[1])
	}
	if got := r.takeNotices(); len(got) != 0 {
		t.Errorf("a second read: %q", got)
	}
}
