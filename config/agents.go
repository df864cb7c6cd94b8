package config

import (
	"strings"
	"time"
)

// Agent defaults.
const (
	DefaultMaxTokens       = 1024
	DefaultAnthropicKeyEnv = "ANTHROPIC_API_KEY"
	DefaultOpenAIKeyEnv    = "OPENAI_API_KEY"
)

// Model providers, the values of ModelConfig.Provider.
const (
	// ProviderScripted plays a script file's steps, or echoes (see
	// docs/scripted-model.md): deterministic, for tests, demos and
	// offline use.
	ProviderScripted = "scripted"
	// ProviderAnthropic is Anthropic's Messages API.
	ProviderAnthropic = "anthropic"
	// ProviderOpenAI is OpenAI's Chat Completions API, or any endpoint
	// that speaks it (llama.cpp, vLLM, Ollama) at BaseURL.
	ProviderOpenAI = "openai"
)

// Agent is one agent's entry: a model the host thinks with, and what the
// agent may do.
type Agent struct {
	// Name is the agent's name: 1 to 64 letters, digits, "_" and "-",
	// unique in the file (compared exactly).
	Name  string
	Model ModelConfig
	// System is the system prompt; "" for none.
	System string
	// AllowedTools says which tools the agent is offered and may call.
	AllowedTools AllowedTools
	// MaxTokens bounds each model call's output; 0 means
	// DefaultMaxTokens.
	MaxTokens int
	// Wake is what wakes the agent, and its debounce (wake.go).
	Wake Wake
}

// ModelConfig says which model an agent thinks with. Provider selects
// the fields that apply: Script or Echo for ProviderScripted; Model,
// APIKeyEnv, BaseURL and ContextWindow for ProviderAnthropic and
// ProviderOpenAI; KeyOptional for ProviderOpenAI only.
type ModelConfig struct {
	Provider string

	// Script is the absolute path of the script file whose steps a
	// scripted model plays; empty when Echo is set.
	Script string
	// Echo makes a scripted model answer each addressed message by
	// repeating its text.
	Echo bool

	// Model is the provider's name for the model, like
	// claude-sonnet-4-5 or gpt-4.1.
	Model string
	// APIKeyEnv names the environment variable holding the API key. The
	// provider reads it at each call; the key is never stored. It
	// defaults to DefaultAnthropicKeyEnv or DefaultOpenAIKeyEnv.
	APIKeyEnv string
	// KeyOptional (openai) sends requests without a key when the
	// variable is unset or empty, for a local server that needs none.
	KeyOptional bool
	// BaseURL is the API's http:// or https:// base URL; "" for the
	// provider's own.
	BaseURL string
	// ContextWindow is the model's context window in tokens, as model/info
	// reports it; 0 when unknown.
	ContextWindow int

	// Temperature and TopP are sent with every call when set
	// (modelcalls.go).
	Temperature, TopP *float64
	// StreamIdleTimeout and RequestTimeout bound one attempt: no byte
	// from the provider for StreamIdleTimeout, or the whole call past
	// RequestTimeout, ends it; 0 is the default.
	StreamIdleTimeout, RequestTimeout time.Duration
	// Retry is how a call that failed and may succeed later is tried
	// again.
	Retry Retry
}

// AllowedTools says which tools an agent may use, by the names the agent
// sees them under (channel_open, chat--send_message). All, or a nil
// Patterns, allows every tool; otherwise Patterns, even empty, is an
// allowlist, where * matches any run of characters.
type AllowedTools struct {
	All      bool
	Patterns []string
}

// Allows reports whether the tool named name is allowed: always when All
// is set or Patterns is nil, else when a pattern matches it as
// ToolPolicy's do (* matches any run of characters, including none;
// case-sensitive).
func (t AllowedTools) Allows(name string) bool {
	if t.All || t.Patterns == nil {
		return true
	}
	for _, p := range t.Patterns {
		if globMatch(p, name) {
			return true
		}
	}
	return false
}

// AllowsTool reports whether the agent may use the tool the agent sees as
// name (AllowedTools.Allows). A tool it may not use is neither offered to
// it nor callable by it.
func (a Agent) AllowsTool(name string) bool {
	return a.AllowedTools.Allows(name)
}

// WithDefaults returns a with every default applied: the one place they
// are, for an agent from a file and one configured in code alike.
// MaxTokens 0 becomes DefaultMaxTokens; AllowedTools with neither All nor
// Patterns becomes All; Model gets ModelConfig.WithDefaults; Wake gets
// Wake.WithDefaults.
func (a Agent) WithDefaults() Agent {
	a.Wake = a.Wake.WithDefaults()
	if a.MaxTokens == 0 {
		a.MaxTokens = DefaultMaxTokens
	}
	if !a.AllowedTools.All && a.AllowedTools.Patterns == nil {
		a.AllowedTools.All = true
	}
	a.Model = a.Model.WithDefaults()
	return a
}

// WithDefaults returns m with its provider's defaults: an empty APIKeyEnv
// becomes DefaultAnthropicKeyEnv or DefaultOpenAIKeyEnv. A scripted or
// unknown provider has none.
func (m ModelConfig) WithDefaults() ModelConfig {
	if m.APIKeyEnv == "" {
		switch m.Provider {
		case ProviderAnthropic:
			m.APIKeyEnv = DefaultAnthropicKeyEnv
		case ProviderOpenAI:
			m.APIKeyEnv = DefaultOpenAIKeyEnv
		}
	}
	return m
}

// ConversationsMode says how channel traffic is split into conversations.
type ConversationsMode string

// Conversations modes.
const (
	// ConversationsShared: every channel's traffic goes to the configured
	// agents, each keeping one conversation across channels.
	ConversationsShared ConversationsMode = "shared"
	// ConversationsPerChannel: each channel gets its own agent, a fork of
	// the primary bound to that channel as its home, with the primary's
	// model and system prompt.
	ConversationsPerChannel ConversationsMode = "per-channel"
)

// InferenceRoute sends server-initiated inference (inference/request,
// SPEC §11) from matching servers and feature sets to an agent's model.
type InferenceRoute struct {
	// Server is a server's id, or "*" for any.
	Server string
	// FeatureSet is a feature-set name, "*" for any, or a name ending in
	// ".*" for every set under it (memory.*), as in featureSets.
	FeatureSet string
	// Agent names the agent whose model serves the request.
	Agent string
}

// WithDefaults returns r with an empty Server or FeatureSet made "*".
func (r InferenceRoute) WithDefaults() InferenceRoute {
	if r.Server == "" {
		r.Server = "*"
	}
	if r.FeatureSet == "" {
		r.FeatureSet = "*"
	}
	return r
}

// Matches reports whether the route covers an inference/request from the
// server with id serverID for featureSet. Server matches "*" or the id
// exactly; FeatureSet matches as a featureSets pattern does ("*", the
// name, or "prefix.*" for names under prefix). An empty Server or
// FeatureSet matches as "*" does.
func (r InferenceRoute) Matches(serverID, featureSet string) bool {
	r = r.WithDefaults()
	if r.Server != "*" && r.Server != serverID {
		return false
	}
	p := r.FeatureSet
	switch {
	case p == "*", p == featureSet:
		return true
	case strings.HasSuffix(p, ".*"):
		return strings.HasPrefix(featureSet, strings.TrimSuffix(p, "*"))
	}
	return false
}

// InferenceAgent returns the name of the agent that serves an
// inference/request from the server serverID for featureSet: the agent
// of the first route in Inference that matches, and false when none
// does (the request is then refused).
func (c Config) InferenceAgent(serverID, featureSet string) (string, bool) {
	for _, r := range c.Inference {
		if r.Matches(serverID, featureSet) {
			return r.Agent, true
		}
	}
	return "", false
}

// Primary returns the primary agent, Agents[0], and false when there are
// no agents. The primary is told, by name, of what the agent a notice is
// about can't act on, and is the template of ConversationsPerChannel's
// forks.
func (c Config) Primary() (Agent, bool) {
	if len(c.Agents) == 0 {
		return Agent{}, false
	}
	return c.Agents[0], true
}

// Agent returns the agent named name, and false when there is none.
func (c Config) Agent(name string) (Agent, bool) {
	for _, a := range c.Agents {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}
