package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test left a goroutine behind: a session's
// watcher, a connection's reader, the server's OnConnect or a tool call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
