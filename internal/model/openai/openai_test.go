package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/openai/openai-go/v3"
	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/model"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "sk-test-0123456789abcdef"

// hit is a request the fake server received.
type hit struct {
	path   string
	header http.Header
	raw    []byte
	body   map[string]any
}

// fake is a local server speaking the Chat Completions wire format.
type fake struct {
	*httptest.Server
	hits chan hit
	n    atomic.Int32
}

func newFake(t *testing.T, respond http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{hits: make(chan hit, 8)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.n.Add(1)
		h := hit{path: r.URL.Path, header: r.Header.Clone()}
		h.raw, _ = io.ReadAll(r.Body)
		if err := json.Unmarshal(h.raw, &h.body); err != nil {
			http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case f.hits <- h:
		default:
		}
		respond(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// hit returns the one request the server received.
func (f *fake) hit(t *testing.T) hit {
	t.Helper()
	if n := f.n.Load(); n != 1 {
		t.Fatalf("the server got %d requests, want 1", n)
	}
	return <-f.hits
}

// sse answers with chunks, each a data: line, then data: [DONE].
func sse(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// chunk is a chat.completion.chunk with one choice: delta (JSON) and
// finish ("" for null).
func chunk(delta, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14",` +
		`"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fr + `}],"usage":null}`
}

// usage is the final chunk include_usage asks for: no choices.
func usage(in, out int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14",`+
		`"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

func text(s string) string {
	b, _ := json.Marshal(map[string]string{"content": s})
	return string(b)
}

// env is a LookupEnv over a map.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// newModel is a model of f's with the key set.
func newModel(t *testing.T, f *fake, opts Options) *Model {
	t.Helper()
	if opts.Model == "" {
		opts.Model = "gpt-4.1"
	}
	if opts.BaseURL == "" {
		opts.BaseURL = f.URL + "/v1"
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = f.Client()
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = env(map[string]string{"OPENAI_API_KEY": testKey})
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func userText(s string) model.Request {
	return model.Request{Messages: []model.Message{{Role: model.User, Content: []model.Block{{Type: model.Text, Text: s}}}}}
}

func TestStreamedText(t *testing.T) {
	f := newFake(t, sse(
		chunk(`{"role":"assistant","content":""}`, ""),
		chunk(text("Hel"), ""),
		chunk(text("lo, "), ""),
		chunk(text("world"), ""),
		chunk(`{}`, "stop"),
		usage(12, 3),
	))
	m := newModel(t, f, Options{})
	req := userText("Say hello.")
	var deltas []string
	req.OnText = func(d string) { deltas = append(deltas, d) }
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Hel", "lo, ", "world"}; !cmp.Equal(deltas, want) {
		t.Errorf("deltas %q, want %q", deltas, want)
	}
	want := model.Response{
		Content: []model.Block{{Type: model.Text, Text: "Hello, world"}},
		Stop:    model.EndTurn,
		Usage:   model.Usage{InputTokens: 12, OutputTokens: 3},
		Model:   "gpt-4.1-2025-04-14",
	}
	if d := cmp.Diff(want, resp); d != "" {
		t.Errorf("response (-want +got):\n%s", d)
	}
}

func TestStreamedToolCalls(t *testing.T) {
	f := newFake(t, sse(
		chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Paris\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":": \"CET\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usage(40, 25),
	))
	m := newModel(t, f, Options{})
	resp, err := m.Generate(context.Background(), userText("Weather and time in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stop != model.StopToolUse {
		t.Errorf("stop %q, want %q", resp.Stop, model.StopToolUse)
	}
	if resp.Text() != "" {
		t.Errorf("text %q, want none", resp.Text())
	}
	calls := resp.Calls()
	type call struct {
		ID, Name string
		Args     map[string]any
	}
	var got []call
	for _, c := range calls {
		if !json.Valid(c.Args) {
			t.Fatalf("call %s: args %q are not JSON", c.ID, c.Args)
		}
		var args map[string]any
		if err := json.Unmarshal(c.Args, &args); err != nil {
			t.Fatalf("call %s: args %q: %v", c.ID, c.Args, err)
		}
		got = append(got, call{c.ID, c.Name, args})
	}
	want := []call{
		{"call_a", "get_weather", map[string]any{"city": "Paris"}},
		{"call_b", "get_time", map[string]any{"tz": "CET"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	if resp.Usage != (model.Usage{InputTokens: 40, OutputTokens: 25}) {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestRequestOnTheWire(t *testing.T) {
	f := newFake(t, sse(chunk(text("ok"), "stop"), usage(1, 1)))
	m := newModel(t, f, Options{Model: "local-model", MaxTokens: 999})
	req := model.Request{
		System: "You are terse.",
		Messages: []model.Message{
			{Role: model.User, Content: []model.Block{
				{Type: model.Text, Text: "What is this?"},
				{Type: model.Image, MimeType: "image/png", Data: "iVBORw0KGgo="},
			}},
			{Role: model.Assistant, Content: []model.Block{
				{Type: model.Text, Text: "Let me look."},
				{Type: model.ToolUse, ToolCall: &model.ToolCall{ID: "call_1", Name: "lookup", Args: json.RawMessage(`{"q":"x"}`)}},
				{Type: model.ToolUse, ToolCall: &model.ToolCall{ID: "call_2", Name: "lookup"}},
			}},
			{Role: model.User, Content: []model.Block{
				{Type: model.ToolResult, Result: &model.Result{CallID: "call_1", Content: []model.Block{
					{Type: model.Text, Text: "found it"},
					{Type: model.Image, MimeType: "image/jpeg", Data: "/9j/4AAQ"},
				}}},
				{Type: model.ToolResult, Result: &model.Result{CallID: "call_2", IsError: true, Content: []model.Block{
					{Type: model.Text, Text: "no query"},
				}}},
				{Type: model.Text, Text: "Thanks."},
			}},
		},
		Tools: []model.Tool{{
			Name:        "lookup",
			Description: "Looks things up.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","maxLength":9007199254740993}},"required":["q"]}`),
		}, {
			Name: "ping",
		}},
		MaxTokens: 100,
	}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	h := f.hit(t)
	if h.path != "/v1/chat/completions" {
		t.Errorf("path %q", h.path)
	}
	if got := h.header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q, want the key from the environment", got)
	}
	var want map[string]any
	wantJSON := `{
		"model": "local-model",
		"stream": true,
		"stream_options": {"include_usage": true},
		"max_tokens": 100,
		"messages": [
			{"role": "system", "content": "You are terse."},
			{"role": "user", "content": [
				{"type": "text", "text": "What is this?"},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
			]},
			{"role": "assistant", "content": "Let me look.", "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}},
				{"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
			]},
			{"role": "tool", "tool_call_id": "call_1", "content": "found it\n[image 1 (image/jpeg): sent in the user message that follows]"},
			{"role": "tool", "tool_call_id": "call_2", "content": "[tool error]\nno query"},
			{"role": "user", "content": [
				{"type": "text", "text": "The images from the result of tool call call_1:"},
				{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
				{"type": "text", "text": "Thanks."}
			]}
		],
		"tools": [
			{"type": "function", "function": {"name": "lookup", "description": "Looks things up.",
				"parameters": {"type": "object", "properties": {"q": {"type": "string", "maxLength": 9007199254740993}}, "required": ["q"]}}},
			{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}
		]
	}`
	if err := json.Unmarshal([]byte(wantJSON), &want); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, h.body); d != "" {
		t.Errorf("request body (-want +got):\n%s", d)
	}
	// The schema's numbers are sent as written, not through float64.
	if !bytes.Contains(h.raw, []byte(`"maxLength":9007199254740993`)) {
		t.Errorf("the schema's maxLength was rewritten: %s", h.raw)
	}
}

// rewrite sends every request to a local server, whatever its URL: an
// "OpenAI" endpoint that is not the internet.
type rewrite struct{ to *url.URL }

func (rw rewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = rw.to.Scheme, rw.to.Host
	r.Host = rw.to.Host
	return http.DefaultTransport.RoundTrip(r)
}

func TestOpenAIEndpointGetsMaxCompletionTokens(t *testing.T) {
	f := newFake(t, sse(chunk(text("ok"), "stop"), usage(1, 1)))
	u, _ := url.Parse(f.URL)
	for _, base := range []string{"", "https://eu.api.openai.com/v1"} {
		m, err := New(Options{
			Model:      "gpt-5",
			BaseURL:    base,
			MaxTokens:  321, // the request gives none
			LookupEnv:  env(map[string]string{"OPENAI_API_KEY": testKey}),
			HTTPClient: &http.Client{Transport: rewrite{u}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Generate(context.Background(), userText("hi")); err != nil {
			t.Fatalf("base %q: %v", base, err)
		}
		h := <-f.hits
		if h.path != "/v1/chat/completions" {
			t.Errorf("base %q: path %q", base, h.path)
		}
		if got, ok := h.body["max_completion_tokens"]; !ok || got != float64(321) {
			t.Errorf("base %q: max_completion_tokens %v, want 321", base, got)
		}
		if got, ok := h.body["max_tokens"]; ok {
			t.Errorf("base %q: max_tokens %v sent too", base, got)
		}
		if h.body["messages"].([]any)[0].(map[string]any)["content"] != "hi" {
			t.Errorf("base %q: a lone text block is not sent as a string: %v", base, h.body["messages"])
		}
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

func TestNoLimitNoToolsSendsNone(t *testing.T) {
	f := newFake(t, sse(chunk(text("ok"), "stop")))
	m := newModel(t, f, Options{})
	if _, err := m.Generate(context.Background(), userText("hi")); err != nil {
		t.Fatal(err)
	}
	h := f.hit(t)
	for _, k := range []string{"max_tokens", "max_completion_tokens", "tools"} {
		if v, ok := h.body[k]; ok {
			t.Errorf("%s %v sent with no limit or tools set", k, v)
		}
	}
}

func TestKeyOptionalSendsNoKey(t *testing.T) {
	// An OpenAI key in the process's environment must not reach a local
	// server configured to read another variable.
	t.Setenv("OPENAI_API_KEY", "sk-not-for-local-servers")
	f := newFake(t, sse(chunk(text("local"), "stop")))
	m, err := New(Options{
		Model:       "llama",
		APIKeyEnv:   "LOCAL_LLM_KEY",
		KeyOptional: true,
		BaseURL:     f.URL + "/v1",
		HTTPClient:  f.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), userText("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "local" || resp.Stop != model.EndTurn {
		t.Errorf("response %+v", resp)
	}
	if resp.Model != "gpt-4.1-2025-04-14" {
		t.Errorf("model %q, want the one the server named", resp.Model)
	}
	h := f.hit(t)
	if got, ok := h.header["Authorization"]; ok {
		t.Errorf("Authorization %q sent with no key", got)
	}
}

func TestMissingKey(t *testing.T) {
	f := newFake(t, sse(chunk(text("never"), "stop")))
	for _, tc := range []struct{ envName, value string }{
		{"", ""},
		{"MY_OPENAI_KEY", "  "},
	} {
		vars := map[string]string{}
		if tc.value != "" {
			vars[tc.envName] = tc.value
		}
		m := newModel(t, f, Options{APIKeyEnv: tc.envName, LookupEnv: env(vars)})
		_, err := m.Generate(context.Background(), userText("hi"))
		if !errors.Is(err, model.ErrNoKey) {
			t.Fatalf("err %v, want ErrNoKey", err)
		}
		var me *model.Error
		if !errors.As(err, &me) || me.Retryable {
			t.Fatalf("err %#v, want a *model.Error, not retryable", err)
		}
		name := tc.envName
		if name == "" {
			name = "OPENAI_API_KEY"
		}
		if !strings.Contains(me.Text, name) {
			t.Errorf("text %q does not name %s", me.Text, name)
		}
	}
	if n := f.n.Load(); n != 0 {
		t.Errorf("%d requests sent with no key", n)
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		retryable bool
		text      string // in the Text
	}{
		{"401", 401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `.","type":"invalid_request_error","code":"invalid_api_key"}}`, false, "rejected the API key in OPENAI_API_KEY"},
		{"400", 400, `{"error":{"message":"Invalid 'messages[1]': echo ` + testKey + `","type":"invalid_request_error","param":"messages","code":null}}`, false, "Invalid 'messages[1]'"},
		{"403", 403, `{"error":{"message":"Project does not have access to model gpt-4.1","type":"invalid_request_error"}}`, false, "does not have access"},
		{"404", 404, `{"error":{"message":"The model does not exist","type":"invalid_request_error","code":"model_not_found"}}`, false, `no model "gpt-4.1"`},
		{"429", 429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, true, "Rate limit reached"},
		{"429 quota", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, false, "out of quota"},
		{"500", 500, `{"error":{"message":"The server had an error","type":"server_error"}}`, true, "500 Internal Server Error"},
		{"503 plain", 503, `overloaded`, true, "(503 Service Unavailable): overloaded"},
		// vLLM's error body has no "error" object.
		{"400 vllm", 400, `{"object":"error","message":"bad role","type":"BadRequestError","param":null,"code":400}`, false, "(400 Bad Request): bad role"},
		// llama.cpp's code is a number.
		{"500 llama.cpp", 500, `{"error":{"code":500,"message":"slot unavailable","type":"server_error"}}`, true, "(500 Internal Server Error): slot unavailable"},
		// FastAPI-style.
		{"422 detail", 422, `{"detail":"model field required"}`, false, "model field required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request) {
				ct := "application/json"
				if !strings.HasPrefix(tc.body, "{") {
					ct = "text/plain; charset=utf-8"
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			})
			m := newModel(t, f, Options{})
			_, err := m.Generate(context.Background(), userText("hi"))
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("err %#v, want a *model.Error", err)
			}
			t.Log(me.Text)
			if me.Retryable != tc.retryable {
				t.Errorf("retryable %v, want %v (%s)", me.Retryable, tc.retryable, me.Text)
			}
			if !strings.Contains(me.Text, tc.text) {
				t.Errorf("text %q, want %q in it", me.Text, tc.text)
			}
			if strings.Contains(me.Text, testKey) || strings.Contains(err.Error(), testKey) {
				t.Errorf("text %q holds the key", me.Text)
			}
			if me.Err == nil {
				t.Error("no wrapped error")
			}
			var apiErr *sdk.Error
			if errors.As(err, &apiErr) && apiErr.StatusCode != tc.status {
				t.Errorf("wrapped status %d, want %d", apiErr.StatusCode, tc.status)
			}
			if n := f.n.Load(); n != 1 {
				t.Errorf("%d requests: the SDK retried", n)
			}
		})
	}
}

func TestUnauthorizedWithoutKey(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":{"message":"no key"}}`, http.StatusUnauthorized)
	})
	m := newModel(t, f, Options{KeyOptional: true, LookupEnv: env(nil)})
	_, err := m.Generate(context.Background(), userText("hi"))
	var me *model.Error
	if !errors.As(err, &me) || me.Retryable || !strings.Contains(me.Text, "wants an API key") || !strings.Contains(me.Text, "OPENAI_API_KEY") {
		t.Fatalf("err %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	f := newFake(t, sse())
	base := f.URL
	f.Close() // nothing listens there now
	m := newModel(t, f, Options{BaseURL: base + "/v1"})
	_, err := m.Generate(context.Background(), userText("hi"))
	var me *model.Error
	if !errors.As(err, &me) || !me.Retryable {
		t.Fatalf("err %#v, want a retryable *model.Error", err)
	}
	if !strings.Contains(me.Text, "could not get an answer from the model server at") {
		t.Errorf("text %q", me.Text)
	}
}

func TestStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		respond   http.HandlerFunc
		retryable bool
		text      string
	}{
		{"error event", sse(chunk(text("Hel"), ""), `{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`),
			true, "reported an error while answering: The server had an error"},
		{"cut short", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", chunk(text("Hel"), ""))
		}, true, "ended before the model finished"},
		{"not JSON", sse(`{"choices": [`), false, "not Chat Completions JSON"},
		{"not streamed", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
		}, false, "did not stream its answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.respond)
			m := newModel(t, f, Options{})
			_, err := m.Generate(context.Background(), userText("hi"))
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("err %#v, want a *model.Error", err)
			}
			t.Log(me.Text)
			if me.Retryable != tc.retryable || !strings.Contains(me.Text, tc.text) {
				t.Errorf("retryable %v, text %q; want %v, %q", me.Retryable, me.Text, tc.retryable, tc.text)
			}
		})
	}
}

func TestCanceledMidStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunk(text("Hel"), ""))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the client goes away
	})
	m := newModel(t, f, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := userText("hi")
	req.OnText = func(string) { cancel() }
	_, err := m.Generate(ctx, req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	var me *model.Error
	if !errors.As(err, &me) || me.Retryable {
		t.Errorf("err %#v, want a *model.Error, not retryable", err)
	}
}

func TestStopReasons(t *testing.T) {
	call := `{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	for _, tc := range []struct {
		name   string
		chunks []string
		stop   model.StopReason
	}{
		{"stop", []string{chunk(text("a"), "stop")}, model.EndTurn},
		{"length", []string{chunk(text("a"), "length")}, model.MaxTokens},
		{"length mid call", []string{chunk(call, "length")}, model.MaxTokens},
		{"content_filter", []string{chunk(text("a"), "content_filter")}, model.Refused},
		{"refusal", []string{chunk(`{"refusal":"I can't help with that."}`, "stop")}, model.Refused},
		{"stop with calls", []string{chunk(call, ""), chunk(`{}`, "stop")}, model.StopToolUse},
		{"tool_calls", []string{chunk(call, "tool_calls")}, model.StopToolUse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, sse(tc.chunks...))
			resp, err := newModel(t, f, Options{}).Generate(context.Background(), userText("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Stop != tc.stop {
				t.Errorf("stop %q, want %q", resp.Stop, tc.stop)
			}
		})
	}
}

func TestRefusalIsText(t *testing.T) {
	f := newFake(t, sse(chunk(`{"refusal":"I can't "}`, ""), chunk(`{"refusal":"help."}`, "stop")))
	var deltas []string
	req := userText("hi")
	req.OnText = func(d string) { deltas = append(deltas, d) }
	resp, err := newModel(t, f, Options{}).Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "I can't help." || strings.Join(deltas, "") != resp.Text() {
		t.Errorf("text %q, deltas %q", resp.Text(), deltas)
	}
}

// Compatible servers' quirks: whole calls all at index 0 with their own
// ids, a call with no id, arguments that are not JSON, usage in every
// chunk as a running total, a last chunk with no model.
func TestCompatibleServerQuirks(t *testing.T) {
	f := newFake(t, sse(
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"n\":1}"}}]},"finish_reason":null}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"b","arguments":"{oops"}}]},"finish_reason":null}],"usage":{"prompt_tokens":10,"completion_tokens":9,"total_tokens":19}}`,
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"function":{"name":"c","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":12,"total_tokens":22}}`,
	))
	resp, err := newModel(t, f, Options{}).Generate(context.Background(), userText("hi"))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls %+v, want 2", calls)
	}
	if calls[0].ID != "call_1" || calls[0].Name != "a" || string(calls[0].Args) != `{"n":1}` {
		t.Errorf("call 0 %+v", calls[0])
	}
	// The -1 delta continues the call at index 0 (call_2), whose name is
	// already set.
	if calls[1].ID != "call_2" || calls[1].Name != "b" || string(calls[1].Args) != `"{oops"` {
		t.Errorf("call 1 %+v (args %s)", calls[1], calls[1].Args)
	}
	if resp.Usage != (model.Usage{InputTokens: 10, OutputTokens: 12}) {
		t.Errorf("usage %+v, want the last report", resp.Usage)
	}
	if resp.Model != "qwen3" {
		t.Errorf("model %q", resp.Model)
	}
}

func TestCallWithNoIDGetsOne(t *testing.T) {
	f := newFake(t, sse(chunk(`{"tool_calls":[{"index":0,"function":{"name":"f","arguments":""}}]}`, "tool_calls")))
	resp, err := newModel(t, f, Options{}).Generate(context.Background(), userText("hi"))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Calls()
	if len(calls) != 1 || !strings.HasPrefix(calls[0].ID, "call_") || len(calls[0].ID) <= len("call_") || string(calls[0].Args) != "{}" {
		t.Errorf("calls %+v", calls)
	}
}

func TestBadRequestsAreNotSent(t *testing.T) {
	f := newFake(t, sse(chunk(text("never"), "stop")))
	m := newModel(t, f, Options{})
	for _, req := range []model.Request{
		{Messages: []model.Message{{Role: "robot"}}},
		{Messages: []model.Message{{Role: model.User, Content: []model.Block{{Type: model.Image, Data: "AAAA"}}}}},
		{Messages: []model.Message{{Role: model.User, Content: []model.Block{{Type: model.ToolResult}}}}},
		{Messages: []model.Message{{Role: model.Assistant, Content: []model.Block{{Type: model.ToolResult}}}}},
		{Tools: []model.Tool{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}},
	} {
		_, err := m.Generate(context.Background(), req)
		var me *model.Error
		if !errors.As(err, &me) || me.Retryable {
			t.Errorf("request %+v: err %v, want a not retryable *model.Error", req, err)
		}
	}
	if n := f.n.Load(); n != 0 {
		t.Errorf("%d bad requests sent", n)
	}
}

func TestNewAndInfo(t *testing.T) {
	for _, opts := range []Options{
		{},
		{Model: "m", BaseURL: "localhost:8080"},
		{Model: "m", BaseURL: "ftp://host/v1"},
		{Model: "m", MaxTokens: -1},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
	m, err := New(Options{Model: "gpt-4.1", ContextWindow: 1047576})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Info(), (model.Info{ID: "gpt-4.1", Vendor: "openai", ContextWindow: 1047576}); got != want {
		t.Errorf("Info %+v, want %+v", got, want)
	}
}
