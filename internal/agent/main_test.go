package agent

import (
	"testing"

	"go.uber.org/goleak"
)

// The runtime's dispatcher, agents and tool calls are goroutines: none may
// outlive a test's Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
