package agent

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/model"
)

// streamer is a model that streams pieces, then answers with them whole;
// with hang, it streams the first piece and waits for its ctx to end.
type streamer struct {
	pieces []string
	hang   bool
}

func (m streamer) Info() model.Info { return model.Info{ID: "streamer"} }

func (m streamer) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	text := ""
	for i, p := range m.pieces {
		if req.OnText != nil {
			req.OnText(p)
		}
		text += p
		if m.hang && i == 0 {
			<-ctx.Done()
			return model.Response{}, ctx.Err()
		}
	}
	return model.Response{Content: []model.Block{{Type: model.Text, Text: text}}, Stop: model.EndTurn}, nil
}

// TestTypingAndStreaming: a turn toward speech in its channel types there
// from its start to its end, and streams its speech there before it is
// published.
func TestTypingAndStreaming(t *testing.T) {
	env := newEnv()
	env.typing = map[string]bool{"chat/general": true}
	env.streams = map[string]bool{"chat/general": true}
	opts := Options{Env: env, Agents: []Spec{{Name: "ada", Model: streamer{pieces: []string{"Hel", "lo"}}}}}
	bubble(t, opts, func(h *harness) {
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "hi"))
		want := []string{"typing start chat/general", "chunk chat/general 0 Hel", "chunk chat/general 1 lo", "complete chat/general Hello", "typing stop chat/general"}
		if diff := cmp.Diff(want, h.env.sent()); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
		_, _, _, pubs := h.env.snapshot()
		if len(pubs) != 1 || pubs[0].Text != "Hello" {
			t.Errorf("published %+v", pubs)
		}
		var kinds []string
		for _, ev := range h.rec.of("", "") {
			switch ev.Event {
			case EventTyping:
				kinds = append(kinds, ev.Event+" "+ev.Outcome)
			case EventStreamed, EventSpeech, EventTurnEnd:
				kinds = append(kinds, ev.Event)
			}
		}
		if diff := cmp.Diff([]string{"typing start", "streamed", "speech", "typing stop", "turn_end"}, kinds); diff != "" {
			t.Errorf("transcript (-want +got):\n%s", diff)
		}
	})
}

// TestStreamingFailsClosed: nothing streams where the speech has no
// channel, or to a server that didn't declare streaming.
func TestStreamingFailsClosed(t *testing.T) {
	t.Run("no destination", func(t *testing.T) {
		env := newEnv()
		env.streams = map[string]bool{"ci/": true, "chat/general": true}
		opts := Options{Env: env, Agents: []Spec{{Name: "ada", Model: streamer{pieces: []string{"the build ", "is fixed"}}}}}
		bubble(t, opts, func(h *harness) {
			h.add(pushMsg("ci", "e1", "build failed"))
			if got := h.env.sent(); len(got) != 0 {
				t.Errorf("sent %q for a turn with no channel", got)
			}
		})
	})
	t.Run("a server that didn't declare streaming", func(t *testing.T) {
		env := newEnv()
		opts := Options{Env: env, Agents: []Spec{{Name: "ada", Model: streamer{pieces: []string{"Hel", "lo"}}}}}
		bubble(t, opts, func(h *harness) {
			h.env.channel("chat", "general", "open")
			h.add(chanMsg("chat", "general", "g1", "hi"))
			if got := h.env.sent(); len(got) != 0 {
				t.Errorf("sent %q", got)
			}
			if _, _, _, pubs := h.env.snapshot(); len(pubs) != 1 {
				t.Errorf("published %+v", pubs)
			}
		})
	})
}

// TestAbortedStreamCompletes: an inference cut short still completes the
// stream that got chunks, and typing stops.
func TestAbortedStreamCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newEnv()
		env.typing = map[string]bool{"chat/general": true}
		env.streams = map[string]bool{"chat/general": true}
		opts := Options{Env: env, Agents: []Spec{{Name: "ada", Model: streamer{pieces: []string{"Hel", "lo"}, hang: true}}}}
		h := setup(t, &opts)
		h.env.channel("chat", "general", "open")
		h.start(opts)
		h.add(chanMsg("chat", "general", "g1", "hi"))
		h.rt.Close()
		want := []string{"typing start chat/general", "chunk chat/general 0 Hel", "complete chat/general Hel", "typing stop chat/general"}
		if diff := cmp.Diff(want, h.env.sent()); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
	})
}

// TestSeenForAddressed: a turn tells the servers it has the messages that
// addressed the agent, and only those.
func TestSeenForAddressed(t *testing.T) {
	env := newEnv()
	env.seen = true
	bubble(t, Options{Env: env}, func(h *harness) {
		h.env.channel("chat", "general", "open")
		addMessages(t, h.st, chanMsg("chat", "general", "g1", "ambient"), chanMsg("chat", "general", "g2", "to you", content.TagAddressed))
		h.rt.Wake()
		synctest.Wait()
		if diff := cmp.Diff([]string{"seen chat/general g2"}, h.env.sent()); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
	})
}

// TestStreamedProseIsPosted: prose that went out as a stream is posted
// even beside a call that posted (a stream carries only what is
// delivered), and the stream, like the post, is trimmed.
func TestStreamedProseIsPosted(t *testing.T) {
	env := newEnv("chat--send")
	env.silences["chat--send"] = true
	env.streams = map[string]bool{"chat/general": true}
	m := &fakeModel{respond: script(respond(model.StopToolUse, textBlock("  posting it "), callBlock("c1", "chat--send")))}
	opts := Options{Env: env, Agents: []Spec{{Name: "ada", Model: streamingModel{m}}}}
	bubble(t, opts, func(h *harness) {
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "hi"))
		want := []string{"chunk chat/general 0 posting it ", "complete chat/general posting it"}
		if diff := cmp.Diff(want, h.env.sent()); diff != "" {
			t.Errorf("sent (-want +got):\n%s", diff)
		}
		if _, _, _, pubs := h.env.snapshot(); len(pubs) != 1 || pubs[0].Text != "posting it" {
			t.Errorf("published %+v", pubs)
		}
	})
}

// streamingModel streams its answer's text in one piece before answering.
type streamingModel struct{ m *fakeModel }

func (s streamingModel) Info() model.Info { return s.m.Info() }

func (s streamingModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	resp, err := s.m.Generate(ctx, req)
	if err == nil && req.OnText != nil {
		req.OnText(resp.Text())
	}
	return resp, err
}
