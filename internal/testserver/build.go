package testserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

// Binary builds the test server program once per test process and returns
// its path. The binary lives in a directory removed by Cleanup (call it from
// TestMain after the tests have run).
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpl-testserver-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "testserver")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/testserver")
		cmd.Dir = filepath.Dir(file)
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		tb.Fatalf("building the test server: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

// Cleanup removes the built binary, if any.
func Cleanup() {
	if buildPath != "" {
		os.RemoveAll(filepath.Dir(buildPath))
	}
}
