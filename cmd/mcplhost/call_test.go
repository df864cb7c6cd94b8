package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpl-go/mcpl/internal/testserver"
)

// writeConfig writes a host configuration whose servers run the test
// server, and returns its path. Each server is "- id: ..." YAML with
// TESTSERVER standing for the binary's path.
func writeConfig(t *testing.T, servers string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "host.yaml")
	body := "servers:\n" + strings.ReplaceAll(servers, "TESTSERVER", testserver.Binary(t))
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCall(t *testing.T) {
	cfg := writeConfig(t, `
  - id: chat
    command: [TESTSERVER]
    tools: {disable: [fail]}
  - id: broken
    command: [/nonexistent/server]
`)
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
	}{
		{"a call that works", []string{"chat--echo", `{"text":"via the host"}`}, exitOK, "ok\nvia the host\n"},
		{"a tool the policy denies", []string{"chat--fail", `{}`}, exitFail,
			"error: chat--fail isn't allowed by this host's policy for the \"chat\" server, so the call didn't run, and calling it again won't change that. If you need it, ask whoever runs this host.\n"},
		{"an error result without words", []string{"chat--tool_error", `{"text":" "}`}, exitFail,
			"error: The \"chat\" server reported an error for chat--tool_error without saying what went wrong. Whether it did anything is unknown: check before calling it again.\n"},
		{"a server whose connect failed", []string{"broken--anything", `{}`}, exitFail,
			"error: The \"broken\" server that provides broken--anything isn't connected, and this host won't reconnect to it on its own, so the call didn't run. If you need it, ask whoever runs this host.\n"},
		{"no such tool", []string{"nobody--x", `{}`}, exitFail,
			"error: This host has no tool named nobody--x, so the call didn't run. Call one of the tools this host lists.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"call", "--config", cfg}, tc.args...)...)
			if code != tc.wantCode || stdout != tc.wantStdout {
				t.Fatalf("exit %d, stdout %q; want exit %d, stdout %q\nstderr:\n%s", code, stdout, tc.wantCode, tc.wantStdout, stderr)
			}
		})
	}
}

func TestCallWhileConnecting(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "hold")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, `
  - id: slow
    command: [TESTSERVER, -hold-initialize, `+fifo+`]
`)
	// The initialize answer is never released: shutting down stops the
	// held server (its stop escalates to SIGTERM).
	code, stdout, stderr := runCLI("call", "--config", cfg, "--wait", "0", "slow--echo", `{"text":"x"}`)
	want := "error: This host is connecting to the \"slow\" server that provides slow--echo, so the call didn't run. Try again in a moment.\n"
	if code != exitFail || stdout != want {
		t.Fatalf("exit %d, stdout %q; want exit 1, %q\nstderr:\n%s", code, stdout, want, stderr)
	}
}

func TestCallUsage(t *testing.T) {
	good := writeConfig(t, `
  - id: chat
    command: [TESTSERVER]
`)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("servers:\n  - id: x\n    comand: [a]\n"), 0o600)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no config", []string{"call", "chat--echo", "{}"}, "--config FILE is required"},
		{"no tool", []string{"call", "--config", good}, "give the tool and its JSON arguments"},
		{"bad json", []string{"call", "--config", good, "chat--echo", "{"}, "the arguments are not valid JSON"},
		{"bad wait", []string{"call", "--config", good, "--wait", "soon", "chat--echo", "{}"}, `--wait "soon" is not a duration`},
		{"bad config", []string{"call", "--config", bad, "chat--echo", "{}"}, "servers[0].comand: unknown key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, tc.stderr)
			}
		})
	}
}
