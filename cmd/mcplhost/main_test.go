package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/testbin"
	"github.com/mcpl-go/mcpl/internal/testserver"
)

// leakCheckedM runs the tests, then removes the built test server and
// checks that no goroutine outlived them.
type leakCheckedM struct{ m *testing.M }

func (l leakCheckedM) Run() int {
	code := l.m.Run()
	testserver.Cleanup()
	chanserver.Cleanup()
	testbin.Chatroom.Cleanup()
	faultCleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// copyScriptHelpers puts the shell helpers the scripts share
// (testdata/sh: bg.sh, waitfor.sh, sig.sh, gone.sh, each saying how it is
// used) into a script's work directory.
func copyScriptHelpers(dir string) error {
	helpers, err := filepath.Glob("testdata/sh/*.sh")
	if err != nil {
		return err
	}
	for _, h := range helpers {
		b, err := os.ReadFile(h)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(h)), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func TestMain(m *testing.M) {
	os.Exit(testscript.RunMain(leakCheckedM{m}, map[string]func() int{
		"mcplhost": func() int { return mainCode(os.Args[1:], os.Stdout, os.Stderr) },
	}))
}

// TestScripts runs the command-line scripts in testdata/script: each runs
// mcplhost against the real test server and compares what it prints.
func TestScripts(t *testing.T) {
	bin, chans, room := testserver.Binary(t), chanserver.Binary(t), buildChatroom(t)
	cliDoc, err := filepath.Abs("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(e *testscript.Env) error {
			e.Setenv("TESTSERVER", bin)
			e.Setenv("CHANSERVER", chans)
			e.Setenv("CHATROOM", room) // examples/chatroom: people who post on a script
			e.Setenv("CLIDOC", cliDoc) // docs/cli.md, whose tables cli_doc.txtar pins
			return copyScriptHelpers(e.WorkDir)
		},
	})
}
