package openai

import (
	"context"
	"testing"

	"github.com/mcpl-go/mcpl/internal/model"
)

func TestSamplingParameters(t *testing.T) {
	temp, topP := 0.25, 0.9
	for _, tc := range []struct {
		name      string
		temp, top *float64
		want      map[string]any // the fields' values; nil: absent
	}{
		{"none", nil, nil, map[string]any{"temperature": nil, "top_p": nil}},
		{"top_p", nil, &topP, map[string]any{"temperature": nil, "top_p": 0.9}},
		{"both", &temp, &topP, map[string]any{"temperature": 0.25, "top_p": 0.9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, sse(chunk(text("ok"), "stop")))
			req := userText("hi")
			req.Temperature, req.TopP = tc.temp, tc.top
			if _, err := newModel(t, f, Options{}).Generate(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			body := f.hit(t).body
			for field, want := range tc.want {
				got, ok := body[field]
				if want == nil && ok {
					t.Errorf("%s = %v, want it absent", field, got)
				}
				if want != nil && got != want {
					t.Errorf("%s = %v, want %v", field, got, want)
				}
			}
		})
	}
}

func TestCachedTokens(t *testing.T) {
	u := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[],` +
		`"usage":{"prompt_tokens":3200,"completion_tokens":9,"total_tokens":3209,"prompt_tokens_details":{"cached_tokens":3072}}}`
	f := newFake(t, sse(chunk(text("ok"), "stop"), u))
	resp, err := newModel(t, f, Options{}).Generate(context.Background(), userText("hi"))
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{InputTokens: 3200, OutputTokens: 9, CacheReadTokens: 3072}
	if resp.Usage != want {
		t.Errorf("Usage = %+v, want %+v (prompt_tokens includes the cached ones)", resp.Usage, want)
	}
}
