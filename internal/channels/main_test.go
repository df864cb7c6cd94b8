package channels

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The registry's lanes and reply opens are goroutines: none may outlive a
// test's Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeReplayFile()
		os.Exit(code)
	}))
}
