package agent

import (
	"encoding/json"
	"testing"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/internal/model/openai"
	"github.com/mcpl-go/mcpl/protocol"
)

// TestToolSchemasOverTheWire: an agent on the OpenAI provider, talking to
// the stand-in that checks schemas as the API does, is offered the host's
// channel tools and a server's tools with schemas the API refuses as they
// are; its request is taken (no schema refusal), with the repairable
// tools repaired and the unfit one left out.
func TestToolSchemasOverTheWire(t *testing.T) {
	api := fakeapi.NewOpenAI(t, fakeapi.Reply{Text: "hi"})
	m, err := openai.New(openai.Options{Model: "m", BaseURL: api.URL, APIKeyEnv: "K", LookupEnv: func(string) (string, bool) { return "k", true }})
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv()
	env.tools = protocolTools(channels.Tools())
	env.tools = append(env.tools,
		model.Tool{Name: "s--none"},
		model.Tool{Name: "s--list", InputSchema: json.RawMessage(`{"type":"object","properties":{"l":{"type":"array"}}}`)},
		model.Tool{Name: "s--bad", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"whole number"}}}`)},
	)
	opts := Options{Env: env, Agents: []Spec{{Name: "ada", Model: m}}}
	h := setup(t, &opts)
	logs := logtest.New()
	opts.Logger = logs.Logger()
	h.start(opts)
	defer h.rt.Close()

	env.channel("chat", "general", "open")
	addMessages(t, h.st, chanMsg("chat", "general", "g1", "one"))
	h.rt.Wake()
	api.Wait(1)

	if r := api.SchemaRefusals(); len(r) != 0 {
		t.Fatalf("the stand-in refused the request: %q", r)
	}
	var req struct {
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(api.Requests()[0], &req); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	want := []string{channels.ToolList, channels.ToolOpen, channels.ToolClose, channels.ToolDecline, channels.ToolPublish, "s--none", "s--list"}
	if len(names) != len(want) {
		t.Fatalf("tools sent %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("tool %d sent is %s, want %s", i, names[i], want[i])
		}
	}
	logs.Wait(t, unfitMessage, 1)
	if w := logs.One(t, unfitMessage); w.Attr("tool") != "s--bad" || w.Attr("server") != "s" {
		t.Errorf("the warning: %+v", w)
	}
}

func protocolTools(ts []protocol.Tool) []model.Tool {
	var out []model.Tool
	for _, t := range ts {
		out = append(out, model.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return out
}
