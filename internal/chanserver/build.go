package chanserver

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/mcpl-go/mcpl/internal/testbin"
)

var program = func() *testbin.Program {
	_, file, _, _ := runtime.Caller(0)
	return &testbin.Program{Dir: filepath.Dir(file), Pkg: "./cmd/chanserver", Name: "chanserver"}
}()

// Binary builds the channel server once per test process and returns its
// path. Cleanup removes it (call it from TestMain after the tests).
func Binary(tb testing.TB) string { return program.Path(tb) }

// Cleanup removes the built binary, if any.
func Cleanup() { program.Cleanup() }
