package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

func user(blocks ...model.Block) model.Message {
	return model.Message{Role: model.User, Content: blocks}
}

func assistant(blocks ...model.Block) model.Message {
	return model.Message{Role: model.Assistant, Content: blocks}
}

func resultBlock(id, text string) model.Block {
	return model.Block{Type: model.ToolResult, Result: &model.Result{CallID: id, Content: []model.Block{textBlock(text)}}}
}

func TestAppendMessageMergesSameRole(t *testing.T) {
	var h []model.Message
	h = appendMessage(h, user(textBlock("a")))
	h = appendMessage(h, user(textBlock("b")))
	h = appendMessage(h, assistant(textBlock("c")))
	h = appendMessage(h, assistant(textBlock("d")))
	h = appendMessage(h, user(textBlock("e")))
	want := []model.Message{
		user(textBlock("a"), textBlock("b")),
		assistant(textBlock("c"), textBlock("d")),
		user(textBlock("e")),
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestAppendMessageCopiesOnMerge: a merge never writes into the spare
// capacity of the content it merges into, which another slice may share.
func TestAppendMessageCopiesOnMerge(t *testing.T) {
	backing := make([]model.Block, 1, 4)
	backing[0] = textBlock("a")
	h := []model.Message{user(backing...)}
	h[0].Content = backing[:1]
	alias := backing[:2]
	h = appendMessage(h, user(textBlock("b")))
	if got := alias[1]; got.Text != "" {
		t.Errorf("merging wrote %q into the shared backing array", got.Text)
	}
	if len(h) != 1 || len(h[0].Content) != 2 || h[0].Content[1].Text != "b" {
		t.Errorf("merged = %+v", h)
	}
}

// longHistory is n messages, alternating user and assistant from a user.
func longHistory(n int) []model.Message {
	h := make([]model.Message, n)
	for i := range h {
		if i%2 == 0 {
			h[i] = user(textBlock(fmt.Sprintf("u%d", i)))
		} else {
			h[i] = assistant(textBlock(fmt.Sprintf("a%d", i)))
		}
	}
	return h
}

// historyRunner is a runner with history h, on a model with the default
// window.
func historyRunner(h []model.Message) *runner {
	return &runner{history: h, spec: Spec{Model: &fakeModel{}}}
}

func TestContextKeepsAShortHistory(t *testing.T) {
	h := longHistory(MaxHistory)
	r := historyRunner(h)
	got := r.context([]model.Message{user(textBlock("now"))}, "", nil, 0)
	if len(got) != MaxHistory+1 || got[0].Content[0].Text != "u0" || got[MaxHistory].Content[0].Text != "now" {
		t.Errorf("context of %d messages: %d messages, first %+v, last %+v", MaxHistory, len(got), got[0], got[len(got)-1])
	}
}

func TestContextTrims(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    []model.Message
		// first is the first message the model is sent, after the line
		// that says how many were left out.
		first string
		left  int
	}{
		{
			// The cut lands on an assistant message: it starts at the
			// user message after it.
			name:  "at an assistant message",
			h:     longHistory(MaxHistory + 1),
			first: fmt.Sprintf("u%d", 2),
			left:  2,
		},
		{
			// The cut lands on a user message: it starts there.
			name:  "at a user message",
			h:     longHistory(MaxHistory + 2),
			first: "u2",
			left:  2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := historyRunner(tc.h)
			got := r.context(nil, "", nil, 0)
			if len(got) > MaxHistory {
				t.Errorf("%d messages sent, more than MaxHistory", len(got))
			}
			if got[0].Role != model.User || got[0].Content[0].Text != textHistoryLeftOut(tc.left) || got[0].Content[1].Text != tc.first {
				t.Errorf("first message %+v, want the line that %d were left out, then the user's %q", got[0], tc.left, tc.first)
			}
			if last := got[len(got)-1]; last.Content[0].Text != tc.h[len(tc.h)-1].Content[0].Text {
				t.Errorf("last message %+v, want the history's newest", last)
			}
		})
	}
}

// TestContextNeverStartsWithAToolResult: where the cut leaves tool results
// whose calls were cut off, the context starts after them.
func TestContextNeverStartsWithAToolResult(t *testing.T) {
	// A call, then its result right at the cut.
	h := []model.Message{user(textBlock("old")), assistant(callBlock("c1", "x--y"))}
	cut := len(h)
	h = append(h, user(resultBlock("c1", "r1"), textBlock("a notice")), assistant(textBlock("after")), user(textBlock("fresh")))
	for len(h) < cut+MaxHistory {
		h = append(h, assistant(textBlock("reply")), user(textBlock("more")))
	}
	h = h[:cut+MaxHistory]
	if h[len(h)-MaxHistory].Role != model.User || !startsWithResult(h[len(h)-MaxHistory]) {
		t.Fatalf("set-up: the cut is at %+v, want the tool result", h[len(h)-MaxHistory])
	}
	r := historyRunner(h)
	got := r.context([]model.Message{assistant(textBlock("turn"))}, "", nil, 0)
	if got[0].Role != model.User || startsWithResult(got[0]) || got[0].Content[1].Text != "fresh" {
		t.Errorf("context starts with %+v, want the user message %q", got[0], "fresh")
	}
	if last := got[len(got)-1]; last.Role != model.Assistant || last.Content[len(last.Content)-1].Text != "turn" {
		t.Errorf("the turn's message is not last: %+v", last)
	}
}

// TestContextMergesTheTurnWithoutTouchingHistory: the turn's user message
// merges into the history's, and the history is left as it was.
func TestContextMergesTheTurnWithoutTouchingHistory(t *testing.T) {
	content := make([]model.Block, 1, 8)
	content[0] = textBlock("notice")
	r := historyRunner([]model.Message{user(textBlock("hi")), assistant(textBlock("hello")), {Role: model.User, Content: content}})
	got := r.context([]model.Message{user(textBlock("shown")), assistant(textBlock("answer"))}, "", nil, 0)
	want := []model.Message{user(textBlock("hi")), assistant(textBlock("hello")), user(textBlock("notice"), textBlock("shown")), assistant(textBlock("answer"))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(r.history) != 3 || len(r.history[2].Content) != 1 || content[:2][1].Text != "" {
		t.Errorf("the history changed: %+v", r.history)
	}
}

func TestInject(t *testing.T) {
	before := []model.Block{textBlock("B1"), textBlock("B2")}
	after := []model.Block{textBlock("A")}
	msgs := []model.Message{
		user(textBlock("first")),
		assistant(callBlock("c1", "x--a"), callBlock("c2", "x--b")),
		user(resultBlock("c1", "r1"), resultBlock("c2", "r2"), textBlock("notice")),
	}
	orig := clone(t, msgs)
	got := inject(msgs, before, after)
	want := []model.Message{
		msgs[0], msgs[1],
		user(resultBlock("c1", "r1"), resultBlock("c2", "r2"), textBlock("B1"), textBlock("B2"), textBlock("notice"), textBlock("A")),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orig, msgs); diff != "" {
		t.Errorf("inject changed its input (-before +after):\n%s", diff)
	}
}

func clone(t *testing.T, msgs []model.Message) []model.Message {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Message
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInjectNewestUserMessage(t *testing.T) {
	// The conversation ends with the assistant's message: the user
	// message before it gets the injections.
	msgs := []model.Message{user(textBlock("old")), assistant(textBlock("x")), user(textBlock("new")), assistant(textBlock("y"))}
	got := inject(msgs, []model.Block{textBlock("B")}, nil)
	if diff := cmp.Diff(user(textBlock("B"), textBlock("new")), got[2]); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(user(textBlock("old")), got[0]); diff != "" {
		t.Errorf("an older user message changed: %s", diff)
	}
	// No user message: one is added, of the injections.
	got = inject([]model.Message{assistant(textBlock("x"))}, []model.Block{textBlock("B")}, []model.Block{textBlock("A")})
	if diff := cmp.Diff([]model.Message{assistant(textBlock("x")), user(textBlock("B"), textBlock("A"))}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Nothing to inject: the messages as they are.
	if got := inject(msgs, nil, nil); len(got) != len(msgs) || &got[0] != &msgs[0] {
		t.Errorf("inject with nothing = %+v", got)
	}
}

func TestJoinSystem(t *testing.T) {
	img := model.Block{Type: model.Image, MimeType: "image/png", Data: "iVBORw0KGgo="}
	for _, tc := range []struct {
		system string
		inj    []model.Block
		want   string
	}{
		{"", nil, ""},
		{"base", nil, "base"},
		{"", []model.Block{textBlock("a")}, "a"},
		{"base", []model.Block{textBlock("a"), textBlock("b")}, "base\n\na\nb"},
		{"base", []model.Block{img, textBlock("b")}, "base\n\n[image image/png]\nb"},
		{"base", []model.Block{callBlock("c", "x")}, "base"},
	} {
		if got := joinSystem(tc.system, tc.inj); got != tc.want {
			t.Errorf("joinSystem(%q, %+v) = %q, want %q", tc.system, tc.inj, got, tc.want)
		}
	}
}

// TestLoadHistory: a runner reads its conversation back as it was
// recorded, merged, and its turn count.
func TestLoadHistory(t *testing.T) {
	st := store.NewMemory()
	entries := []store.Entry{
		entryOf("ada", 1, user(textBlock("hi"))),
		entryOf("ada", 1, assistant(callBlock("c1", "x--y"))),
		entryOf("ada", 1, user(resultBlock("c1", "r"))),
		entryOf("bob", 7, user(textBlock("not ada's"))),
		entryOf("ada", 2, user(textBlock("notice"))),
		entryOf("ada", 3, assistant(textBlock("bye"))),
		transcriptEntry(Event{Agent: "ada", Event: EventNotice}),
	}
	if _, err := st.Record(context.Background(), entries, nil); err != nil {
		t.Fatal(err)
	}
	r := &runner{rt: &Runtime{opts: Options{Store: st}}, name: "ada"}
	if err := r.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []model.Message{
		user(textBlock("hi")),
		assistant(callBlock("c1", "x--y")),
		user(resultBlock("c1", "r"), textBlock("notice")),
		assistant(textBlock("bye")),
	}
	if diff := cmp.Diff(want, r.history); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if r.turns != 3 {
		t.Errorf("turns = %d, want 3", r.turns)
	}
}
