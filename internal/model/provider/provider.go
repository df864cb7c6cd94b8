// Package provider makes an agent's model from its configuration: the one
// place that knows every provider.
package provider

import (
	"fmt"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/anthropic"
	"github.com/mcpl-go/mcpl/internal/model/openai"
	"github.com/mcpl-go/mcpl/internal/model/scripted"
)

// New returns the model a configuration names. lookup reads the
// environment (the API key's variable, at each call); maxTokens is the
// agent's bound on a call's output.
func New(c config.ModelConfig, maxTokens int, lookup func(string) (string, bool)) (model.Model, error) {
	switch c.Provider {
	case config.ProviderScripted:
		if c.Echo {
			return scripted.Echo(), nil
		}
		s, err := scripted.Load(c.Script)
		if err != nil {
			return nil, err
		}
		return scripted.New(s), nil
	case config.ProviderAnthropic:
		return anthropic.New(anthropic.Options{Model: c.Model, APIKeyEnv: c.APIKeyEnv, LookupEnv: lookup, BaseURL: c.BaseURL, MaxTokens: maxTokens, ContextWindow: c.ContextWindow,
			StreamIdleTimeout: c.StreamIdleTimeout, RequestTimeout: c.RequestTimeout})
	case config.ProviderOpenAI:
		return openai.New(openai.Options{Model: c.Model, APIKeyEnv: c.APIKeyEnv, KeyOptional: c.KeyOptional, LookupEnv: lookup, BaseURL: c.BaseURL, MaxTokens: maxTokens, ContextWindow: c.ContextWindow,
			StreamIdleTimeout: c.StreamIdleTimeout, RequestTimeout: c.RequestTimeout})
	}
	return nil, fmt.Errorf("model provider %q is not one this host has (scripted, anthropic, openai)", c.Provider)
}
