package agent

import (
	"encoding/json"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/schema"
)

// fittingModel is a fake model whose provider's rules are OpenAI's.
type fittingModel struct{ *fakeModel }

func (fittingModel) FitSchema(s json.RawMessage) (json.RawMessage, error) { return schema.OpenAI(s) }

const unfitMessage = "a tool is left out of an agent's tool list: the agent's model provider would refuse the tool's input schema, and the schema can't be repaired without changing what it means"

// TestToolSchemasFitted: an agent whose model fits schemas is offered a
// repairable tool repaired, a good one as it is, and not offered one
// whose schema can't be fitted (a server's or the host's); each of those
// is warned of once across two turns, and both turns complete.
func TestToolSchemasFitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fm := &fakeModel{respond: func(int, model.Request) (model.Response, error) {
			return respond(model.EndTurn, textBlock("hi")), nil
		}}
		env := newEnv()
		good := `{"type":"object","properties":{"q":{"type":"string"}}}`
		env.tools = []model.Tool{
			{Name: "a--good", InputSchema: json.RawMessage(good)},
			{Name: "a--list", InputSchema: json.RawMessage(`{"type":"object","properties":{"c":{"type":"array"}}}`)},
			{Name: "b--bad", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"int"}}}`)},
			{Name: "host_bad", InputSchema: json.RawMessage(`{"type":"array"}`)},
		}
		opts := Options{Env: env, Agents: []Spec{{Name: "ada", Model: fittingModel{fm}}}}
		h := setup(t, &opts)
		logs := logtest.New()
		opts.Logger = logs.Logger()
		h.start(opts)
		defer h.rt.Close()
		synctest.Wait()

		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "one"))
		h.add(chanMsg("chat", "general", "g2", "two"))

		reqs := fm.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2 (one a turn)", len(reqs))
		}
		for i, req := range reqs {
			schemas := map[string]string{}
			for _, tl := range req.Tools {
				schemas[tl.Name] = string(tl.InputSchema)
			}
			want := map[string]string{
				"a--good": good,
				"a--list": `{"properties":{"c":{"items":{},"type":"array"}},"type":"object"}`,
			}
			if len(schemas) != len(want) {
				t.Errorf("call %d offered %q, want a--good and a--list", i, toolNames(req.Tools))
			}
			for name, s := range want {
				if schemas[name] != s {
					t.Errorf("call %d: %s's schema is %s, want %s", i, name, schemas[name], s)
				}
			}
		}
		if ends := h.rec.of("ada", EventTurnEnd); len(ends) != 2 {
			t.Errorf("%d turns ended, want 2", len(ends))
		}
		if _, _, _, pubs := h.env.snapshot(); len(pubs) != 2 {
			t.Errorf("%d replies posted, want 2: %+v", len(pubs), pubs)
		}

		warned := logs.Find(unfitMessage)
		if len(warned) != 2 {
			t.Fatalf("%d warnings, want one for each unfit tool:\n%s", len(warned), logs.Dump())
		}
		got := map[string][3]string{}
		for _, w := range warned {
			if w.Level != slog.LevelWarn || w.Attr("agent") != "ada" {
				t.Errorf("warning %+v: want level WARN and agent ada", w)
			}
			got[w.Attr("tool")] = [3]string{w.Attr("server"), w.Attr("rule"), w.Attr("reason")}
		}
		if g := got["b--bad"]; g[0] != "b" || g[1] != schema.RuleTypeName || g[2] == "" {
			t.Errorf("b--bad's warning: server, rule, reason %q", g)
		}
		if g := got["host_bad"]; g[0] != "the host" || g[1] != schema.RuleTopObject {
			t.Errorf("host_bad's warning: server, rule, reason %q", g)
		}
	})
}

// A model that doesn't fit schemas is offered them as they are.
func TestToolSchemasNotFitted(t *testing.T) {
	env := newEnv()
	bad := `{"type":"object","properties":{"n":{"type":"int"}}}`
	env.tools = []model.Tool{{Name: "b--bad", InputSchema: json.RawMessage(bad)}}
	bubble(t, Options{Env: env}, func(h *harness) {
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "one"))
		reqs := h.model.requests()
		if len(reqs) != 1 || len(reqs[0].Tools) != 1 || string(reqs[0].Tools[0].InputSchema) != bad {
			t.Errorf("requests %+v: want one, offering b--bad as it is", reqs)
		}
	})
}

// Past maxUnfit triples, unfit tools are left out without a warning of
// their own, and one warning says so.
func TestUnfitWarningsBounded(t *testing.T) {
	logs := logtest.New()
	rt := &Runtime{log: logs.Logger()}
	err := &schema.Error{Rule: schema.RuleTypeName, Detail: "x"}
	for i := range maxUnfit + 5 {
		rt.warnUnfit("ada", "s--t"+string(rune('a'+i%26))+string(rune('a'+i/26)), err)
		rt.warnUnfit("ada", "s--t"+string(rune('a'+i%26))+string(rune('a'+i/26)), err) // again: not warned twice
	}
	if n := len(logs.Find(unfitMessage)); n != maxUnfit {
		t.Errorf("%d tools named, want %d", n, maxUnfit)
	}
	if n := len(logs.All()); n != maxUnfit+1 {
		t.Errorf("%d lines, want %d (the bound said once)", n, maxUnfit+1)
	}
}
