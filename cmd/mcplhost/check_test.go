package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCheck runs `mcplhost check` on good and bad files and pins its exit
// status and its whole output.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// check looks for each command's program: sh is in every PATH.
	good := write("good.yaml", "servers:\n  - id: a\n    command: [sh]\n  - id: b\n    url: ws://localhost:1/\n")
	one := write("one.yaml", "servers:\n  - id: a\n    command: [sh]\n")
	none := write("none.yaml", "servers: []\n")
	agents := write("agents.yaml", "agents:\n  - name: ada\n    model: {provider: scripted, echo: true}\n"+
		"    wake:\n      rules: [{channel: support, tagsAny: [chat:ambient], treat: wake}]\n"+
		"  - name: bo\n    model: {provider: scripted, echo: true}\n    wake: {debounce: 0s}\n")
	defaults := "  default 1: tagsAny chat:addressed → wake\n" +
		"  default 2: tagsNone *, source push → wake\n" +
		"  default 3: tagsAny chat:ambient → batch\n" +
		"  default 4: anything → wake\n"
	bad := write("bad.yaml", "servers:\n  - id: chat\n    comand: [go]\n    reconnect: {initial: 5 seconds}\n")
	badOne := write("bad1.yaml", "stor: x\nservers: []\n")
	example := filepath.Join("..", "..", "examples", "config", "host.yaml")
	missing := filepath.Join(dir, "missing.yaml")

	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // stderr "" means none; "~x" means contains x
	}{
		{"good", []string{"--config", good}, exitOK, "config " + good + ": ok (2 servers)\n", ""},
		{"one dash", []string{"-config", one}, exitOK, "config " + one + ": ok (1 server)\n", ""},
		{"equals", []string{"--config=" + none}, exitOK, "config " + none + ": ok (0 servers)\n", ""},
		{"example", []string{"--config", example}, exitOK, "config " + example + ": ok (1 server)\n", ""},
		{"agents' wake rules", []string{"--config", agents}, exitOK, "config " + agents + ": ok (0 servers)\n" +
			"agent ada wakes by these rules, first match wins:\n" +
			"  debounce 1.5s, a turn at most 5s after the first message that wakes it\n" +
			"  rule 1: tagsAny chat:ambient, channel support → wake\n" + defaults +
			"agent bo wakes by these rules, first match wins:\n" +
			"  no debounce: a message that wakes the agent starts a turn at once\n" + defaults, ""},
		{"bad", []string{"--config", bad}, exitUsage, "",
			bad + ":2: servers[0]: has neither command nor url; give command: [program, args...] to run the server, or url: ws://host:port/path to dial it\n" +
				bad + ":3: servers[0].comand: unknown key (did you mean command?)\n" +
				bad + ":4: servers[0].reconnect.initial: \"5 seconds\" is not a duration (write it like 5s or 2m30s)\n" +
				"config " + bad + ": 3 problems\n"},
		{"bad, one problem", []string{"--config", badOne}, exitUsage, "",
			badOne + ":1: stor: unknown key (did you mean store?)\nconfig " + badOne + ": 1 problem\n"},
		{"missing file", []string{"--config", missing}, exitUsage, "", "mcplhost check: open " + missing + ": no such file or directory\n"},
		{"no flag", nil, exitUsage, "", "~mcplhost check: give the file with --config FILE\n\nusage: mcplhost check --config FILE\n"},
		{"no value", []string{"--config"}, exitUsage, "", "~mcplhost check: --config needs a file\n"},
		{"unknown flag", []string{"--conf", good}, exitUsage, "", "~mcplhost check: unknown flag --conf\n"},
		{"positional", []string{good}, exitUsage, "", "~mcplhost check: unexpected argument \"" + good + "\": give the file with --config FILE\n"},
		{"extra argument", []string{"--config", good, "x"}, exitUsage, "", "~unexpected argument \"x\""},
		{"help", []string{"-h"}, exitOK, checkUsage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCheck(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstderr:\n%s", code, tc.code, stderr.String())
			}
			if stdout.String() != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), tc.stdout)
			}
			if want, ok := strings.CutPrefix(tc.stderr, "~"); ok {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr:\n%s\nwant it to contain:\n%s", stderr.String(), want)
				}
			} else if stderr.String() != tc.stderr {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), tc.stderr)
			}
		})
	}
}

// TestCheckFIFO: a named pipe given as the config, with no one writing to
// it, is refused at once by check and by run (exit 2 for both, a
// configuration error), never waited on: opening one to read would block
// until a writer came. The mcplhost binary runs each under a 60 s
// deadline, so a regression fails here instead of hanging the suite.
func TestCheckFIFO(t *testing.T) {
	bin := hostBinary(t)
	fifo := filepath.Join(t.TempDir(), "host.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  string
		code int
	}{{"check", exitUsage}, {"run", exitUsage}} {
		t.Run(tc.cmd, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, tc.cmd, "--config", fifo)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("mcplhost %s --config FIFO still running after 60s: it waited on the pipe", tc.cmd)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("mcplhost %s: %v, want exit %d\nstderr:\n%s", tc.cmd, err, tc.code, stderr.String())
			}
			want := "mcplhost " + tc.cmd + ": read " + fifo + ": is a named pipe (FIFO), not a regular file; give the path of a YAML config file\n"
			if stderr.String() != want || stdout.Len() != 0 {
				t.Errorf("stdout %q\nstderr %q\nwant stderr %q", stdout.String(), stderr.String(), want)
			}
		})
	}
}
