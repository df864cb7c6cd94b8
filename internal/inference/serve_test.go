package inference_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/inference"
	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/protocol"
)

// msgs is params with the given messages JSON.
func msgs(messages string) string {
	return `{"featureSet":"memory.consolidation","messages":` + messages + `}`
}

func TestServeRefusals(t *testing.T) {
	all := []string{"inferenceRequest", "inferenceRequest.streaming"}
	noStream := []string{"inferenceRequest"}
	tests := []struct {
		name    string
		params  string
		paths   []string
		inHook  bool
		noRoute bool
		code    int64
		data    string
		words   []string
	}{
		{name: "in a hook", params: minimal, paths: all, inHook: true,
			code: protocol.CodeInvalidRequest, words: []string{"a context hook may not ask for inference", "§10.7"}},
		{name: "in a hook, whatever the params", params: `[]`, paths: all, inHook: true, code: protocol.CodeInvalidRequest},
		{name: "inferenceRequest not granted", params: minimal, paths: nil,
			code: protocol.CodeCapabilityDenied, data: `{"capability":"inferenceRequest"}`, words: []string{`capability "inferenceRequest"`}},
		{name: "no featureSet", params: `{"messages":[{"role":"user","content":"x"}]}`, paths: all,
			code: protocol.CodeFeatureSetNotEnabled, data: `{"featureSet":""}`, words: []string{"must name its feature set"}},
		{name: "unknown feature set", params: `{"featureSet":"nope","messages":[{"role":"user","content":"x"}]}`, paths: all,
			code: protocol.CodeUnknownFeatureSet, data: `{"featureSet":"nope"}`, words: []string{`"nope" is not declared`}},
		{name: "disabled feature set", params: `{"featureSet":"memory.off","messages":[{"role":"user","content":"x"}]}`, paths: all,
			code: protocol.CodeFeatureSetNotEnabled, data: `{"featureSet":"memory.off"}`, words: []string{`"memory.off" is disabled (capability_denied)`}},
		{name: "featureSet a number", params: `{"featureSet":3,"messages":[]}`, paths: all,
			code: protocol.CodeInvalidParams, words: []string{"featureSet must be a string"}},
		{name: "stream without the streaming grant", params: `{"featureSet":"memory.consolidation","stream":true,"messages":[{"role":"user","content":"x"}]}`, paths: noStream,
			code: protocol.CodeCapabilityDenied, data: `{"capability":"inferenceRequest.streaming"}`, words: []string{"ask again without stream"}},
		{name: "stream not a boolean", params: `{"featureSet":"memory.consolidation","stream":"yes","messages":[{"role":"user","content":"x"}]}`, paths: all,
			code: protocol.CodeInvalidParams, words: []string{"stream must be a boolean"}},
		{name: "no route", params: minimal, paths: all, noRoute: true,
			code: inference.CodeNoRoute, data: `{"featureSet":"memory.consolidation"}`,
			words: []string{`no model serves inference for server "srv", feature set "memory.consolidation"`, `config key "inference"`}},
		{name: "params not an object", params: `[1]`, paths: all, code: protocol.CodeInvalidParams, words: []string{"not an object"}},
		{name: "no messages", params: `{"featureSet":"memory.consolidation"}`, paths: all, code: protocol.CodeInvalidParams, words: []string{"messages is required"}},
		{name: "messages empty", params: msgs(`[]`), paths: all, code: protocol.CodeInvalidParams, words: []string{"messages is empty"}},
		{name: "messages an object", params: msgs(`{}`), paths: all, code: protocol.CodeInvalidParams, words: []string{"messages must be an array"}},
		{name: "message not an object", params: msgs(`["hi"]`), paths: all, code: protocol.CodeInvalidParams, words: []string{"messages[0] is not an object"}},
		{name: "bad role", params: msgs(`[{"role":"user","content":"a"},{"role":"system","content":"b"}]`), paths: all,
			code: protocol.CodeInvalidParams, words: []string{`messages[1].role is "system"`, `"user" or "assistant"`}},
		{name: "no role", params: msgs(`[{"content":"b"}]`), paths: all, code: protocol.CodeInvalidParams, words: []string{"messages[0].role is missing"}},
		{name: "no content", params: msgs(`[{"role":"user"}]`), paths: all, code: protocol.CodeInvalidParams, words: []string{"messages[0] has no content"}},
		{name: "empty content", params: msgs(`[{"role":"user","content":""}]`), paths: all, code: protocol.CodeInvalidParams, words: []string{"messages[0].content is empty"}},
		{name: "empty block list", params: msgs(`[{"role":"user","content":[]}]`), paths: all, code: protocol.CodeInvalidParams, words: []string{"messages[0].content is empty"}},
		{name: "content a number", params: msgs(`[{"role":"user","content":4}]`), paths: all, code: protocol.CodeInvalidParams, words: []string{"messages[0].content must be a string or an array"}},
		{name: "audio block", params: msgs(`[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"audio","data":"AA","mimeType":"audio/wav"}]}]`), paths: all,
			code: protocol.CodeInvalidParams, words: []string{`messages[1].content[1] has type "audio"`}},
		{name: "resource block", params: msgs(`[{"role":"user","content":[{"type":"resource","uri":"memory://x"}]}]`), paths: all,
			code: protocol.CodeInvalidParams, words: []string{`messages[0].content[0] has type "resource"`}},
		{name: "image by uri", params: msgs(`[{"role":"user","content":[{"type":"image","uri":"https://x/y.png"}]}]`), paths: all,
			code: protocol.CodeInvalidParams, words: []string{"messages[0].content[0] is an image without data and mimeType"}},
		{name: "text block without text", params: msgs(`[{"role":"user","content":[{"type":"text"}]}]`), paths: all,
			code: protocol.CodeInvalidParams, words: []string{"messages[0].content[0] is a text block with no text"}},
		{name: "preferences not an object", params: `{"featureSet":"memory.consolidation","messages":[{"role":"user","content":"x"}],"preferences":5}`, paths: all,
			code: protocol.CodeInvalidParams, words: []string{"preferences must be an object"}},
	}
	for _, mt := range []string{`0`, `-3`, `1.5`, `"100"`, `true`, `3000000000`} {
		tests = append(tests, struct {
			name    string
			params  string
			paths   []string
			inHook  bool
			noRoute bool
			code    int64
			data    string
			words   []string
		}{name: "maxTokens " + mt, params: `{"featureSet":"memory.consolidation","messages":[{"role":"user","content":"x"}],"preferences":{"maxTokens":` + mt + `}}`,
			paths: all, code: protocol.CodeInvalidParams, words: []string{"preferences.maxTokens is " + mt, "positive integer"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := answering()
			route := routeTo(m, nil)
			if tt.noRoute {
				route = func(string, string) (model.Model, string, bool) { return nil, "", false }
			}
			rec := logtest.New()
			s := inference.New(inference.Options{Logger: rec.Logger(), Route: route})
			var n notes
			res, err := s.Serve(t.Context(), "srv", granted(tt.paths...), tt.inHook, json.RawMessage(`1`), json.RawMessage(tt.params), n.notify)
			if res != nil {
				t.Fatalf("answered %v, want a refusal", res)
			}
			wantError(t, err, tt.code, tt.data, tt.words...)
			if got := m.requests(); len(got) != 0 {
				t.Fatalf("the model was asked %d times", len(got))
			}
			if r := rec.One(t, "inference/request refused"); r.Attr("code") != fmt.Sprint(tt.code) || r.Attr("server") != "srv" {
				t.Fatalf("refusal logged as %v", r.Attrs)
			}
		})
	}
}

func TestServeAnswer(t *testing.T) {
	m := answering()
	var asked []string
	rec := logtest.New()
	s := inference.New(inference.Options{Logger: rec.Logger(), Route: routeTo(m, &asked)})
	params := `{"featureSet":"memory.consolidation","conversationId":"conv_9","stream":false,
		"messages":[{"role":"user","content":"Summarize"},{"role":"assistant","content":[{"type":"text","text":"Of what?"}]},
			{"role":"user","content":[{"type":"text","text":"This:"},{"type":"image","data":"iVBOR","mimeType":"image/png"}]}],
		"preferences":{"maxTokens":500,"temperature":0.7,"modelTier":"cheap"}}`
	res, err := s.Serve(t.Context(), "srv", granted("inferenceRequest"), false, json.RawMessage(`1`), json.RawMessage(params), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	const want = `{"content":"Consolidated summary.","model":"claude-haiku-4-5-20251001","finishReason":"end_turn","usage":{"inputTokens":451,"outputTokens":123}}`
	if string(b) != want {
		t.Fatalf("answer %s, want %s", b, want)
	}
	if !slices.Equal(asked, []string{"srv/memory.consolidation"}) {
		t.Fatalf("routed %v", asked)
	}
	reqs := m.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls", len(reqs))
	}
	wantReq := model.Request{MaxTokens: 500, Messages: []model.Message{
		{Role: model.User, Content: []model.Block{{Type: model.Text, Text: "Summarize"}}},
		{Role: model.Assistant, Content: []model.Block{{Type: model.Text, Text: "Of what?"}}},
		{Role: model.User, Content: []model.Block{{Type: model.Text, Text: "This:"}, {Type: model.Image, Data: "iVBOR", MimeType: "image/png"}}},
	}}
	if reqs[0].OnText != nil {
		t.Fatal("OnText set for a request that did not ask to stream")
	}
	reqs[0].OnText = nil
	if diff := cmp.Diff(wantReq, reqs[0]); diff != "" {
		t.Fatalf("model request (-want +got):\n%s", diff)
	}
	r := rec.One(t, "inference/request served")
	for k, v := range map[string]string{"server": "srv", "feature_set": "memory.consolidation", "agent": "memory", "model": "claude-haiku-4-5-20251001",
		"input_tokens": "451", "output_tokens": "123", "conversation_id": "conv_9"} {
		if r.Attr(k) != v {
			t.Errorf("audit %s = %q, want %q", k, r.Attr(k), v)
		}
	}
}

func TestServeDefaults(t *testing.T) {
	m := answering()
	m.resp.Model = ""
	m.resp.Usage = model.Usage{InputTokens: 7, OutputTokens: 9}
	s := inference.New(inference.Options{Route: routeTo(m, nil)})
	res, err := s.Serve(t.Context(), "srv", granted("inferenceRequest"), false, json.RawMessage(`1`), json.RawMessage(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.(inference.Result)
	if got.Model != "haiku-info-id" {
		t.Fatalf("model %q, want the model's Info().ID when the response names none", got.Model)
	}
	if got.Usage != (inference.Usage{InputTokens: 7, OutputTokens: 9}) {
		t.Fatalf("usage %+v, want the model's own figures", got.Usage)
	}
	if mt := m.requests()[0].MaxTokens; mt != inference.DefaultMaxTokens {
		t.Fatalf("MaxTokens %d, want the default %d", mt, inference.DefaultMaxTokens)
	}
}

func TestServeFinishReason(t *testing.T) {
	for stop, want := range map[model.StopReason]string{
		model.EndTurn:     "end_turn",
		model.MaxTokens:   "max_tokens",
		model.StopToolUse: "end_turn",
		"stop_sequence":   "stop_sequence",
		"":                "end_turn",
	} {
		m := answering()
		m.resp.Stop = stop
		res, err := inference.New(inference.Options{Route: routeTo(m, nil)}).
			Serve(t.Context(), "srv", granted("inferenceRequest"), false, json.RawMessage(`1`), json.RawMessage(minimal), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.(inference.Result).FinishReason; got != want {
			t.Errorf("stop %q: finishReason %q, want %q", stop, got, want)
		}
	}
}

func TestServeStreamed(t *testing.T) {
	for _, id := range []string{`7`, `"req-7"`} {
		t.Run(id, func(t *testing.T) {
			m := answering()
			m.deltas = []string{"Consolidated ", "", "summary", "."}
			var n notes
			var atReturn []string
			m.gen = func(_ context.Context, req model.Request) (model.Response, error) {
				for _, d := range m.deltas {
					req.OnText(d)
				}
				atReturn = n.all()
				return m.resp, nil
			}
			s := inference.New(inference.Options{Route: routeTo(m, nil)})
			params := `{"featureSet":"memory.consolidation","stream":true,"messages":[{"role":"user","content":"x"}]}`
			res, err := s.Serve(t.Context(), "srv", granted("inferenceRequest", "inferenceRequest.streaming"), false, json.RawMessage(id), json.RawMessage(params), n.notify)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				`{"requestId":` + id + `,"index":0,"delta":"Consolidated "}`,
				`{"requestId":` + id + `,"index":1,"delta":"summary"}`,
				`{"requestId":` + id + `,"index":2,"delta":"."}`,
			}
			if diff := cmp.Diff(want, n.all()); diff != "" {
				t.Fatalf("chunks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, atReturn); diff != "" {
				t.Fatalf("chunks sent by the time the model answered (-want +got):\n%s", diff)
			}
			if got := res.(inference.Result); got.Usage != (inference.Usage{InputTokens: 451, OutputTokens: 123}) || got.Content != "Consolidated summary." {
				t.Fatalf("answer %+v, want the full text and real usage after the chunks", got)
			}
		})
	}
}

// Text the model hands over after it answered is not sent: every chunk
// precedes the answer.
func TestServeStreamAfterAnswer(t *testing.T) {
	m := answering()
	var onText func(string)
	m.gen = func(_ context.Context, req model.Request) (model.Response, error) {
		onText = req.OnText
		return m.resp, nil
	}
	var n notes
	rec := logtest.New()
	s := inference.New(inference.Options{Logger: rec.Logger(), Route: routeTo(m, nil)})
	params := `{"featureSet":"memory.consolidation","stream":true,"messages":[{"role":"user","content":"x"}]}`
	if _, err := s.Serve(t.Context(), "srv", granted("inferenceRequest", "inferenceRequest.streaming"), false, json.RawMessage(`1`), json.RawMessage(params), n.notify); err != nil {
		t.Fatal(err)
	}
	onText("late")
	if got := n.all(); len(got) != 0 {
		t.Fatalf("chunks after the answer: %v", got)
	}
	rec.One(t, "inference/chunk not sent: the model handed over text after it answered")
}

func TestServeStreamNotifyFails(t *testing.T) {
	m := answering()
	m.deltas = []string{"a", "b", "c"}
	n := notes{fail: errors.New("connection closed")}
	rec := logtest.New()
	s := inference.New(inference.Options{Logger: rec.Logger(), Route: routeTo(m, nil)})
	params := `{"featureSet":"memory.consolidation","stream":true,"messages":[{"role":"user","content":"x"}]}`
	res, err := s.Serve(t.Context(), "srv", granted("inferenceRequest", "inferenceRequest.streaming"), false, json.RawMessage(`1`), json.RawMessage(params), n.notify)
	if err != nil {
		t.Fatal(err)
	}
	if res.(inference.Result).Content != "Consolidated summary." {
		t.Fatalf("answer %+v", res)
	}
	if got := len(n.all()); got != 3 {
		t.Fatalf("%d chunks attempted, want 3: one failure does not stop the stream", got)
	}
	rec.One(t, "inference/chunk not sent; the request goes on and its answer holds the whole text (later failures are not logged)")
}

func TestServeModelFailure(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		err   error
		stop  model.StopReason
		data  string
		words []string
	}{
		{name: "retryable", err: &model.Error{Text: "the provider is overloaded; try again later", Retryable: true},
			data: `{"retryable":true}`, words: []string{"the model failed: the provider is overloaded; try again later"}},
		{name: "not retryable", err: &model.Error{Text: "the model rejected the request: prompt too long"},
			data: `{"retryable":false}`, words: []string{"prompt too long"}},
		{name: "wrapped model error", err: fmt.Errorf("anthropic: %w", &model.Error{Text: "rate limited", Retryable: true}),
			data: `{"retryable":true}`, words: []string{"the model failed: rate limited"}},
		{name: "ctx ended", ctx: canceled, err: context.Canceled,
			data: `{"retryable":true}`, words: []string{"the host stopped waiting for the model"}},
		{name: "other error", err: errors.New("secret-bearing internal detail"),
			data: `{"retryable":false}`, words: []string{"the host's log says why"}},
		{name: "refusal", stop: model.Refused,
			data: `{"reason":"refusal","retryable":false}`, words: []string{"the model declined to answer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := answering()
			m.err = tt.err
			if tt.stop != "" {
				m.resp.Stop = tt.stop
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			s := inference.New(inference.Options{Route: routeTo(m, nil)})
			res, err := s.Serve(ctx, "srv", granted("inferenceRequest"), false, json.RawMessage(`1`), json.RawMessage(minimal), nil)
			if res != nil {
				t.Fatalf("answered %v", res)
			}
			wantError(t, err, protocol.CodeInternalError, tt.data, tt.words...)
			if e := err.(*protocol.Error); strings.Contains(e.Message, "secret-bearing") {
				t.Fatalf("message %q passes on an error that is not a *model.Error", e.Message)
			}
		})
	}
}

func TestModelInfo(t *testing.T) {
	res, err := inference.ModelInfo(&fakeModel{info: model.Info{ID: "m-1", Vendor: "acme", ContextWindow: 200000}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res); string(b) != `{"id":"m-1","vendor":"acme","contextWindow":200000}` {
		t.Fatalf("model/info %s", b)
	}
	res, err = inference.ModelInfo(&fakeModel{info: model.Info{ID: "m-2", Vendor: "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res); string(b) != `{"id":"m-2","vendor":"acme"}` {
		t.Fatalf("model/info %s, want contextWindow omitted when unknown", b)
	}
	res, err = inference.ModelInfo(nil)
	if res != nil {
		t.Fatalf("answered %v with no model", res)
	}
	wantError(t, err, protocol.CodeMethodNotFound, "", "this host has no model to describe")
}
