package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/model"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "sk-ant-test-SECRET-0123456789"

// event is one server-sent event.
type event struct{ name, data string }

// captured is a request the fake server received.
type captured struct {
	path   string
	header http.Header
	body   map[string]any
}

// fake is a local server speaking the Messages API's wire format.
type fake struct {
	srv *httptest.Server

	mu   sync.Mutex
	reqs []captured
}

// newFake starts a server whose handler answers with handle after
// recording the request.
func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		c := captured{path: r.URL.Path, header: r.Header.Clone()}
		if err == nil {
			_ = json.Unmarshal(raw, &c.body)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, c)
		f.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) requests() []captured {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]captured(nil), f.reqs...)
}

// streaming answers with events as an SSE stream.
func streaming(events ...event) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, e.data)
			w.(http.Flusher).Flush()
		}
	}
}

// failing answers with an API error.
func failing(status int, typ, message string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_test")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_test"}`, typ, message)
	}
}

func env(key string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if name == "TEST_ANTHROPIC_KEY" {
			return key, true
		}
		return "", false
	}
}

func newModel(t *testing.T, f *fake, opts Options) *Model {
	t.Helper()
	if opts.Model == "" {
		opts.Model = "claude-test"
	}
	if opts.APIKeyEnv == "" {
		opts.APIKeyEnv = "TEST_ANTHROPIC_KEY"
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = env(testKey)
	}
	if f != nil {
		opts.BaseURL = f.srv.URL
		opts.HTTPClient = f.srv.Client()
	}
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func messageStart(model string, inputTokens int) event {
	return event{"message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`, model, inputTokens)}
}

func textStart(i int) event {
	return event{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i)}
}

func textDelta(i int, s string) event {
	d, _ := json.Marshal(s)
	return event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, d)}
}

func toolStart(i int, id, name string) event {
	return event{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, i, id, name)}
}

func jsonDelta(i int, s string) event {
	d, _ := json.Marshal(s)
	return event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, d)}
}

func blockStop(i int) event {
	return event{"content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i)}
}

func messageDelta(stop string, outputTokens int) event {
	return event{"message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, outputTokens)}
}

var (
	ping        = event{"ping", `{"type":"ping"}`}
	messageStop = event{"message_stop", `{"type":"message_stop"}`}
)

func hello() model.Request {
	return model.Request{Messages: []model.Message{{Role: model.User, Content: []model.Block{{Type: model.Text, Text: "Hi"}}}}}
}

func TestStreamedText(t *testing.T) {
	f := newFake(t, streaming(
		messageStart("claude-test-20990101", 25),
		textStart(0),
		ping,
		textDelta(0, "Hel"),
		textDelta(0, "lo, "),
		textDelta(0, "world"),
		blockStop(0),
		messageDelta("end_turn", 15),
		messageStop,
	))
	m := newModel(t, f, Options{})

	var deltas []string
	req := hello()
	req.MaxTokens = 50
	req.OnText = func(d string) { deltas = append(deltas, d) }
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if want := []string{"Hel", "lo, ", "world"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("OnText got %q, want %q", deltas, want)
	}
	if got := resp.Text(); got != "Hello, world" {
		t.Errorf("Text() = %q, want %q", got, "Hello, world")
	}
	if len(resp.Content) != 1 || resp.Content[0].Type != model.Text {
		t.Errorf("Content = %+v, want one text block", resp.Content)
	}
	if resp.Stop != model.EndTurn {
		t.Errorf("Stop = %q, want %q", resp.Stop, model.EndTurn)
	}
	if want := (model.Usage{InputTokens: 25, OutputTokens: 15}); resp.Usage != want {
		t.Errorf("Usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.Model != "claude-test-20990101" {
		t.Errorf("Model = %q, want the answering model claude-test-20990101", resp.Model)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	if reqs[0].path != "/v1/messages" {
		t.Errorf("path = %q, want /v1/messages", reqs[0].path)
	}
	if got := reqs[0].body["max_tokens"]; got != float64(50) {
		t.Errorf("max_tokens = %v, want the request's 50", got)
	}
}

func TestStreamedToolUse(t *testing.T) {
	f := newFake(t, streaming(
		messageStart("claude-test", 40),
		textStart(0),
		textDelta(0, "Let me check."),
		blockStop(0),
		toolStart(1, "toolu_01", "get_weather"),
		jsonDelta(1, ""),
		jsonDelta(1, `{"location": "San Fra`),
		jsonDelta(1, `ncisco", "unit"`),
		jsonDelta(1, `: "celsius"}`),
		blockStop(1),
		messageDelta("tool_use", 60),
		messageStop,
	))
	m := newModel(t, f, Options{})

	resp, err := m.Generate(context.Background(), hello()) // OnText nil
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Stop != model.StopToolUse {
		t.Errorf("Stop = %q, want %q", resp.Stop, model.StopToolUse)
	}
	if resp.Text() != "Let me check." {
		t.Errorf("Text() = %q", resp.Text())
	}
	calls := resp.Calls()
	if len(calls) != 1 {
		t.Fatalf("Calls() = %+v, want one call", calls)
	}
	c := calls[0]
	if c.ID != "toolu_01" || c.Name != "get_weather" {
		t.Errorf("call = %q %q, want toolu_01 get_weather", c.ID, c.Name)
	}
	if !json.Valid(c.Args) {
		t.Fatalf("Args %q is not valid JSON", c.Args)
	}
	var got, want any
	_ = json.Unmarshal(c.Args, &got)
	_ = json.Unmarshal([]byte(`{"location":"San Francisco","unit":"celsius"}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Args = %s, want %v", c.Args, want)
	}
	if resp.Usage.OutputTokens != 60 {
		t.Errorf("OutputTokens = %d, want 60", resp.Usage.OutputTokens)
	}
}

func TestRequestBody(t *testing.T) {
	f := newFake(t, streaming(messageStart("claude-test", 1), messageDelta("end_turn", 1), messageStop))
	m := newModel(t, f, Options{Model: "claude-sonnet-4-5", MaxTokens: 777})

	req := model.Request{
		System: "You are terse.",
		Messages: []model.Message{
			{Role: model.User, Content: []model.Block{
				{Type: model.Text, Text: "What is in this picture?"},
				{Type: model.Image, MimeType: "image/png", Data: "iVBORw0KGgo="},
			}},
			{Role: model.Assistant, Content: []model.Block{
				{Type: model.Text, Text: "Let me look closer."},
				{Type: model.ToolUse, ToolCall: &model.ToolCall{ID: "toolu_9", Name: "zoom", Args: json.RawMessage(`{"factor": 2}`)}},
			}},
			{Role: model.User, Content: []model.Block{
				{Type: model.ToolResult, Result: &model.Result{
					CallID:  "toolu_9",
					IsError: true,
					Content: []model.Block{
						{Type: model.Text, Text: "zoom failed"},
						{Type: model.Image, MimeType: "image/jpeg", Data: "/9j/4AAQ"},
					},
				}},
			}},
		},
		Tools: []model.Tool{{
			Name:        "zoom",
			Description: "Zooms into the picture.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"factor":{"type":"number"}},"required":["factor"],"additionalProperties":false}`),
		}},
	}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if k := got.header.Get("X-Api-Key"); k != testKey {
		t.Errorf("x-api-key = %q, want the key from TEST_ANTHROPIC_KEY", k)
	}
	if a := got.header.Get("Authorization"); a != "" {
		t.Errorf("Authorization = %q, want none (the key goes in x-api-key only)", a)
	}
	if v := got.header.Get("Anthropic-Version"); v == "" {
		t.Error("no anthropic-version header")
	}

	want := map[string]any{
		"model":      "claude-sonnet-4-5",
		"max_tokens": 777,
		"stream":     true,
		"system":     []any{map[string]any{"type": "text", "text": "You are terse.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "What is in this picture?"},
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
			}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": "Let me look closer."},
				map[string]any{"type": "tool_use", "id": "toolu_9", "name": "zoom", "input": map[string]any{"factor": 2}},
			}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "toolu_9", "is_error": true, "content": []any{
					map[string]any{"type": "text", "text": "zoom failed"},
					map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
				}},
			}},
		},
		"tools": []any{map[string]any{
			"name":          "zoom",
			"description":   "Zooms into the picture.",
			"cache_control": map[string]any{"type": "ephemeral"},
			"input_schema": map[string]any{
				"type":                 "object",
				"properties":           map[string]any{"factor": map[string]any{"type": "number"}},
				"required":             []any{"factor"},
				"additionalProperties": false,
			},
		}},
	}
	// Round-trip want through JSON so numbers compare as float64.
	var wantJSON map[string]any
	b, _ := json.Marshal(want)
	_ = json.Unmarshal(b, &wantJSON)
	if !reflect.DeepEqual(got.body, wantJSON) {
		gb, _ := json.MarshalIndent(got.body, "", "  ")
		wb, _ := json.MarshalIndent(wantJSON, "", "  ")
		t.Errorf("request body:\n%s\nwant:\n%s", gb, wb)
	}
}

func TestDefaultsAndEmptyParts(t *testing.T) {
	f := newFake(t, streaming(messageStart("claude-test", 1), messageDelta("end_turn", 1), messageStop))
	m := newModel(t, f, Options{})
	req := model.Request{
		Messages: []model.Message{
			{Role: model.User, Content: []model.Block{{Type: model.Text, Text: ""}, {Type: model.Text, Text: "Go"}}},
			{Role: model.Assistant, Content: []model.Block{{Type: model.ToolUse, ToolCall: &model.ToolCall{ID: "t1", Name: "now"}}}},
		},
		Tools: []model.Tool{{Name: "now"}},
	}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	body := f.requests()[0].body
	if body["max_tokens"] != float64(DefaultMaxTokens) {
		t.Errorf("max_tokens = %v, want %d", body["max_tokens"], DefaultMaxTokens)
	}
	if _, ok := body["system"]; ok {
		t.Errorf("system sent for an empty System: %v", body["system"])
	}
	msgs := body["messages"].([]any)
	user := msgs[0].(map[string]any)["content"].([]any)
	if len(user) != 1 {
		t.Errorf("user content = %v, want the empty text block left out", user)
	}
	use := msgs[1].(map[string]any)["content"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(use["input"], map[string]any{}) {
		t.Errorf("tool_use input = %v, want {} for empty Args", use["input"])
	}
	tool := body["tools"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(tool["input_schema"], map[string]any{"type": "object"}) {
		t.Errorf("input_schema = %v, want {\"type\":\"object\"} for an empty schema", tool["input_schema"])
	}
	if _, ok := tool["description"]; ok {
		t.Errorf("description sent for an empty Description")
	}
}

func TestAPIErrors(t *testing.T) {
	tests := []struct {
		status    int
		typ       string
		retryable bool
		says      string
	}{
		{400, "invalid_request_error", false, "invalid"},
		{401, "authentication_error", false, "TEST_ANTHROPIC_KEY"},
		{403, "permission_error", false, "permission"},
		{404, "not_found_error", false, `"claude-test"`},
		{429, "rate_limit_error", true, "rate-limiting"},
		{500, "api_error", true, "internal error"},
		{529, "overloaded_error", true, "overloaded"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			// The provider echoes the key: it must not reach Text.
			f := newFake(t, failing(tt.status, tt.typ, "something about "+testKey))
			m := newModel(t, f, Options{})
			var texts []string
			req := hello()
			req.OnText = func(d string) { texts = append(texts, d) }
			_, err := m.Generate(context.Background(), req)
			var merr *model.Error
			if !errors.As(err, &merr) {
				t.Fatalf("err = %T %v, want *model.Error", err, err)
			}
			if merr.Retryable != tt.retryable {
				t.Errorf("Retryable = %v, want %v (%s)", merr.Retryable, tt.retryable, merr.Text)
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(merr.Text, "SECRET") {
				t.Errorf("Text holds the key: %s", merr.Text)
			}
			if !strings.Contains(merr.Text, tt.says) || !strings.Contains(merr.Text, fmt.Sprint(tt.status)) {
				t.Errorf("Text = %q, want it to say %q and %d", merr.Text, tt.says, tt.status)
			}
			wantRetry := "will not help"
			if tt.retryable {
				wantRetry = "may work"
			}
			if !strings.Contains(merr.Text, wantRetry) {
				t.Errorf("Text = %q, want it to say %q", merr.Text, wantRetry)
			}
			var aerr *sdk.Error
			if !errors.As(err, &aerr) || aerr.StatusCode != tt.status {
				t.Errorf("Err does not wrap the SDK's *anthropic.Error with status %d: %v", tt.status, merr.Err)
			}
			if errors.Is(err, model.ErrNoKey) {
				t.Error("an API error is ErrNoKey")
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("server got %d requests, want 1 (no retries inside)", n)
			}
			if len(texts) != 0 {
				t.Errorf("OnText got %q for a failed call", texts)
			}
		})
	}
}

func TestShouldRetryHeader(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-should-retry", "false")
		failing(http.StatusServiceUnavailable, "api_error", "down for good")(w, r)
	})
	m := newModel(t, f, Options{})
	_, err := m.Generate(context.Background(), hello())
	var merr *model.Error
	if !errors.As(err, &merr) {
		t.Fatalf("err = %v, want *model.Error", err)
	}
	if merr.Retryable {
		t.Errorf("Retryable = true despite x-should-retry: false (%s)", merr.Text)
	}
}

func TestErrorEventMidStream(t *testing.T) {
	f := newFake(t, streaming(
		messageStart("claude-test", 5),
		textStart(0),
		textDelta(0, "Part"),
		event{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
	))
	m := newModel(t, f, Options{})
	var deltas []string
	req := hello()
	req.OnText = func(d string) { deltas = append(deltas, d) }
	resp, err := m.Generate(context.Background(), req)
	var merr *model.Error
	if !errors.As(err, &merr) {
		t.Fatalf("err = %v (resp %+v), want *model.Error", err, resp)
	}
	if !merr.Retryable || !strings.Contains(merr.Text, "overloaded") {
		t.Errorf("got Retryable %v, Text %q; want a retryable overloaded error", merr.Retryable, merr.Text)
	}
	if !reflect.DeepEqual(deltas, []string{"Part"}) {
		t.Errorf("OnText got %q, want the delta before the error", deltas)
	}
}

func TestStreamCutShort(t *testing.T) {
	f := newFake(t, streaming(messageStart("claude-test", 5), textStart(0), textDelta(0, "Par")))
	m := newModel(t, f, Options{})
	_, err := m.Generate(context.Background(), hello())
	var merr *model.Error
	if !errors.As(err, &merr) {
		t.Fatalf("err = %v, want *model.Error", err)
	}
	if !merr.Retryable {
		t.Errorf("a stream cut short is not retryable: %s", merr.Text)
	}
}

func TestNetworkError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	m := newModel(t, nil, Options{BaseURL: url})
	_, err := m.Generate(context.Background(), hello())
	var merr *model.Error
	if !errors.As(err, &merr) {
		t.Fatalf("err = %v, want *model.Error", err)
	}
	if !merr.Retryable || strings.Contains(merr.Text, testKey) {
		t.Errorf("got Retryable %v, Text %q; want retryable, without the key", merr.Retryable, merr.Text)
	}
}

func TestMissingKey(t *testing.T) {
	for name, lookup := range map[string]func(string) (string, bool){
		"unset": func(string) (string, bool) { return "", false },
		"empty": func(string) (string, bool) { return "  ", true },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, streaming(messageStart("claude-test", 1), messageDelta("end_turn", 1), messageStop))
			m := newModel(t, f, Options{APIKeyEnv: "MY_ANTHROPIC_KEY", LookupEnv: lookup})
			_, err := m.Generate(context.Background(), hello())
			if !errors.Is(err, model.ErrNoKey) {
				t.Fatalf("err = %v, want ErrNoKey", err)
			}
			var merr *model.Error
			if !errors.As(err, &merr) {
				t.Fatalf("err = %T, want *model.Error", err)
			}
			want := `The model provider "anthropic" has no API key: set the environment variable MY_ANTHROPIC_KEY.`
			if merr.Text != want || merr.Retryable {
				t.Errorf("got %q (retryable %v), want %q, not retryable", merr.Text, merr.Retryable, want)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("server got %d requests, want none", n)
			}
		})
	}
}

func TestKeyReadAtEachCall(t *testing.T) {
	f := newFake(t, streaming(messageStart("claude-test", 1), messageDelta("end_turn", 1), messageStop))
	key := "first-key"
	m := newModel(t, f, Options{LookupEnv: func(string) (string, bool) { return key, true }})
	for _, k := range []string{"first-key", "second-key"} {
		key = k
		if _, err := m.Generate(context.Background(), hello()); err != nil {
			t.Fatalf("Generate: %v", err)
		}
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].header.Get("X-Api-Key") != "first-key" || reqs[1].header.Get("X-Api-Key") != "second-key" {
		t.Errorf("keys sent: %v, want first-key then second-key", func() (ks []string) {
			for _, r := range reqs {
				ks = append(ks, r.header.Get("X-Api-Key"))
			}
			return
		}())
	}
}

func TestMalformedRequest(t *testing.T) {
	tests := map[string]model.Request{
		"args not JSON": {Messages: []model.Message{{Role: model.Assistant, Content: []model.Block{
			{Type: model.ToolUse, ToolCall: &model.ToolCall{ID: "t", Name: "n", Args: json.RawMessage(`{"a":`)}},
		}}}},
		"schema not an object": {Messages: hello().Messages, Tools: []model.Tool{{Name: "n", InputSchema: json.RawMessage(`[1]`)}}},
		"bad role":             {Messages: []model.Message{{Role: "system", Content: []model.Block{{Type: model.Text, Text: "x"}}}}},
		"image without type":   {Messages: []model.Message{{Role: model.User, Content: []model.Block{{Type: model.Image, Data: "AAAA"}}}}},
	}
	for name, req := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, streaming(messageStart("claude-test", 1), messageDelta("end_turn", 1), messageStop))
			m := newModel(t, f, Options{})
			_, err := m.Generate(context.Background(), req)
			var merr *model.Error
			if !errors.As(err, &merr) || merr.Retryable {
				t.Fatalf("err = %v, want a non-retryable *model.Error", err)
			}
			if !strings.Contains(merr.Text, "malformed") {
				t.Errorf("Text = %q", merr.Text)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("server got %d requests, want none", n)
			}
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streaming(messageStart("claude-test", 5), textStart(0), textDelta(0, "Hel"))(w, r)
		<-r.Context().Done() // hold the stream open until the client goes
	})
	m := newModel(t, f, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := hello()
	req.OnText = func(string) { cancel() }
	_, err := m.Generate(ctx, req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var merr *model.Error
	if errors.As(err, &merr) {
		t.Errorf("err is a *model.Error (%q), want ctx.Err() as it is", merr.Text)
	}
}

func TestCanceledBeforeCall(t *testing.T) {
	f := newFake(t, streaming(messageStart("claude-test", 1), messageDelta("end_turn", 1), messageStop))
	m := newModel(t, f, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Generate(ctx, hello()); err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("server got %d requests, want none", n)
	}
}

func TestStopReasons(t *testing.T) {
	tests := []struct {
		reason string
		calls  bool
		want   model.StopReason
	}{
		{"end_turn", false, model.EndTurn},
		{"tool_use", true, model.StopToolUse},
		{"max_tokens", false, model.MaxTokens},
		{"model_context_window_exceeded", false, model.MaxTokens},
		{"refusal", false, model.Refused},
		{"stop_sequence", false, model.EndTurn},
		{"pause_turn", false, model.EndTurn},
		{"", false, model.EndTurn},
		{"something_new", true, model.StopToolUse},
		{"something_new", false, model.EndTurn},
	}
	for _, tt := range tests {
		if got := stopReason(sdk.StopReason(tt.reason), tt.calls); got != tt.want {
			t.Errorf("stopReason(%q, calls %v) = %q, want %q", tt.reason, tt.calls, got, tt.want)
		}
	}
	// And end to end, a refusal.
	f := newFake(t, streaming(messageStart("claude-test", 3), messageDelta("refusal", 0), messageStop))
	m := newModel(t, f, Options{})
	resp, err := m.Generate(context.Background(), hello())
	if err != nil || resp.Stop != model.Refused {
		t.Errorf("Generate = %+v, %v; want Stop %q", resp, err, model.Refused)
	}
}

func TestNewAndInfo(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without Model succeeded")
	}
	if _, err := New(Options{Model: "m", BaseURL: "not a url"}); err == nil {
		t.Error("New with a bad BaseURL succeeded")
	}
	if _, err := New(Options{Model: "m", MaxTokens: -1}); err == nil {
		t.Error("New with negative MaxTokens succeeded")
	}
	m, err := New(Options{Model: "claude-sonnet-4-5", ContextWindow: 200000})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	want := model.Info{ID: "claude-sonnet-4-5", Vendor: "anthropic", ContextWindow: 200000}
	if got := m.Info(); got != want {
		t.Errorf("Info() = %+v, want %+v", got, want)
	}
	if m.opts.APIKeyEnv != DefaultAPIKeyEnv || m.opts.MaxTokens != DefaultMaxTokens {
		t.Errorf("defaults: APIKeyEnv %q, MaxTokens %d", m.opts.APIKeyEnv, m.opts.MaxTokens)
	}
}
