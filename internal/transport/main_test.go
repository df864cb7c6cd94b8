package transport_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
)

// TestMain removes the built test server and then checks that no test left
// a goroutine behind (a Process's wait goroutine, a WebSocket's pinger, a
// server handler).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testserver.Cleanup()
		hostile.Cleanup()
		os.Exit(code)
	}))
}

// The helpers shared with the tests inside the package.
var (
	discardLogger = transport.DiscardLogger
	readWithin    = transport.ReadWithin
	readUntilErr  = transport.ReadUntilErr
	testCtx       = transport.TestCtx
	tooLarge      = transport.IsTooLarge
)

const testTimeout = transport.TestTimeout

type logRecorder = transport.LogRecorder
