package chanserver_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/chanserver"
)

// TestMain removes the built server, then fails the run if a test left a
// goroutine behind: a served connection's, or one of the server's own
// waits.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		chanserver.Cleanup()
		os.Exit(code)
	}))
}
