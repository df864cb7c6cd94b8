// Package testbin builds a program of this module once per test process,
// for tests that run it as a real subprocess (the test server, the hostile
// server, mcplhost itself).
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Program is one program to build: go build -o DIR/Name ./Pkg, run in Dir.
type Program struct {
	Dir  string // the directory go build runs in
	Pkg  string // the package to build, relative to Dir ("./cmd/hostile")
	Name string // the binary's name
	// Flags go to go build before -o (such as "-race"); nil for none.
	Flags []string

	once sync.Once
	path string
	err  error
	out  []byte
}

// Path builds the program the first time it is asked for and returns the
// binary's path; a failed build fails tb. The binary lives in a directory
// Cleanup removes (call it from TestMain after the tests have run).
func (p *Program) Path(tb testing.TB) string {
	tb.Helper()
	p.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcpl-"+p.Name+"-")
		if err != nil {
			p.err = err
			return
		}
		p.path = filepath.Join(dir, p.Name)
		args := append(append([]string{"build"}, p.Flags...), "-o", p.path, p.Pkg)
		cmd := exec.Command("go", args...)
		cmd.Dir = p.Dir
		p.out, p.err = cmd.CombinedOutput()
	})
	if p.err != nil {
		tb.Fatalf("building %s: %v\n%s", p.Name, p.err, p.out)
	}
	return p.path
}

// Cleanup removes the built binary, if any.
func (p *Program) Cleanup() {
	if p.path != "" {
		os.RemoveAll(filepath.Dir(p.path))
	}
}

// Chatroom is examples/chatroom, the simulated chat platform the demo and
// many end-to-end tests run as a real server.
var Chatroom = func() *Program {
	_, file, _, _ := runtime.Caller(0)
	return &Program{Dir: filepath.Join(filepath.Dir(file), "..", ".."), Pkg: "./examples/chatroom", Name: "chatroom"}
}()
