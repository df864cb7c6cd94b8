package config_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/config"
)

// agentOne decodes a file whose first agent's keys are extra, after
// name: ada (extra may start more agents), and returns that agent.
func agentOne(t *testing.T, extra string) (config.Agent, error) {
	t.Helper()
	cfg, err := parse(t, "agents:\n  - name: ada\n"+extra, t.TempDir())
	if err != nil {
		return config.Agent{}, err
	}
	if len(cfg.Agents) == 0 || cfg.Agents[0].Name != "ada" {
		t.Fatalf("agents %+v, want ada first", cfg.Agents)
	}
	return cfg.Agents[0], nil
}

// TestNoAgents: a file without agents is valid and runs none; agents: []
// and inference: [] are the same as leaving them out.
func TestNoAgents(t *testing.T) {
	for _, src := range []string{"servers: []\n", "agents: []\n", "agents: []\ninference: []\nconversations: shared\n"} {
		cfg, err := parse(t, src, t.TempDir())
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if cfg.Agents != nil || cfg.Inference != nil || cfg.Conversations != config.ConversationsShared {
			t.Errorf("%q: agents %#v, inference %#v, conversations %q", src, cfg.Agents, cfg.Inference, cfg.Conversations)
		}
		if _, ok := cfg.Primary(); ok {
			t.Errorf("%q: a primary with no agents", src)
		}
		if name, ok := cfg.InferenceAgent("chat", "memory.x"); ok {
			t.Errorf("%q: inference routed to %q with no routes", src, name)
		}
	}
}

// TestAgentModels: each provider's fields, and the defaults each gets.
func TestAgentModels(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		src  string
		want config.ModelConfig
	}{
		{"{provider: scripted, echo: true}", config.ModelConfig{Provider: "scripted", Echo: true}},
		{"{provider: scripted, script: ada.yaml}", config.ModelConfig{Provider: "scripted", Script: filepath.Join(dir, "ada.yaml")}},
		{"{provider: scripted, script: ./s/../ada.yaml, echo: false}", config.ModelConfig{Provider: "scripted", Script: filepath.Join(dir, "ada.yaml")}},
		{"{provider: scripted, script: /etc//steps.yaml}", config.ModelConfig{Provider: "scripted", Script: "/etc/steps.yaml"}},
		{"{provider: anthropic, model: claude-sonnet-4-5}", config.ModelConfig{Provider: "anthropic", Model: "claude-sonnet-4-5", APIKeyEnv: "ANTHROPIC_API_KEY"}},
		{"{provider: anthropic, model: m, apiKeyEnv: K, baseURL: 'http://127.0.0.1:9/x', contextWindow: 200_000}",
			config.ModelConfig{Provider: "anthropic", Model: "m", APIKeyEnv: "K", BaseURL: "http://127.0.0.1:9/x", ContextWindow: 200000}},
		{"{provider: openai, model: gpt-4.1}", config.ModelConfig{Provider: "openai", Model: "gpt-4.1", APIKeyEnv: "OPENAI_API_KEY"}},
		{"{provider: openai, model: 7, keyOptional: true, baseURL: 'https://h/v1?x=1', contextWindow: 0x400}",
			config.ModelConfig{Provider: "openai", Model: "7", APIKeyEnv: "OPENAI_API_KEY", KeyOptional: true, BaseURL: "https://h/v1?x=1", ContextWindow: 1024}},
	} {
		cfg, err := parse(t, "agents:\n  - name: ada\n    model: "+tc.src+"\n", dir)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, cfg.Agents[0].Model); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.src, diff)
		}
	}
}

// TestAgentProblems: one problem each, worded for the operator.
func TestAgentProblems(t *testing.T) {
	const m = "    model: {provider: scripted, echo: true}\n"
	for _, tc := range []struct {
		src, err string
	}{
		{"    model: {provider: scripted}\n", `c.yaml:3: agents[0].model: has neither script nor echo: true; give script: ./steps.yaml to play a file's steps, or echo: true to repeat each addressed message`},
		{"    model: {provider: scripted, script: a.yaml, echo: true}\n", `c.yaml:3: agents[0].model: has both script (line 3) and echo: true (line 3); give one: script plays a file's steps, echo: true repeats each addressed message`},
		{"    model:\n      provider: scripted\n      script: a.yaml\n      echo: true\n", `c.yaml:6: agents[0].model: has both script (line 5) and echo: true (line 6); give one: script plays a file's steps, echo: true repeats each addressed message`},
		{"    model: {provider: anthropic, model: m, script: a.yaml}\n", `c.yaml:3: agents[0].model.script: only goes with provider scripted, and this model's provider is anthropic`},
		{"    model: {provider: anthropic, model: m, keyOptional: true}\n", `c.yaml:3: agents[0].model.keyOptional: only goes with provider openai, and this model's provider is anthropic`},
		{"    model: {provider: scripted, echo: true, baseURL: 'http://h'}\n", `c.yaml:3: agents[0].model.baseURL: only goes with provider anthropic or openai, and this model's provider is scripted`},
		{"    model: {provider: gemini, script: a.yaml}\n", `c.yaml:3: agents[0].model.provider: "gemini" is not a provider; write scripted, anthropic or openai`},
		{"    model: {provider: OpenAI, model: m}\n", `c.yaml:3: agents[0].model.provider: "OpenAI" is not a provider; write scripted, anthropic or openai (did you mean openai?)`},
		{"    model: {provider: anthropic}\n", `c.yaml:3: agents[0].model: has no model; give the model's name, like model: claude-sonnet-4-5`},
		{"    model: {provider: openai, model: m, baseURL: 'ws://h/v1'}\n", `c.yaml:3: agents[0].model.baseURL: "ws://h/v1" has scheme ws; a base URL must be http:// or https://`},
		{"    model: {provider: openai, model: m, baseURL: 'https://h/v1?token=s3cret'}\n", `c.yaml:3: agents[0].model.baseURL: has a parameter token; API keys are never written in the file: put the key in an environment variable and name the variable with apiKeyEnv`},
		{"    model: {provider: openai, model: m, baseURL: 'https://h/v1?Key=s3cret'}\n", `c.yaml:3: agents[0].model.baseURL: has a parameter Key; API keys are never written in the file: put the key in an environment variable and name the variable with apiKeyEnv`},
		{"    model: {provider: openai, model: m, baseURL: 'https://h/v1?a=1#frag'}\n", ""},
		{"    model: {provider: openai, model: m, contextWindow: 1e3}\n", `c.yaml:3: agents[0].model.contextWindow: must be a whole number, not "1e3"`},
		{"    model: {provider: openai, model: m, contextWindow: '5'}\n", `c.yaml:3: agents[0].model.contextWindow: must be a whole number without quotes`},
		{"    model: {provider: openai, model: m, contextWindow: -0}\n", ""},
		{"    model: {provider: openai, model: m, temperature: 2.5}\n", `c.yaml:3: agents[0].model.temperature: must be from 0 to 2, not 2.5`},
		{"    model: {provider: openai, model: m, temperature: '0.5'}\n", `c.yaml:3: agents[0].model.temperature: must be a number without quotes`},
		{"    model: {provider: anthropic, model: m, topP: -1}\n", `c.yaml:3: agents[0].model.topP: must be from 0 to 1, not -1`},
		{"    model: {provider: anthropic, model: m, topP: high}\n", `c.yaml:3: agents[0].model.topP: must be a number, not "high"`},
		{"    model: {provider: scripted, echo: true, temperature: 1}\n", `c.yaml:3: agents[0].model.temperature: only goes with provider anthropic or openai, and this model's provider is scripted`},
		{"    model: {provider: openai, model: m, streamIdleTimeout: 0s}\n", `c.yaml:3: agents[0].model.streamIdleTimeout: must be more than 0`},
		{"    model: {provider: openai, model: m, requestTimeout: soon}\n", `c.yaml:3: agents[0].model.requestTimeout: "soon" is not a duration (write it like 5s or 2m30s)`},
		{"    model: {provider: openai, model: m, retry: {attempts: 0}}\n", `c.yaml:3: agents[0].model.retry.attempts: must be from 1 (no retry) to 20, not 0`},
		{"    model: {provider: openai, model: m, retry: {attempt: 3}}\n", `c.yaml:3: agents[0].model.retry.attempt: unknown key (did you mean attempts?)`},
		{"    model: {provider: openai, model: m, retry: 3}\n", `c.yaml:3: agents[0].model.retry: must be a mapping like {attempts: 4, maxElapsed: 2m}, not "3"`},
		{"    model: {provider: openai, model: m, temperature: 0, topP: 0.5, retry: {attempts: 20, maxElapsed: 1h}}\n", ""},
		{m + "    maxTokens: 0\n", `c.yaml:4: agents[0].maxTokens: must be more than 0, not 0 (leave it out for 1024)`},
		{m + "    maxTokens: true\n", `c.yaml:4: agents[0].maxTokens: must be a whole number, not "true"`},
		{m + "    maxTokens: [1]\n", `c.yaml:4: agents[0].maxTokens: must be a whole number, not a list`},
		{m + "    allowedTools: '*'\n", `c.yaml:4: agents[0].allowedTools: "*" is not all or a list; write all, or a list of tool names and patterns like [channel_open, "chat--*"] ([] allows none)`},
		{m + "    allowedTools: [all]\n", `c.yaml:4: agents[0].allowedTools[0]: "all" in a list would name a tool called all; write allowedTools: all, not in a list, to allow every tool`},
		{m + "    name: bea\n", `c.yaml:4: agents[0].name: given twice in one mapping (first on line 2)`},
		{m + "    sytem: hi\n", `c.yaml:4: agents[0].sytem: unknown key (did you mean system?)`},
		{m + "  - name: ada\n" + m, `c.yaml:4: agents[1].name: "ada" is also the name of agents[0] (line 2); names must be unique`},
		{m + "  - name: " + strings.Repeat("b", 64) + "\n" + m, ""},
		{m + "  - name: " + strings.Repeat("b", 65) + "\n" + m, `c.yaml:4: agents[1].name: is longer than 64 characters; a name is a short identifier, like ada`},
		{m + "  - name: b-_9\n" + m, ""},
		{m + "  - name: é\n" + m, `c.yaml:4: agents[1].name: "é" is not a valid name: use letters, digits, "_" and "-" only, like ada or helper-2`},
	} {
		_, err := agentOne(t, tc.src)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.src, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%q: err = %v\nwant %s", tc.src, err, tc.err)
		}
	}
}

// TestAllowedTools: what allowedTools decodes to, and the tools each
// allows by the names agents see.
func TestAllowedTools(t *testing.T) {
	const m = "    model: {provider: scripted, echo: true}\n"
	for _, tc := range []struct {
		src           string
		want          config.AllowedTools
		allow, refuse []string
	}{
		{"", config.AllowedTools{All: true}, []string{"channel_open", "chat--send_message", ""}, nil},
		{"    allowedTools: all\n", config.AllowedTools{All: true}, []string{"channel_open", "anything"}, nil},
		{"    allowedTools: \"all\"\n", config.AllowedTools{All: true}, []string{"channel_open"}, nil},
		{"    allowedTools: []\n", config.AllowedTools{Patterns: []string{}}, nil, []string{"channel_open", ""}},
		{"    allowedTools: [channel_open, \"chat--*\"]\n", config.AllowedTools{Patterns: []string{"channel_open", "chat--*"}},
			[]string{"channel_open", "chat--send_message", "chat--"}, []string{"channel_close", "chat-send", "chats--x", "Channel_open"}},
		{"    allowedTools:\n      - \"*_open\"\n      - 42\n", config.AllowedTools{Patterns: []string{"*_open", "42"}},
			[]string{"channel_open", "_open", "42"}, []string{"channel_opens", "420"}},
	} {
		a, err := agentOne(t, m+tc.src)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, a.AllowedTools); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.src, diff)
		}
		if (a.AllowedTools.Patterns == nil) != (tc.want.Patterns == nil) {
			t.Errorf("%q: Patterns %#v, want %#v (nil and empty differ)", tc.src, a.AllowedTools.Patterns, tc.want.Patterns)
		}
		for _, tool := range tc.allow {
			if !a.AllowsTool(tool) {
				t.Errorf("%q: AllowsTool(%q) = false", tc.src, tool)
			}
		}
		for _, tool := range tc.refuse {
			if a.AllowsTool(tool) {
				t.Errorf("%q: AllowsTool(%q) = true", tc.src, tool)
			}
		}
	}
	// In code: the zero value and All allow everything; All wins over
	// Patterns; matching is ToolPolicy's.
	for _, tc := range []struct {
		tools config.AllowedTools
		name  string
		want  bool
	}{
		{config.AllowedTools{}, "x", true},
		{config.AllowedTools{All: true, Patterns: []string{}}, "x", true},
		{config.AllowedTools{Patterns: []string{}}, "x", false},
		{config.AllowedTools{Patterns: []string{"*ab*c"}}, "abab", false},
		{config.AllowedTools{Patterns: []string{"a*z"}}, "a--b.c/d-z", true},
	} {
		if got := (config.Agent{AllowedTools: tc.tools}).AllowsTool(tc.name); got != tc.want {
			t.Errorf("%+v.AllowsTool(%q) = %v, want %v", tc.tools, tc.name, got, tc.want)
		}
		if got, want := tc.tools.Allows(tc.name), (config.ToolPolicy{Enable: tc.tools.Patterns}).Allows(tc.name) || tc.tools.All; got != want {
			t.Errorf("%+v.Allows(%q) = %v, but ToolPolicy matches %v", tc.tools, tc.name, got, want)
		}
	}
}

// TestAgentWithDefaults: an agent configured in code gets the defaults a
// file's agent gets, from the one place they are applied; what is set
// stays.
func TestAgentWithDefaults(t *testing.T) {
	for _, model := range []string{"{provider: scripted, echo: true}", "{provider: anthropic, model: m}", "{provider: openai, model: m}"} {
		fromFile, err := agentOne(t, "    model: "+model+"\n")
		if err != nil {
			t.Fatal(err)
		}
		inCode := config.Agent{Name: "ada", Model: config.ModelConfig{Provider: fromFile.Model.Provider, Echo: fromFile.Model.Echo, Model: fromFile.Model.Model}}.WithDefaults()
		if diff := cmp.Diff(fromFile, inCode); diff != "" {
			t.Errorf("%s: an agent in code with defaults differs from the file's (-file +code):\n%s", model, diff)
		}
		if fromFile.MaxTokens != config.DefaultMaxTokens || !fromFile.AllowedTools.All {
			t.Errorf("%s: defaults %+v", model, fromFile)
		}
	}
	kept := config.Agent{Name: "a", MaxTokens: 7, AllowedTools: config.AllowedTools{Patterns: []string{}},
		Model: config.ModelConfig{Provider: config.ProviderOpenAI, Model: "m", APIKeyEnv: "K"},
		Wake:  config.Wake{Debounce: config.NoDebounce, MaxDelay: time.Second}}
	if got := kept.WithDefaults(); !cmp.Equal(got, kept) {
		t.Errorf("WithDefaults changed what was set: %+v", got)
	}
	if got := (config.ModelConfig{Provider: "other"}).WithDefaults(); got.APIKeyEnv != "" {
		t.Errorf("an unknown provider got APIKeyEnv %q", got.APIKeyEnv)
	}
	if config.DefaultMaxTokens != 1024 || config.DefaultAnthropicKeyEnv != "ANTHROPIC_API_KEY" || config.DefaultOpenAIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("defaults %d, %s, %s", config.DefaultMaxTokens, config.DefaultAnthropicKeyEnv, config.DefaultOpenAIKeyEnv)
	}
}

// TestConfigWithDefaults: Parse returns a config with defaults applied;
// applying them again changes nothing; a config in code gets them all
// without its slices being changed.
func TestConfigWithDefaults(t *testing.T) {
	cfg, err := config.Load("testdata/good/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*cfg, cfg.WithDefaults()); diff != "" {
		t.Errorf("WithDefaults of a parsed config changed it (-parsed +again):\n%s", diff)
	}
	in := config.Config{
		Dir:       "/d",
		Servers:   []config.Server{{ID: "s", Argv: []string{"s"}}},
		Agents:    []config.Agent{{Name: "a", Model: config.ModelConfig{Provider: config.ProviderAnthropic, Model: "m"}}},
		Inference: []config.InferenceRoute{{Agent: "a"}},
	}
	out := in.WithDefaults()
	if out.Store != "/d/data/host.db" || out.Conversations != config.ConversationsShared ||
		out.Servers[0].ToolPrefix != "s" || out.Agents[0].MaxTokens != 1024 || out.Agents[0].Model.APIKeyEnv != "ANTHROPIC_API_KEY" ||
		out.Inference[0] != (config.InferenceRoute{Server: "*", FeatureSet: "*", Agent: "a"}) {
		t.Errorf("WithDefaults = %+v", out)
	}
	if in.Servers[0].ToolPrefix != "" || in.Agents[0].MaxTokens != 0 || in.Inference[0].Server != "" {
		t.Errorf("WithDefaults changed its receiver's slices: %+v", in)
	}
	if got := (config.Config{}).WithDefaults(); got.Store != "" || got.Servers != nil || got.Agents != nil || got.Inference != nil {
		t.Errorf("WithDefaults of the zero Config = %+v", got)
	}
}

// TestConversations: shared by default; per-channel needs an agent to
// fork.
func TestConversations(t *testing.T) {
	const agent = "agents:\n  - {name: ada, model: {provider: scripted, echo: true}}\n"
	for _, tc := range []struct {
		src  string
		want config.ConversationsMode
		err  string
	}{
		{src: agent, want: config.ConversationsShared},
		{src: agent + "conversations: shared\n", want: config.ConversationsShared},
		{src: agent + "conversations: per-channel\n", want: config.ConversationsPerChannel},
		{src: agent + "conversations: per_channel\n", err: `c.yaml:3: conversations: "per_channel" is not a conversations mode; write shared or per-channel (did you mean per-channel?)`},
		{src: agent + "conversations: forks\n", err: `c.yaml:3: conversations: "forks" is not a conversations mode; write shared or per-channel`},
		{src: agent + "conversations:\n", err: `c.yaml:3: conversations: has no value; give shared or per-channel, or leave the key out`},
		{src: "conversations: per-channel\n", err: `c.yaml:1: conversations: per-channel gives each channel a fork of the primary agent, and the file configures no agent; add one under agents:, or leave conversations out`},
		{src: "conversations: shared\n", want: config.ConversationsShared},
	} {
		cfg, err := parse(t, tc.src, t.TempDir())
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: err = %v\nwant %s", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if cfg.Conversations != tc.want {
			t.Errorf("%q: Conversations %q, want %q", tc.src, cfg.Conversations, tc.want)
		}
	}
}

// TestPrimary: the primary is the first agent, whatever the others are
// called.
func TestPrimary(t *testing.T) {
	cfg, err := parse(t, "agents:\n  - {name: zed, model: {provider: scripted, echo: true}}\n  - {name: ada, model: {provider: scripted, echo: true}}\n", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := cfg.Primary(); !ok || p.Name != "zed" {
		t.Errorf("Primary = %q, %v; want zed", p.Name, ok)
	}
	if a, ok := cfg.Agent("ada"); !ok || a.Name != "ada" || !a.Model.Echo {
		t.Errorf("Agent(ada) = %+v, %v", a, ok)
	}
	if _, ok := cfg.Agent("Ada"); ok {
		t.Errorf("Agent(Ada) found: names are compared exactly")
	}
}

// TestInferenceRouting: routes are checked in order; server matches an
// id exactly or *, featureSet as a featureSets pattern does.
func TestInferenceRouting(t *testing.T) {
	cfg, err := config.Load("testdata/good/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		server, featureSet, want string
	}{
		{"memory", "memory.consolidation", "Claude-1"},
		{"memory", "memory.a.b", "Claude-1"},
		{"memory", "memory", "gpt"}, // memory.* covers names under memory. only
		{"chat", "memory.consolidation", "gpt"},
		{"memory", "summarization.light", "local"},
		{"chat", "summarization.light", "local"},
		{"chat", "summarization.lightx", "gpt"},
		{"Memory", "memory.x", "gpt"}, // ids compared exactly
	} {
		if got, ok := cfg.InferenceAgent(tc.server, tc.featureSet); !ok || got != tc.want {
			t.Errorf("InferenceAgent(%q, %q) = %q, %v; want %q", tc.server, tc.featureSet, got, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		route              config.InferenceRoute
		server, featureSet string
		want               bool
	}{
		{config.InferenceRoute{}, "s", "f", true},
		{config.InferenceRoute{Server: "s"}, "s", "f", true},
		{config.InferenceRoute{Server: "s"}, "t", "f", false},
		{config.InferenceRoute{FeatureSet: "a.*"}, "s", "a.b", true},
		{config.InferenceRoute{FeatureSet: "a.*"}, "s", "a", false},
		{config.InferenceRoute{FeatureSet: "a.*"}, "s", "ab.c", false},
		{config.InferenceRoute{FeatureSet: "a.b"}, "s", "a.b", true},
		{config.InferenceRoute{FeatureSet: "a.b"}, "s", "a.bc", false},
		{config.InferenceRoute{Server: "*", FeatureSet: "*"}, "", "", true},
	} {
		if got := tc.route.Matches(tc.server, tc.featureSet); got != tc.want {
			t.Errorf("%+v.Matches(%q, %q) = %v, want %v", tc.route, tc.server, tc.featureSet, got, tc.want)
		}
	}
	none := config.Config{Inference: []config.InferenceRoute{{Server: "chat", FeatureSet: "x", Agent: "a"}}}
	if got, ok := none.InferenceAgent("chat", "y"); ok {
		t.Errorf("InferenceAgent with no matching route = %q", got)
	}
}

// TestRouteProblems: a route's server and agent must be configured;
// suggestions name the nearest when there are few to choose from.
func TestRouteProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("servers:\n")
	for i := range 17 {
		fmt.Fprintf(&b, "  - {id: chat%d, command: [c]}\n", i)
	}
	b.WriteString("agents:\n  - {name: ada, model: {provider: scripted, echo: true}}\ninference:\n  - {server: chat1x, agent: Ada}\n")
	_, err := parse(t, b.String(), t.TempDir())
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		`c.yaml:22: inference[0].server: "chat1x" is not the id of a server in servers:`, // 17 servers: too many to suggest from
		`c.yaml:22: inference[0].agent: "Ada" is not the name of an agent in agents: (did you mean ada?)`,
	}
	var got []string
	for _, p := range cerr.Problems {
		got = append(got, p.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
