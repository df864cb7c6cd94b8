package openai

import (
	"crypto/rand"
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/mcpl-go/mcpl/internal/model"
)

// accumulator gathers a streamed answer's chunks (see the package doc for
// why not the SDK's ChatCompletionAccumulator).
type accumulator struct {
	text, refusal strings.Builder
	calls         []*callAcc
	byIndex       map[int64]*callAcc
	finish        string
	model         string
	usage         model.Usage
}

// callAcc is one tool call being accumulated.
type callAcc struct {
	id, name string
	args     strings.Builder
}

// add takes one chunk, passing its text to onText (if set).
func (a *accumulator) add(c sdk.ChatCompletionChunk, onText func(string)) {
	if c.Model != "" {
		a.model = c.Model
	}
	if c.JSON.Usage.Valid() {
		a.usage = model.Usage{
			InputTokens:     int(c.Usage.PromptTokens),
			OutputTokens:    int(c.Usage.CompletionTokens),
			CacheReadTokens: int(c.Usage.PromptTokensDetails.CachedTokens),
		}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 { // n is never set: only the first choice exists
			continue
		}
		if d := ch.Delta.Content; d != "" {
			a.text.WriteString(d)
			if onText != nil {
				onText(d)
			}
		}
		if d := ch.Delta.Refusal; d != "" {
			a.refusal.WriteString(d)
			if onText != nil {
				onText(d)
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			a.addCall(tc)
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

// addCall takes one tool call delta.
func (a *accumulator) addCall(d sdk.ChatCompletionChunkChoiceDeltaToolCall) {
	idx := d.Index
	if idx < 0 { // some servers send -1 for a lone call
		idx = 0
	}
	c := a.byIndex[idx]
	if c == nil || (d.ID != "" && c.id != "" && d.ID != c.id) {
		c = &callAcc{}
		if a.byIndex == nil {
			a.byIndex = make(map[int64]*callAcc)
		}
		a.byIndex[idx] = c
		a.calls = append(a.calls, c)
	}
	if c.id == "" {
		c.id = d.ID
	}
	if c.name == "" {
		c.name = d.Function.Name
	}
	c.args.WriteString(d.Function.Arguments)
}

// response is the accumulated answer; false when the stream never said
// why it stopped (it was cut short).
func (a *accumulator) response(defaultModel string) (model.Response, bool) {
	if a.finish == "" {
		return model.Response{}, false
	}
	r := model.Response{Usage: a.usage, Model: a.model}
	if r.Model == "" {
		r.Model = defaultModel
	}
	if a.text.Len() > 0 {
		r.Content = append(r.Content, model.Block{Type: model.Text, Text: a.text.String()})
	}
	if a.refusal.Len() > 0 {
		r.Content = append(r.Content, model.Block{Type: model.Text, Text: a.refusal.String()})
	}
	for _, c := range a.calls {
		id := c.id
		if id == "" {
			id = "call_" + rand.Text()
		}
		r.Content = append(r.Content, model.Block{Type: model.ToolUse, ToolCall: &model.ToolCall{
			ID:   id,
			Name: c.name,
			Args: callArgs(c.args.String()),
		}})
	}
	switch {
	case a.finish == "content_filter" || a.refusal.Len() > 0:
		r.Stop = model.Refused
	case a.finish == "length":
		r.Stop = model.MaxTokens
	case a.finish == "tool_calls" || a.finish == "function_call" || len(a.calls) > 0:
		r.Stop = model.StopToolUse
	default: // "stop", or a server's own word for it
		r.Stop = model.EndTurn
	}
	return r, true
}

// callArgs is a call's arguments as JSON: "{}" when there are none, the
// text when it is JSON, else the text as a JSON string.
func callArgs(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if t == "" || t == "null" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(s) // a string always marshals
	return b
}
