// Package scripted is a deterministic model, for tests, demos and running
// offline: no provider, no key. It runs a script, one step a model call,
// or echoes (docs/scripted-model.md).
//
// A script is YAML:
//
//	steps:
//	  - call: [{tool: channel_open, args: {channelId: b}}]
//	  - say: Joined b.
//	  - silent: true
//
// Each call to Generate takes the next step: say speaks its text and ends
// the turn; call asks for its tools (the turn loop goes on with their
// results); silent ends the turn saying nothing. When the steps run out
// the model stays silent. In echo mode it answers each call by repeating
// the text of the newest message that addresses the agent in the newest
// user message (each message there opens with the turn loop's header, and
// an addressed one's header has heading.AddressedMark), and stays silent
// when none does; a user message with no headers at all (a server's
// inference/request) is answered with its last text block.
//
// Usage is reported as the provider-less estimate of a token for every
// four bytes of text in and out, so inference/request's usage figures are
// never zero for work done.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/mcpl-go/mcpl/internal/heading"
	"github.com/mcpl-go/mcpl/internal/model"
)

// Step is one model call's answer.
type Step struct {
	Say    string `yaml:"say"`
	Call   []Call `yaml:"call"`
	Silent bool   `yaml:"silent"`
}

// Call is one tool call of a step.
type Call struct {
	Tool string         `yaml:"tool"`
	Args map[string]any `yaml:"args"`
}

// Script is a scripted model's steps.
type Script struct {
	Steps []Step `yaml:"steps"`
}

// Parse reads a script. Unknown keys are errors; each step must be exactly
// one of say, call and silent. name names the script in errors.
func Parse(data []byte, name string) (*Script, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scripted model %s: %w", name, err)
	}
	for i, st := range s.Steps {
		n := 0
		if st.Say != "" {
			n++
		}
		if len(st.Call) > 0 {
			n++
		}
		if st.Silent {
			n++
		}
		if n != 1 {
			return nil, fmt.Errorf("scripted model %s: step %d must be one of say, call or silent: true", name, i+1)
		}
		for j, c := range st.Call {
			if c.Tool == "" {
				return nil, fmt.Errorf("scripted model %s: step %d, call %d names no tool", name, i+1, j+1)
			}
		}
	}
	return &s, nil
}

// Load reads a script file.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	return Parse(data, path)
}

// Model is a scripted model. Its methods are safe for concurrent use; the
// steps are taken one a call, in order.
type Model struct {
	echo bool

	mu    sync.Mutex
	steps []Step
	next  int
	calls int
}

// New returns a model that runs s.
func New(s *Script) *Model { return &Model{steps: s.Steps} }

// Echo returns a model that repeats what it is told.
func Echo() *Model { return &Model{echo: true} }

// Info implements model.Model.
func (m *Model) Info() model.Info { return model.Info{ID: "scripted", Vendor: "mcpl-go"} }

// Generate implements model.Model.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, err
	}
	step := m.take(req)
	res := model.Response{Stop: model.EndTurn, Model: "scripted"}
	switch {
	case step.Say != "":
		res.Content = []model.Block{{Type: model.Text, Text: step.Say}}
		if req.OnText != nil {
			for _, piece := range pieces(step.Say) {
				req.OnText(piece)
			}
		}
	case len(step.Call) > 0:
		res.Stop = model.StopToolUse
		m.mu.Lock()
		for _, c := range step.Call {
			m.calls++
			args, err := json.Marshal(orEmpty(c.Args))
			if err != nil {
				m.mu.Unlock()
				return model.Response{}, &model.Error{Text: fmt.Sprintf("The scripted model's call of %s has arguments that aren't JSON: %v", c.Tool, err)}
			}
			res.Content = append(res.Content, model.Block{Type: model.ToolUse, ToolCall: &model.ToolCall{ID: fmt.Sprintf("call_%d", m.calls), Name: c.Tool, Args: args}})
		}
		m.mu.Unlock()
	}
	res.Usage = model.Usage{InputTokens: tokens(req), OutputTokens: (len(res.Text()) + 3) / 4}
	return res, nil
}

// take returns this call's step: the script's next, or echo's answer.
func (m *Model) take(req model.Request) Step {
	if m.echo {
		if text := lastUserText(req.Messages); strings.TrimSpace(text) != "" {
			return Step{Say: text}
		}
		return Step{Silent: true}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next >= len(m.steps) {
		return Step{Silent: true}
	}
	m.next++
	return m.steps[m.next-1]
}

// lastUserText is what echo repeats of the newest user message: the last
// text block of its newest addressed message, or of the whole message
// when it has no headers.
func lastUserText(msgs []model.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != model.User {
			continue
		}
		var last, lastAddressed string
		headers, addressed := false, false
		for _, b := range msgs[i].Content {
			switch {
			case b.Type != model.Text:
			case isHeader(b.Text):
				headers, addressed = true, strings.Contains(b.Text, heading.AddressedMark)
			case strings.HasPrefix(b.Text, "[Channel invitation]"):
			default:
				last = b.Text
				if addressed {
					lastAddressed = b.Text
				}
			}
		}
		if headers {
			return lastAddressed
		}
		return last
	}
	return ""
}

// isHeader reports whether text is the turn loop's header of a message.
func isHeader(text string) bool {
	return strings.HasPrefix(text, "[") && strings.HasSuffix(text, "]") && !strings.Contains(text, "\n") &&
		(strings.Contains(text, " · message ") || strings.HasPrefix(text, "[event from "))
}

// pieces splits text as a stream would deliver it: word by word, spaces
// kept.
func pieces(text string) []string {
	var out []string
	for text != "" {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// tokens estimates the tokens of a request: one for every four bytes of
// its text.
func tokens(req model.Request) int {
	n := len(req.System)
	for _, msg := range req.Messages {
		for _, b := range msg.Content {
			n += len(b.Text)
			if b.Result != nil {
				for _, c := range b.Result.Content {
					n += len(c.Text)
				}
			}
		}
	}
	return (n + 3) / 4
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
