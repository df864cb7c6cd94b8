package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

// A conversation's history is kept in the store, one entry a message, in
// this encoding; the transcript's events are kept beside them, in the
// conversation TranscriptConversation.

// entryBody is a history entry's body.
type entryBody struct {
	Turn    int64         `json:"turn"`
	Role    model.Role    `json:"role"`
	Content []model.Block `json:"content"`
}

func entryOf(conversation string, turn int64, m model.Message) store.Entry {
	b, _ := json.Marshal(entryBody{Turn: turn, Role: m.Role, Content: m.Content})
	return store.Entry{Conversation: conversation, Body: b}
}

func transcriptEntry(ev Event) store.Entry {
	b, _ := json.Marshal(ev)
	return store.Entry{Conversation: TranscriptConversation, Body: b, At: ev.At}
}

// load reads the runner's conversation from the store.
func (r *runner) load(ctx context.Context) error {
	err := r.rt.opts.Store.History(ctx, r.name, func(e store.Entry) error {
		var b entryBody
		if err := json.Unmarshal(e.Body, &b); err != nil {
			return fmt.Errorf("entry %d: %w", e.Seq, err)
		}
		r.turns = max(r.turns, b.Turn)
		r.remember(model.Message{Role: b.Role, Content: b.Content})
		return nil
	})
	if err != nil {
		return fmt.Errorf("agent %s: reading its history: %w", r.name, err)
	}
	return nil
}

// remember adds m to the history r holds: at most the newest 2 ×
// MaxHistory messages (a request sends at most MaxHistory), the older
// counted in r.dropped, so a long conversation costs what a request can
// use, not its whole length.
func (r *runner) remember(m model.Message) {
	r.history = appendMessage(r.history, m)
	if n := len(r.history); n > 2*MaxHistory {
		keep := make([]model.Message, MaxHistory)
		copy(keep, r.history[n-MaxHistory:])
		r.dropped += n - MaxHistory
		r.history = keep
	}
}

// appendMessage appends m, merged into the last message when both are
// the same role's.
func appendMessage(h []model.Message, m model.Message) []model.Message {
	if n := len(h); n > 0 && h[n-1].Role == m.Role {
		h[n-1].Content = append(h[n-1].Content[:len(h[n-1].Content):len(h[n-1].Content)], m.Content...)
		return h
	}
	return append(h, m)
}

// joinSystem adds system injections to the system prompt, as text.
func joinSystem(system string, inj []model.Block) string {
	parts := []string{}
	if system != "" {
		parts = append(parts, system)
	}
	if s := blocksText(inj); s != "" {
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n\n")
}

// inject puts injections around the newest user message's own content:
// before it (after the tool results it opens with, which must lead) and
// after it. msgs is not changed.
func inject(msgs []model.Message, before, after []model.Block) []model.Message {
	if len(before) == 0 && len(after) == 0 {
		return msgs
	}
	out := append([]model.Message(nil), msgs...)
	i := len(out) - 1
	for i >= 0 && out[i].Role != model.User {
		i--
	}
	if i < 0 {
		out = append(out, model.Message{Role: model.User})
		i = len(out) - 1
	}
	old := out[i].Content
	k := 0
	for k < len(old) && old[k].Type == model.ToolResult {
		k++
	}
	c := make([]model.Block, 0, len(old)+len(before)+len(after))
	c = append(c, old[:k]...)
	c = append(c, before...)
	c = append(c, old[k:]...)
	c = append(c, after...)
	out[i].Content = c
	return out
}

// blocksText renders blocks as text, for the transcript and the system
// prompt.
func blocksText(blocks []model.Block) string {
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case model.Text:
			parts = append(parts, b.Text)
		case model.Image:
			parts = append(parts, "[image "+b.MimeType+"]")
		}
	}
	return strings.Join(parts, "\n")
}
