package scripted

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/heading"
	"github.com/mcpl-go/mcpl/internal/model"
)

const issueScript = `steps:
  - call: [{tool: channel_open, args: {channelId: b}}]
  - say: Joined b.
  - silent: true
`

func user(text string) model.Message {
	return model.Message{Role: model.User, Content: []model.Block{{Type: model.Text, Text: text}}}
}

func TestScriptSteps(t *testing.T) {
	s, err := Parse([]byte(issueScript), "ada.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := New(s)
	ctx := context.Background()
	req := model.Request{System: "You are Ada.", Messages: []model.Message{user("hello")}}

	res, err := m.Generate(ctx, req)
	if err != nil || res.Stop != model.StopToolUse {
		t.Fatalf("step 1 = %+v %v", res, err)
	}
	if diff := cmp.Diff([]model.ToolCall{{ID: "call_1", Name: "channel_open", Args: []byte(`{"channelId":"b"}`)}}, res.Calls()); diff != "" {
		t.Errorf("step 1 calls (-want +got):\n%s", diff)
	}

	var streamed []string
	req.OnText = func(d string) { streamed = append(streamed, d) }
	res, err = m.Generate(ctx, req)
	if err != nil || res.Stop != model.EndTurn || res.Text() != "Joined b." || strings.Join(streamed, "") != "Joined b." || len(streamed) != 2 {
		t.Errorf("step 2 = %+v %v, streamed %q", res, err, streamed)
	}
	if res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v, want both counted", res.Usage)
	}
	for i := range 3 { // silent, then out of steps: silent
		res, err = m.Generate(ctx, req)
		if err != nil || res.Stop != model.EndTurn || len(res.Content) != 0 {
			t.Errorf("step %d = %+v %v, want silence", 3+i, res, err)
		}
	}
}

func TestEcho(t *testing.T) {
	m := Echo()
	msgs := []model.Message{
		user("first"),
		{Role: model.Assistant, Content: []model.Block{{Type: model.Text, Text: "first"}}},
		{Role: model.User, Content: []model.Block{
			{Type: model.Text, Text: "[delivered] Your reply was posted to #general (g)."},
			{Type: model.Text, Text: "[#general (g) on chat · from bob" + heading.AddressedMark + "message m2]"},
			{Type: model.Text, Text: "second"},
			{Type: model.Text, Text: "[#general (g) on chat · from carol · message m3]"},
			{Type: model.Text, Text: "ambient"},
		}},
	}
	res, err := m.Generate(context.Background(), model.Request{Messages: msgs})
	if err != nil || res.Text() != "second" || res.Stop != model.EndTurn {
		t.Errorf("echo = %+v %v", res, err)
	}
	// Nothing addressed: silence.
	ambient := append(msgs[:2:2], model.Message{Role: model.User, Content: msgs[2].Content[3:]})
	if res, _ := m.Generate(context.Background(), model.Request{Messages: ambient}); len(res.Content) != 0 {
		t.Errorf("echo of ambient traffic = %+v, want silence", res)
	}
	// A message with no headers (inference/request): its last text.
	if res, _ := m.Generate(context.Background(), model.Request{Messages: msgs[:1]}); res.Text() != "first" {
		t.Errorf("echo without headers = %+v", res)
	}
	toolOnly := append(msgs, model.Message{Role: model.User, Content: []model.Block{{Type: model.ToolResult, Result: &model.Result{CallID: "c1"}}}})
	if res, _ := m.Generate(context.Background(), model.Request{Messages: toolOnly}); len(res.Content) != 0 {
		t.Errorf("echo of a tool result = %+v, want silence", res)
	}
}

func TestParseErrors(t *testing.T) {
	for src, want := range map[string]string{
		"steps:\n  - shout: hi\n":                 "field shout not found",
		"steps:\n  - say: hi\n    silent: true\n": "step 1 must be one of say, call or silent: true",
		"steps:\n  - {}\n":                        "step 1 must be one of",
		"steps:\n  - call: [{args: {a: 1}}]\n":    "step 1, call 1 names no tool",
		"steps: [1, 2]\n":                         "cannot unmarshal",
	} {
		_, err := Parse([]byte(src), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "x.yaml") {
			t.Errorf("Parse(%q) = %v, want an error naming x.yaml and %q", src, err, want)
		}
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Echo().Generate(ctx, model.Request{Messages: []model.Message{user("hi")}}); err != context.Canceled {
		t.Errorf("err = %v", err)
	}
}
