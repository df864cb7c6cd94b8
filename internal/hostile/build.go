package hostile

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/mcpl-go/mcpl/internal/testbin"
)

var program = func() *testbin.Program {
	_, file, _, _ := runtime.Caller(0)
	return &testbin.Program{Dir: filepath.Dir(file), Pkg: "./cmd/hostile", Name: "hostile"}
}()

// Binary builds the hostile program once per test process and returns its
// path. The binary lives in a directory removed by Cleanup (call it from
// TestMain after the tests have run).
func Binary(tb testing.TB) string { return program.Path(tb) }

// Cleanup removes the built binary, if any.
func Cleanup() { program.Cleanup() }
