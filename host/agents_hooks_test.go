package host_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// Context hooks, inference/lifecycle, inference/request and model/info
// end to end, and the agents on the hosted providers (against local
// servers speaking their wire formats).

// hostedConfig runs ada on PROVIDER at BASEURL; the server is granted
// every agent path but beforeUser and afterUser injection.
const hostedConfig = `
servers:
  - id: chat
    command: SERVER
    channels: {sendTools: [send_message]}
    capabilities:
      disable: [contextHooks.beforeInference.inject.beforeUser, contextHooks.beforeInference.inject.afterUser]
      enable: [tools, "channels.*", pushEvents, modelInfo, inferenceLifecycle, inferenceRequest, inferenceRequest.streaming, contextHooks.beforeInference.observe, contextHooks.beforeInference.inject.system]
agents:
  - name: ada
    model: {provider: PROVIDER, model: test-model, baseURL: BASEURL, apiKeyEnv: TEST_MODEL_KEY, contextWindow: 100000}
    system: You are Ada.
inference:
  - {server: chat, agent: ada}
`

func hosted(provider, url string) string {
	return strings.NewReplacer("PROVIDER", provider, "BASEURL", url).Replace(hostedConfig)
}

// The acceptance's second half: the scripted conversation (join when
// invited, answer) on each hosted provider.
func TestAgentOnHostedProviders(t *testing.T) {
	for _, tc := range []struct {
		provider string
		fake     func(testing.TB, ...fakeapi.Reply) *fakeapi.Server
	}{{"anthropic", fakeapi.NewAnthropic}, {"openai", fakeapi.NewOpenAI}} {
		t.Run(tc.provider, func(t *testing.T) {
			api := tc.fake(t,
				fakeapi.Reply{Calls: []fakeapi.Call{{ID: "c1", Name: "channel_open", Args: `{"channelId":"b"}`}}},
				fakeapi.Reply{Text: "Joined b.", InputTokens: 42, OutputTokens: 7})
			r := newAgentRig(t, hosted(tc.provider, api.URL), nil)
			r.incoming("b", "m1", "come to b", "chat:mention")
			r.tr.turnEnd(t, "ada", 1)
			evs := r.tr.turn("ada", 1)
			if tools := find(evs, agent.EventTool); len(tools) != 1 || tools[0].Tool != "channel_open" || tools[0].Outcome != "ok" {
				t.Errorf("tools = %+v", tools)
			}
			models := find(evs, agent.EventModel)
			if len(models) != 2 || models[1].Usage == nil || models[1].Usage.In != 42 || models[1].Usage.Out != 7 || models[1].Model != "test-model" {
				t.Errorf("model events = %+v", models)
			}
			if sp := find(evs, agent.EventSpeech); len(sp) != 1 || sp[0].Channel != "b" || sp[0].Outcome != "delivered" || sp[0].Text != "Joined b." {
				t.Errorf("speech = %+v", sp)
			}
			// The second request carried the tool's result back.
			reqs := api.Requests()
			if len(reqs) != 2 || !strings.Contains(string(reqs[1]), `"c1"`) {
				t.Errorf("requests: %s", reqs)
			}
			for _, h := range api.Headers() {
				if h.Get("x-api-key") != "test-key" && h.Get("Authorization") != "Bearer test-key" {
					t.Errorf("request without the key: %v", h)
				}
			}
		})
	}
}

func TestAgentContextHooksAndLifecycle(t *testing.T) {
	api := fakeapi.NewAnthropic(t, fakeapi.Reply{Text: "noted", InputTokens: 10, OutputTokens: 3}, fakeapi.Reply{Status: 400, Text: "bad request, as scripted"})
	r := newAgentRig(t, hosted("anthropic", api.URL), nil)
	r.must("chat--hook", `{"injections":[{"namespace":"mem","position":"system","content":"REMEMBER-THIS"},{"namespace":"mem","position":"afterUser","content":"SNEAKY-AFTER"}]}`)
	r.incoming("a", "m1", "hello hooks")
	r.tr.turnEnd(t, "ada", 1)
	body := string(api.Requests()[0])
	if !strings.Contains(body, "REMEMBER-THIS") || !strings.Contains(body, "You are Ada.") {
		t.Errorf("the system injection is missing: %s", body)
	}
	if strings.Contains(body, "SNEAKY-AFTER") {
		t.Errorf("the ungranted afterUser injection reached the model: %s", body)
	}
	if n := logCount(r.rec, "context/beforeInference: 1 of the server's injections dropped", "chat"); n != 1 {
		t.Errorf("the dropped injection was logged %d times:\n%s", n, r.rec.Dump())
	}
	var hooks []struct {
		Method string
		Params map[string]any
	}
	json.Unmarshal([]byte(r.must("chat--hooks_log", `{"count":3}`)), &hooks)
	if len(hooks) != 3 || hooks[0].Method != "context/beforeInference" || hooks[1].Params["phase"] != "started" || hooks[2].Params["phase"] != "completed" {
		t.Fatalf("hooks log = %+v", hooks)
	}
	if hooks[0].Params["userMessage"] == nil || !strings.Contains(hooks[0].Params["userMessage"].(string), "hello hooks") {
		t.Errorf("beforeInference userMessage = %v (observe is granted)", hooks[0].Params["userMessage"])
	}
	if hooks[0].Params["inferenceId"] != hooks[1].Params["inferenceId"] || hooks[1].Params["inferenceId"] != hooks[2].Params["inferenceId"] {
		t.Errorf("the inference ids differ: %+v", hooks)
	}
	usage, _ := hooks[2].Params["usage"].(map[string]any)
	if usage["inputTokens"] != float64(10) || usage["outputTokens"] != float64(3) {
		t.Errorf("completed usage = %v", hooks[2].Params["usage"])
	}
	// A model call that fails ends its inference as failed, and the
	// agent is told.
	r.incoming("a", "m2", "again")
	end := r.tr.turnEnd(t, "ada", 2)
	json.Unmarshal([]byte(r.must("chat--hooks_log", `{"count":4,"method":"inference/lifecycle"}`)), &hooks)
	if len(hooks) != 4 || hooks[2].Params["phase"] != "started" || hooks[3].Params["phase"] != "failed" || end.Reason != "error" {
		t.Errorf("lifecycle = %+v, turn ended %q", hooks, end.Reason)
	}
	notes := find(r.tr.turn("ada", 2), agent.EventNotice)
	// A 400 is not retried, and the provider's words are the operator's.
	if len(notes) != 1 || !strings.HasPrefix(notes[0].Text, "[host] This turn ended early: the model call failed, and trying it again would not help;") || strings.Contains(notes[0].Text, "bad request, as scripted") {
		t.Errorf("notices = %+v", notes)
	}
}

func TestServerInitiatedInference(t *testing.T) {
	api := fakeapi.NewAnthropic(t, fakeapi.Reply{Text: "a short summary", InputTokens: 20, OutputTokens: 4})
	r := newAgentRig(t, hosted("anthropic", api.URL), nil)
	var got struct {
		Result struct {
			Content, Model, FinishReason string
			Usage                        struct{ InputTokens, OutputTokens int }
		}
		Chunks []string
	}
	json.Unmarshal([]byte(r.must("chat--infer", `{"messages":[{"role":"user","content":"summarise"}],"stream":true,"maxTokens":50}`)), &got)
	if got.Result.Content != "a short summary" || got.Result.Model != "test-model" || got.Result.FinishReason != "end_turn" ||
		got.Result.Usage.InputTokens != 20 || got.Result.Usage.OutputTokens != 4 || strings.Join(got.Chunks, "") != "a short summary" || len(got.Chunks) < 2 {
		t.Errorf("infer = %+v", got)
	}
	if body := string(api.Requests()[0]); !strings.Contains(body, `"max_tokens":50`) || !strings.Contains(body, "summarise") {
		t.Errorf("the model was asked: %s", body)
	}
	var info struct{ Result map[string]any }
	json.Unmarshal([]byte(r.must("chat--model_info", `{}`)), &info)
	if info.Result["id"] != "test-model" || info.Result["vendor"] != "anthropic" || info.Result["contextWindow"] != float64(100000) {
		t.Errorf("model/info = %+v", info)
	}
	// A hook that asks for inference is refused (SPEC §10.7): its answer,
	// injected at system, carries the refusal.
	r.must("chat--hook", `{"mode":"infer"}`)
	r.incoming("a", "m1", "hi")
	r.tr.turnEnd(t, "ada", 1)
	if body := string(api.Requests()[1]); !strings.Contains(body, "-32600") {
		t.Errorf("the hook's inference was not refused: %s", body)
	}
}

// A restarted host resumes the conversation: the model is sent what the
// agent saw and said before.
func TestAgentHistoryAcrossRestart(t *testing.T) {
	api := fakeapi.NewAnthropic(t, fakeapi.Reply{Text: "first answer"}, fakeapi.Reply{Text: "second answer"})
	r := newAgentRig(t, hosted("anthropic", api.URL), nil)
	r.incoming("a", "m1", "remember the word pelican", "chat:mention")
	r.tr.turnEnd(t, "ada", 1)
	r.stop()
	r.start()
	r.incoming("a", "m2", "what was the word?", "chat:mention")
	r.tr.turnEnd(t, "ada", 2)
	reqs := api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	body := string(reqs[1])
	for _, want := range []string{"remember the word pelican", "first answer", "[delivered] Your reply was posted to #a (a).", "what was the word?"} {
		if !strings.Contains(body, want) {
			t.Errorf("the second request lacks %q: %s", want, body)
		}
	}
}
