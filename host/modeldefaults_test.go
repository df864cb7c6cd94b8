package host_test

import (
	"testing"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/model/anthropic"
	"github.com/mcpl-go/mcpl/internal/model/openai"
)

// The defaults of a model's calls are written down three times: in config
// (what docs/config.md and host.TurnDeadline read), in the agent layer
// (its RetryPolicy's zero value) and in each provider (its Options' zero
// values). They must agree.
func TestModelCallDefaultsAgree(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"retry attempts", agent.DefaultRetryAttempts, config.DefaultRetryAttempts},
		{"retry maxElapsed", agent.DefaultRetryMaxElapsed, config.DefaultRetryMaxElapsed},
		{"anthropic streamIdleTimeout", anthropic.DefaultStreamIdleTimeout, config.DefaultStreamIdleTimeout},
		{"openai streamIdleTimeout", openai.DefaultStreamIdleTimeout, config.DefaultStreamIdleTimeout},
		{"anthropic requestTimeout", anthropic.DefaultRequestTimeout, config.DefaultModelRequestTimeout},
		{"openai requestTimeout", openai.DefaultRequestTimeout, config.DefaultModelRequestTimeout},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, but config says %v", c.name, c.got, c.want)
		}
	}
}
