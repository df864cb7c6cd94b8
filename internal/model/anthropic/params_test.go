package anthropic

import (
	"context"
	"encoding/json"
	"reflect"
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
		{"temperature", &temp, nil, map[string]any{"temperature": 0.25, "top_p": nil}},
		{"both", &temp, &topP, map[string]any{"temperature": 0.25, "top_p": 0.9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, streaming(messageStart("claude-test", 1), messageDelta("end_turn", 1), messageStop))
			req := hello()
			req.Temperature, req.TopP = tc.temp, tc.top
			if _, err := newModel(t, f, Options{}).Generate(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			body := f.requests()[0].body
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

// TestCacheBreakpoints: the system block and the last tool carry
// cache_control, no other tool does, and none is sent where there is
// nothing to mark.
func TestCacheBreakpoints(t *testing.T) {
	ephemeral := map[string]any{"type": "ephemeral"}
	f := newFake(t, streaming(messageStart("claude-test", 1), messageDelta("end_turn", 1), messageStop))
	m := newModel(t, f, Options{})
	req := hello()
	req.System = "Be brief."
	req.Tools = []model.Tool{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	body := f.requests()[0].body
	system := body["system"].([]any)
	if got := system[0].(map[string]any)["cache_control"]; !reflect.DeepEqual(got, ephemeral) {
		t.Errorf("system cache_control = %v, want %v", got, ephemeral)
	}
	tools := body["tools"].([]any)
	for i, tool := range tools {
		got, ok := tool.(map[string]any)["cache_control"]
		if last := i == len(tools)-1; last != ok || (last && !reflect.DeepEqual(got, ephemeral)) {
			t.Errorf("tool %d cache_control = %v (present %v), want it on the last tool only", i, got, ok)
		}
	}

	if _, err := m.Generate(context.Background(), hello()); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(f.requests()[1].body)
	if _, ok := f.requests()[1].body["system"]; ok {
		t.Errorf("a request with no system prompt sent one: %s", raw)
	}
}

func TestCacheUsage(t *testing.T) {
	start := event{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,` +
		`"usage":{"input_tokens":12,"cache_read_input_tokens":3000,"cache_creation_input_tokens":450,"output_tokens":1}}}`}
	f := newFake(t, streaming(start, textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", 7), messageStop))
	resp, err := newModel(t, f, Options{}).Generate(context.Background(), hello())
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{InputTokens: 12, OutputTokens: 7, CacheReadTokens: 3000, CacheWriteTokens: 450}
	if resp.Usage != want {
		t.Errorf("Usage = %+v, want %+v", resp.Usage, want)
	}
}
