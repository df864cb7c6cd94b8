package fakeapi_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test left a goroutine behind: a server's
// handler, or a provider's connection to a closed server.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
