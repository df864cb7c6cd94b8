package main

// Signals through `mcplhost run` (built without -race, run as a
// subprocess) with a real server (the hostile one, over stdio): SIGHUP
// and SIGQUIT stop it in order as SIGINT and SIGTERM do, an inherited
// ignored SIGHUP (nohup) stays ignored, and a kill -9 of the host leaves
// no server of its own running (the parent-death signal).

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/procs"
)

// startRunHostile starts `mcplhost run -v` on one hostile server with
// flags (through wrap, when given, which makes the command from mcplhost's
// argv), and waits for the server to be connected; it returns the host and
// the server's pids.
func startRunHostile(t *testing.T, wrap func(argv []string) *exec.Cmd, flags ...string) (*liveHost, hostile.Pids) {
	t.Helper()
	dir := t.TempDir()
	pf := pidfilePath(t, dir)
	argv := append(append([]string{hostile.Binary(t)}, flags...), "-pidfile", pf)
	cfg := writeHostConfig(t, dir, "command: "+yamlList(argv))
	args := []string{hostBinary(t), "run", "-v", "--config", cfg}
	var h *liveHost
	if wrap == nil {
		h = startCommand(t, exec.Command(args[0], args[1:]...))
	} else {
		h = startCommand(t, wrap(args))
	}
	pids := awaitPids(t, pf)
	h.awaitErr(`msg="a plain MCP server: tools work, MCPL is off" server=srv`)
	return h, pids
}

// TestRunSignalStops: each of SIGHUP, SIGQUIT, SIGINT and SIGTERM stops
// run in order: exit 128+N, the same last line on stderr naming the
// signal, the server's group (it and its grandchild) gone, and the server
// closed in order (its stdin closed; it exits at its end, so no signal
// was needed), not killed.
func TestRunSignalStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{
		{syscall.SIGHUP, "SIGHUP", 129},
		{syscall.SIGQUIT, "SIGQUIT", 131},
		{syscall.SIGINT, "SIGINT", 130},
		{syscall.SIGTERM, "SIGTERM", 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, pids := startRunHostile(t, nil, "-grandchild", "background")
			h.signal(tc.sig)
			code := h.wait(3 * grace)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, strings.Join(h.stderr, "\n"))
			}
			if n := len(h.stderr); n == 0 || h.stderr[n-1] != stoppedLine(tc.name) {
				t.Errorf("stderr:\n%s\nwant its last line %q", strings.Join(h.stderr, "\n"), stoppedLine(tc.name))
			}
			all := strings.Join(h.stderr, "\n")
			if strings.Contains(all, "goroutine ") || strings.Contains(all, "server process group killed") {
				t.Errorf("the stop was not in order; stderr:\n%s", all)
			}
			assertNoneLeft(t, pids)
		})
	}
}

// TestRunSecondHangupKills: a second SIGHUP while the first one's orderly
// stop waits on a stubborn server kills every server group at once, as a
// second SIGINT does: exit 129 well within the grace period, nothing left.
func TestRunSecondHangupKills(t *testing.T) {
	t.Parallel()
	h, pids := startRunHostile(t, nil, "-ignore-eof", "-ignore-term", "-grandchild", "background")
	secondSignalKills(t, h, pids, syscall.SIGHUP, 129)
}

// TestRunNohupIgnoresHangup: started with SIGHUP ignored (nohup, or a
// shell's trap "" HUP), run keeps ignoring it: after a SIGHUP, a SIGTERM
// is what stops it (the stop line names SIGTERM, so SIGHUP, sent first
// and delivered first, did nothing).
func TestRunNohupIgnoresHangup(t *testing.T) {
	t.Parallel()
	nohup := func(argv []string) *exec.Cmd {
		return exec.Command("sh", append([]string{"-c", `trap "" HUP; exec "$@"`, "sh"}, argv...)...)
	}
	h, pids := startRunHostile(t, nohup)
	h.signal(syscall.SIGHUP)
	h.signal(syscall.SIGTERM)
	code := h.wait(3 * grace)
	if code != 143 {
		t.Errorf("exit %d, want 143; stderr:\n%s", code, strings.Join(h.stderr, "\n"))
	}
	if n := len(h.stderr); n == 0 || h.stderr[n-1] != stoppedLine("SIGTERM") {
		t.Errorf("stderr:\n%s\nwant its last line %q", strings.Join(h.stderr, "\n"), stoppedLine("SIGTERM"))
	}
	assertNoneLeft(t, pids)
}

// TestRunKill9LeavesNoServer: a server that ignores the end of its stdin
// and SIGTERM is still gone after a kill -9 of its host, which could
// close nothing: the kernel sends it the parent-death signal (SIGKILL),
// so a host started again finds no instance of it from before. (What the
// server itself started is not covered; docs/limits.md says so.)
func TestRunKill9LeavesNoServer(t *testing.T) {
	t.Parallel()
	h, pids := startRunHostile(t, nil, "-ignore-eof", "-ignore-term")
	if !procs.Alive(pids.Pid) {
		t.Fatalf("the server %d is not running before the kill", pids.Pid)
	}
	h.signal(syscall.SIGKILL)
	if code := h.wait(waitFor); code != -1 {
		t.Fatalf("exit %d after SIGKILL, want killed", code)
	}
	// Another process's end has no event here: poll, with a wide bound.
	deadline := time.Now().Add(30 * time.Second)
	for len(procs.GroupMembers(pids.Pgid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the server's group %v outlived its host's kill -9 by 30 s", procs.GroupMembers(pids.Pgid))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
