package hostile

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

// Binary builds the hostile program once per test process and returns its
// path. The binary lives in a directory removed by Cleanup (call it from
// TestMain after the tests have run).
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpl-hostile-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "hostile")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/hostile")
		cmd.Dir = filepath.Dir(file)
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		tb.Fatalf("building the hostile server: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

// Cleanup removes the built binary, if any.
func Cleanup() {
	if buildPath != "" {
		os.RemoveAll(filepath.Dir(buildPath))
	}
}
