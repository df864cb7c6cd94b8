package main

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
)

// Issue 26 through the path a user takes: mcplhost run, a real channel
// server subprocess, and an agent on each provider's local stand-in,
// which refuses tool schemas as the hosted API does and serves scripted
// failures. Each message addresses the agent; the test waits for the turn
// it woke to end, and reads what the agent said and what the API got.

const standinKey = "sk-standin-SECRET-0123456789abcdefXYZ"

func TestRunProviders(t *testing.T) {
	for _, tc := range []struct {
		provider string
		fake     func(testing.TB, ...fakeapi.Reply) *fakeapi.Server
		// keyBody is a 401's body that quotes the key, in the API's format.
		keyBody string
	}{
		{"openai", fakeapi.NewOpenAI, `{"error":{"message":"Incorrect API key provided: ` + standinKey + `.","type":"invalid_request_error","code":"invalid_api_key"}}`},
		{"anthropic", fakeapi.NewAnthropic, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + standinKey + `"}}`},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			t.Setenv("STANDIN_KEY", standinKey)
			api := tc.fake(t,
				// m1: a turn completes, the host's tools accepted as sent.
				fakeapi.Reply{Text: "first answer"},
				// m2: a rate limit, a server error and a reset, then an answer.
				fakeapi.Reply{Status: 429, RetryAfter: "1", Text: "slow down"},
				fakeapi.Reply{Status: 500, Text: "internal error"},
				fakeapi.Reply{Reset: true},
				fakeapi.Reply{Text: "second answer"},
				// m3: a stream that stalls before any text, then an answer.
				fakeapi.Reply{Text: "never sent", StallAfter: 1},
				fakeapi.Reply{Text: "third answer"},
				// m4: a refused key, quoted in the body: not retried.
				fakeapi.Reply{Status: 401, Body: tc.keyBody},
				// m5: the next message is answered.
				fakeapi.Reply{Text: "fifth answer"},
			)
			model := "{provider: " + tc.provider + ", model: m, baseURL: " + api.URL + ", apiKeyEnv: STANDIN_KEY, temperature: 0.5, topP: 0.9, streamIdleTimeout: 1s, retry: {attempts: 4, maxElapsed: 1m}}"
			r := newAgentRunRig(t, api, model, "    system: You are Ada, in a chat room.\n    wake: {debounce: 0s}\n")

			said := func(id string) []string {
				t.Helper()
				r.incoming(id, "ada, "+id+"?", `["chat:mention"]`)
				start := r.turnEnded(id)
				var out []string
				for _, ev := range r.run.tr.all() {
					if ev.Agent == "ada" && ev.Turn == start.Turn && (ev.Event == agent.EventSpeech || ev.Event == agent.EventNotice) {
						out = append(out, ev.Text)
					}
				}
				return out
			}
			answered := func(id, want string, requests int) {
				t.Helper()
				got := said(id)
				if len(got) == 0 || got[0] != want {
					t.Errorf("%s: the agent said %q, want %q first", id, got, want)
				}
				if n := len(api.Requests()); n != requests {
					t.Errorf("%s: the API got %d requests in all, want %d", id, n, requests)
				}
			}
			answered("m1", "first answer", 1)
			if refused := api.SchemaRefusals(); len(refused) != 0 {
				t.Fatalf("the stand-in refused the host's tools: %q", refused)
			}
			var first struct {
				Temperature *float64 `json:"temperature"`
				TopP        *float64 `json:"top_p"`
			}
			json.Unmarshal(api.Requests()[0], &first)
			if first.Temperature == nil || *first.Temperature != 0.5 || first.TopP == nil || *first.TopP != 0.9 {
				t.Errorf("the request's temperature and top_p: %v %v, want 0.5 and 0.9", first.Temperature, first.TopP)
			}
			if tc.provider == "anthropic" && strings.Count(string(api.Requests()[0]), `"cache_control":{"type":"ephemeral"}`) != 2 {
				t.Errorf("the Anthropic request marks %d cache breakpoints, want 2 (the tools, the system prompt):\n%s", strings.Count(string(api.Requests()[0]), `"cache_control"`), api.Requests()[0])
			}

			began := time.Now()
			answered("m2", "second answer", 5)
			times := api.Times()
			if gap := times[2].Sub(times[1]); gap < time.Second {
				t.Errorf("the retry after a 429 with Retry-After: 1 came %v after it, want 1 s at least", gap)
			}
			if took := time.Since(began); took > 45*time.Second {
				t.Errorf("three retries took %v", took)
			}

			answered("m3", "third answer", 7)
			stalled := false
			for _, ev := range r.run.tr.all() {
				if ev.Event == agent.EventModelRetry && strings.Contains(ev.Text, "stalled") {
					stalled = true
				}
			}
			if !stalled {
				t.Error("no model_retry event says the answer stalled")
			}

			got := said("m4")
			want := "[host] This turn ended early: the model call failed, and trying it again would not help; the message was not answered. What you said before it stands; nothing after it was sent. The next message that wakes you starts a new turn."
			if len(got) != 1 || got[0] != want {
				t.Errorf("m4: the agent was told %q, want %q", got, want)
			}
			if n := len(api.Requests()); n != 8 {
				t.Errorf("m4: the API got %d requests in all, want 8 (a 401 is not retried)", n)
			}
			answered("m5", "fifth answer", 9)

			// Nothing of the operator's went to the model.
			u, _ := url.Parse(api.URL)
			last := string(api.Requests()[8])
			for _, secret := range []string{u.Host, "STANDIN_KEY", standinKey, "127.0.0.1"} {
				if strings.Contains(last, secret) {
					t.Errorf("the request after the failures has %q:\n%s", secret, last)
				}
			}
			if !strings.Contains(last, "trying it again would not help") {
				t.Errorf("the request after the failures doesn't carry the agent's note of it:\n%s", last)
			}
			// Nor did the key reach the log.
			if log := r.run.stderr.String(); strings.Contains(log, "SECRET") {
				t.Errorf("the log has the key:\n%s", log)
			}
		})
	}
}
