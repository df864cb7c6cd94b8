package fakeapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	openaisdk "github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/anthropic"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/internal/model/openai"
)

func key(string) (string, bool) { return "k", true }

// provider is one fake API and the real provider that talks to it.
type provider struct {
	name  string
	serve func(testing.TB, ...fakeapi.Reply) *fakeapi.Server
	model func(t *testing.T, baseURL string) model.Model
	// keyed reports whether a request's headers carry the key "k".
	keyed func(http.Header) bool
	// toolResult finds, in a recorded request body, the text the tool
	// result for call id carries.
	toolResult func(t *testing.T, body json.RawMessage, id string) string
}

var providers = []provider{
	{
		name:  "anthropic",
		serve: fakeapi.NewAnthropic,
		model: func(t *testing.T, baseURL string) model.Model {
			m, err := anthropic.New(anthropic.Options{Model: "m", BaseURL: baseURL, LookupEnv: key})
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		keyed: func(h http.Header) bool { return h.Get("X-Api-Key") == "k" },
		toolResult: func(t *testing.T, body json.RawMessage, id string) string {
			var req struct {
				Messages []struct {
					Role    string `json:"role"`
					Content []struct {
						Type      string `json:"type"`
						ToolUseID string `json:"tool_use_id"`
						Content   []struct {
							Type string `json:"type"`
							Text string `json:"text"`
						} `json:"content"`
					} `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatalf("recorded body: %v", err)
			}
			for _, m := range req.Messages {
				for _, b := range m.Content {
					if m.Role == "user" && b.Type == "tool_result" && b.ToolUseID == id && len(b.Content) == 1 {
						return b.Content[0].Text
					}
				}
			}
			t.Fatalf("no tool_result for %s in %s", id, body)
			return ""
		},
	},
	{
		name:  "openai",
		serve: fakeapi.NewOpenAI,
		model: func(t *testing.T, baseURL string) model.Model {
			m, err := openai.New(openai.Options{Model: "m", BaseURL: baseURL, LookupEnv: key})
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		keyed: func(h http.Header) bool { return h.Get("Authorization") == "Bearer k" },
		toolResult: func(t *testing.T, body json.RawMessage, id string) string {
			var req struct {
				Messages []struct {
					Role       string `json:"role"`
					ToolCallID string `json:"tool_call_id"`
					Content    string `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatalf("recorded body: %v", err)
			}
			for _, m := range req.Messages {
				if m.Role == "tool" && m.ToolCallID == id {
					return m.Content
				}
			}
			t.Fatalf("no tool message for %s in %s", id, body)
			return ""
		},
	},
}

func user(text string) model.Message {
	return model.Message{Role: model.User, Content: []model.Block{{Type: model.Text, Text: text}}}
}

var tools = []model.Tool{
	{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
	{Name: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
}

// body decodes a recorded request body.
func body(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("recorded body %s: %v", raw, err)
	}
	return m
}

func TestStreamedText(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			const text = "The quick brown fox jumps over the lazy dog."
			s := p.serve(t, fakeapi.Reply{Text: text, InputTokens: 31, OutputTokens: 9})
			m := p.model(t, s.URL)

			var deltas []string
			resp, err := m.Generate(context.Background(), model.Request{
				Messages: []model.Message{user("Say it.")},
				OnText:   func(d string) { deltas = append(deltas, d) },
			})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if got := resp.Text(); got != text {
				t.Errorf("Text() = %q, want %q", got, text)
			}
			want := []string{"The ", "quick ", "brown ", "fox ", "jumps ", "over ", "the ", "lazy ", "dog."}
			if !reflect.DeepEqual(deltas, want) {
				t.Errorf("OnText got %q, want %q", deltas, want)
			}
			if resp.Stop != model.EndTurn {
				t.Errorf("Stop = %q, want %q", resp.Stop, model.EndTurn)
			}
			if want := (model.Usage{InputTokens: 31, OutputTokens: 9}); resp.Usage != want {
				t.Errorf("Usage = %+v, want %+v", resp.Usage, want)
			}
			if resp.Model != "m" {
				t.Errorf("Model = %q, want the request's m", resp.Model)
			}
			if calls := resp.Calls(); len(calls) != 0 {
				t.Errorf("Calls() = %+v, want none", calls)
			}

			s.Wait(1)
			reqs, hdrs := s.Requests(), s.Headers()
			if len(reqs) != 1 || len(hdrs) != 1 {
				t.Fatalf("recorded %d bodies and %d headers, want 1 and 1", len(reqs), len(hdrs))
			}
			if b := body(t, reqs[0]); b["stream"] != true || b["model"] != "m" {
				t.Errorf("recorded body %s: want stream true and model m", reqs[0])
			}
			if !p.keyed(hdrs[0]) {
				t.Errorf("the request's headers %v do not carry the key", hdrs[0])
			}
		})
	}
}

func TestStreamedToolCalls(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			calls := []fakeapi.Call{
				{ID: "call_1", Name: "get_weather", Args: `{"city": "Paris", "days": 3}`},
				{ID: "call_2", Name: "search", Args: `{"q":"naïve café ☕","n":[1,2]}`},
			}
			s := p.serve(t, fakeapi.Reply{Text: "Let me look.", Calls: calls})
			m := p.model(t, s.URL)

			var deltas []string
			resp, err := m.Generate(context.Background(), model.Request{
				Messages: []model.Message{user("Weather in Paris, and search.")},
				Tools:    tools,
				OnText:   func(d string) { deltas = append(deltas, d) },
			})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if resp.Stop != model.StopToolUse {
				t.Errorf("Stop = %q, want %q", resp.Stop, model.StopToolUse)
			}
			if resp.Text() != "Let me look." || strings.Join(deltas, "") != "Let me look." {
				t.Errorf("Text() = %q, deltas %q; want %q", resp.Text(), deltas, "Let me look.")
			}
			got := resp.Calls()
			if len(got) != len(calls) {
				t.Fatalf("Calls() = %+v, want %d calls", got, len(calls))
			}
			for i, c := range got {
				w := calls[i]
				if c.ID != w.ID || c.Name != w.Name || string(c.Args) != w.Args {
					t.Errorf("call %d = %s %s %s, want %s %s %s", i, c.ID, c.Name, c.Args, w.ID, w.Name, w.Args)
				}
			}
			// Estimated usage: never zero.
			if resp.Usage.InputTokens <= 1 || resp.Usage.OutputTokens <= 1 {
				t.Errorf("Usage = %+v, want estimates above 1", resp.Usage)
			}
		})
	}
}

// TestConversation: replies are taken in order, the tool results the
// provider sends back are in the recorded body, and when the replies run
// out the answer is an empty end of turn.
func TestConversation(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			s := p.serve(t,
				fakeapi.Reply{Calls: []fakeapi.Call{{Name: "get_weather", Args: `{"city":"Oslo"}`}}},
				fakeapi.Reply{Text: "It is sunny in Oslo."},
			)
			s.Add(fakeapi.Reply{Text: "Anything else?", Stop: "max_tokens"})
			m := p.model(t, s.URL)
			ctx := context.Background()

			conv := []model.Message{user("Weather in Oslo?")}
			first, err := m.Generate(ctx, model.Request{Messages: conv, Tools: tools})
			if err != nil {
				t.Fatalf("first Generate: %v", err)
			}
			calls := first.Calls()
			if first.Stop != model.StopToolUse || len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].ID == "" {
				t.Fatalf("first answer = %+v, want one get_weather call with an id", first)
			}
			conv = append(conv,
				model.Message{Role: model.Assistant, Content: first.Content},
				model.Message{Role: model.User, Content: []model.Block{{Type: model.ToolResult, Result: &model.Result{
					CallID:  calls[0].ID,
					Content: []model.Block{{Type: model.Text, Text: "sunny, 21°C"}},
				}}}},
			)
			second, err := m.Generate(ctx, model.Request{Messages: conv, Tools: tools})
			if err != nil {
				t.Fatalf("second Generate: %v", err)
			}
			if second.Text() != "It is sunny in Oslo." || second.Stop != model.EndTurn {
				t.Errorf("second answer = %q %q, want the second reply", second.Text(), second.Stop)
			}
			third, err := m.Generate(ctx, model.Request{Messages: []model.Message{user("More?")}})
			if err != nil {
				t.Fatalf("third Generate: %v", err)
			}
			if third.Text() != "Anything else?" || third.Stop != model.MaxTokens {
				t.Errorf("third answer = %q %q, want the added reply, stopping at max_tokens", third.Text(), third.Stop)
			}
			fourth, err := m.Generate(ctx, model.Request{Messages: []model.Message{user("Hello?")}})
			if err != nil {
				t.Fatalf("fourth Generate: %v", err)
			}
			if fourth.Text() != "" || len(fourth.Calls()) != 0 || fourth.Stop != model.EndTurn {
				t.Errorf("fourth answer = %+v, want an empty end of turn (the replies ran out)", fourth)
			}

			s.Wait(4)
			if n := s.Answered(); n != 4 {
				t.Errorf("Answered() = %d, want 4", n)
			}
			reqs := s.Requests()
			if len(reqs) != 4 {
				t.Fatalf("recorded %d requests, want 4", len(reqs))
			}
			if got := p.toolResult(t, reqs[1], calls[0].ID); got != "sunny, 21°C" {
				t.Errorf("the recorded tool result is %q, want %q", got, "sunny, 21°C")
			}
			if strings.Contains(string(reqs[0]), "sunny") {
				t.Errorf("the first recorded body %s holds the tool result, want it only in the second", reqs[0])
			}
		})
	}
}

// TestWait: Wait returns once a request made on another goroutine has been
// answered.
func TestWait(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			s := p.serve(t, fakeapi.Reply{Text: "one"}, fakeapi.Reply{Text: "two"})
			m := p.model(t, s.URL)
			var wg sync.WaitGroup
			texts := make([]string, 2)
			for i := range 2 {
				wg.Go(func() {
					resp, err := m.Generate(context.Background(), model.Request{Messages: []model.Message{user("go")}})
					if err != nil {
						t.Errorf("Generate: %v", err)
					}
					texts[i] = resp.Text()
				})
			}
			s.Wait(2)
			if n := s.Answered(); n < 2 {
				t.Errorf("after Wait(2), Answered() = %d", n)
			}
			wg.Wait()
			if !(texts[0] == "one" && texts[1] == "two") && !(texts[0] == "two" && texts[1] == "one") {
				t.Errorf("answers %q, want one and two", texts)
			}
			s.Wait(1) // already true: returns at once
		})
	}
}

func TestFailure(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			s := p.serve(t,
				fakeapi.Reply{Status: http.StatusTooManyRequests, Text: "slow down"},
				fakeapi.Reply{Status: http.StatusBadRequest, Text: "bad request"},
				fakeapi.Reply{Text: "fine"},
			)
			m := p.model(t, s.URL)
			req := model.Request{Messages: []model.Message{user("hi")}}
			for _, want := range []struct {
				retryable bool
				text      string
			}{{true, "slow down"}, {false, "bad request"}} {
				_, err := m.Generate(context.Background(), req)
				var me *model.Error
				if !errors.As(err, &me) {
					t.Fatalf("Generate = %v, want a *model.Error", err)
				}
				if me.Retryable != want.retryable || !strings.Contains(me.Text, want.text) {
					t.Errorf("error %q (retryable %v), want it to quote %q, retryable %v", me.Text, me.Retryable, want.text, want.retryable)
				}
			}
			resp, err := m.Generate(context.Background(), req)
			if err != nil || resp.Text() != "fine" {
				t.Errorf("third Generate = %q, %v; want fine", resp.Text(), err)
			}
		})
	}
}

// TestNotStreamed: without "stream": true, the answer is one JSON object
// the SDKs read.
func TestNotStreamed(t *testing.T) {
	reply := fakeapi.Reply{
		Text:         "Sure.",
		Calls:        []fakeapi.Call{{ID: "c1", Name: "search", Args: `{"q":"x"}`}},
		InputTokens:  5,
		OutputTokens: 6,
	}
	ctx := context.Background()

	t.Run("anthropic", func(t *testing.T) {
		s := fakeapi.NewAnthropic(t, reply)
		c := anthropicsdk.NewClient(anthropicoption.WithoutEnvironmentDefaults(), anthropicoption.WithBaseURL(s.URL),
			anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(&http.Client{}))
		msg, err := c.Messages.New(ctx, anthropicsdk.MessageNewParams{
			Model: "m", MaxTokens: 10,
			Messages: []anthropicsdk.MessageParam{anthropicsdk.NewUserMessage(anthropicsdk.NewTextBlock("hi"))},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("%s|%s|%s|%s|%s|%d|%d", msg.Model, msg.Content[0].Text, msg.Content[1].ID, msg.Content[1].Name,
			msg.Content[1].Input, msg.Usage.InputTokens, msg.Usage.OutputTokens)
		if want := `m|Sure.|c1|search|{"q":"x"}|5|6`; got != want || msg.StopReason != "tool_use" {
			t.Errorf("message %s (stop %s), want %s (stop tool_use)", got, msg.StopReason, want)
		}
	})
	t.Run("openai", func(t *testing.T) {
		s := fakeapi.NewOpenAI(t, reply)
		c := openaisdk.NewChatCompletionService(openaioption.WithBaseURL(s.URL), openaioption.WithAPIKey("k"),
			openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(&http.Client{}))
		cc, err := c.New(ctx, openaisdk.ChatCompletionNewParams{
			Model:    "m",
			Messages: []openaisdk.ChatCompletionMessageParamUnion{openaisdk.UserMessage("hi")},
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := cc.Choices[0]
		tc := ch.Message.ToolCalls[0]
		got := fmt.Sprintf("%s|%s|%s|%s|%s|%s|%d|%d", cc.Model, ch.Message.Content, tc.ID, tc.Function.Name,
			tc.Function.Arguments, ch.FinishReason, cc.Usage.PromptTokens, cc.Usage.CompletionTokens)
		if want := `m|Sure.|c1|search|{"q":"x"}|tool_calls|5|6`; got != want {
			t.Errorf("completion %s, want %s", got, want)
		}
	})
}

// recordingTB keeps the errors a server reports instead of failing.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// TestWrongEndpoint: a request to another path is refused, reported, and
// takes no reply.
func TestWrongEndpoint(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			s := p.serve(rec, fakeapi.Reply{Text: "kept"})
			resp, err := http.Post(s.URL+"/elsewhere", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("status %d, want 404", resp.StatusCode)
			}
			if errs := rec.errors(); len(errs) != 1 || !strings.Contains(errs[0], "/elsewhere") {
				t.Errorf("reported %q, want one error naming the path", errs)
			}
			got, err := p.model(t, s.URL).Generate(context.Background(), model.Request{Messages: []model.Message{user("hi")}})
			if err != nil || got.Text() != "kept" {
				t.Errorf("Generate = %q, %v; want the first reply, kept", got.Text(), err)
			}
			if n := len(s.Requests()); n != 2 {
				t.Errorf("recorded %d requests, want 2", n)
			}
			http.DefaultClient.CloseIdleConnections()
		})
	}
}

// post sends body to url and returns the answer's data: lines.
func post(t *testing.T, url, body string) []string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	for line := range strings.Lines(string(raw)) {
		if d, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: "); ok {
			data = append(data, d)
		}
	}
	return data
}

// TestWire: text streams word by word, arguments in several pieces, and
// OpenAI's usage chunk comes only when asked for, before [DONE].
func TestWire(t *testing.T) {
	reply := fakeapi.Reply{Text: "a b", Calls: []fakeapi.Call{{ID: "x", Name: "f", Args: `{"k":"vé"}`}, {ID: "y", Name: "g"}}}
	count := func(data []string, sub string) int {
		n := 0
		for _, d := range data {
			n += strings.Count(d, sub)
		}
		return n
	}
	t.Run("anthropic", func(t *testing.T) {
		s := fakeapi.NewAnthropic(t, reply)
		data := post(t, s.URL+"/v1/messages", `{"model":"m","stream":true}`)
		if n := count(data, `"text_delta"`); n != 2 {
			t.Errorf("%d text deltas, want 2:\n%s", n, strings.Join(data, "\n"))
		}
		if n := count(data, `"input_json_delta"`); n != 5 { // 3 + 2 ("{}")
			t.Errorf("%d input_json_delta events, want 5:\n%s", n, strings.Join(data, "\n"))
		}
		if last := data[len(data)-1]; last != `{"type":"message_stop"}` {
			t.Errorf("last event %s, want message_stop", last)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	t.Run("openai", func(t *testing.T) {
		s := fakeapi.NewOpenAI(t, reply, reply)
		for _, withUsage := range []bool{false, true} {
			data := post(t, s.URL+"/chat/completions", fmt.Sprintf(`{"model":"m","stream":true,"stream_options":{"include_usage":%v}}`, withUsage))
			if n := count(data, `"content":"`) - 1; n != 2 { // the first chunk's content is ""
				t.Errorf("%d content deltas, want 2:\n%s", n, strings.Join(data, "\n"))
			}
			if n := count(data, `"arguments":"`) - 2; n != 5 { // each call's first delta has ""
				t.Errorf("%d argument deltas, want 5:\n%s", n, strings.Join(data, "\n"))
			}
			if data[len(data)-1] != "[DONE]" {
				t.Errorf("last data %s, want [DONE]", data[len(data)-1])
			}
			usage := strings.Contains(data[len(data)-2], `"prompt_tokens"`)
			if usage != withUsage || count(data, `"usage"`) != btoi(withUsage) {
				t.Errorf("include_usage %v, but the usage chunk is there: %v:\n%s", withUsage, usage, strings.Join(data, "\n"))
			}
		}
		http.DefaultClient.CloseIdleConnections()
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
