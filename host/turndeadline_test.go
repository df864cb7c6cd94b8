package host_test

import (
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
)

// The turn deadline is the model's requestTimeout × retry attempts, the
// defaults filled in, and never under 15 minutes.
func TestTurnDeadline(t *testing.T) {
	for _, tc := range []struct {
		m    config.ModelConfig
		want time.Duration
	}{
		{config.ModelConfig{}, 40 * time.Minute},
		{config.ModelConfig{RequestTimeout: 30 * time.Minute, Retry: config.Retry{Attempts: 2}}, time.Hour},
		{config.ModelConfig{RequestTimeout: time.Minute, Retry: config.Retry{Attempts: 1}}, host.MinTurnDeadline},
		{config.ModelConfig{Retry: config.Retry{Attempts: 1}}, 15 * time.Minute},
	} {
		if got := host.TurnDeadline(tc.m); got != tc.want {
			t.Errorf("TurnDeadline(requestTimeout %v, attempts %d) = %v, want %v", tc.m.RequestTimeout, tc.m.Retry.Attempts, got, tc.want)
		}
	}
}
