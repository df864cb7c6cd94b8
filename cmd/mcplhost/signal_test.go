package main

// Acceptance C, signals: mcplhost (built without -race, run as a
// subprocess, as a user runs it) stopped by SIGINT, SIGTERM, a second
// SIGINT or a closed stdout ends with the status a shell expects, says so,
// and leaves no process its servers started.

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/hostile"
)

// startProbe starts `mcplhost probe` (with more probe flags) against the
// hostile server over stdio with flags, waits for the server's pidfile
// and for the report's header, and returns them.
func startProbe(t *testing.T, probeFlags []string, flags ...string) (*liveHost, hostile.Pids) {
	t.Helper()
	pf := pidfilePath(t, t.TempDir())
	args := append([]string{"probe", "--id", "srv"}, probeFlags...)
	args = append(append(args, "--", hostile.Binary(t)), flags...)
	h := startHost(t, append(args, "-pidfile", pf)...)
	pids := awaitPids(t, pf)
	h.awaitOut("tools (")
	return h, pids
}

// stoppedLine is what mcplhost says on stderr when a signal or a closed
// stdout stopped it.
func stoppedLine(why string) string {
	return "mcplhost: stopped (" + why + "); the servers it started are closed"
}

// TestFaultSignalStopsProbe: SIGINT and SIGTERM stop probe during --wait:
// exit 130 and 143, the stop said on stderr, the server's group (it and
// its grandchild) gone.
func TestFaultSignalStopsProbe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{
		{syscall.SIGINT, "SIGINT", 130},
		{syscall.SIGTERM, "SIGTERM", 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, pids := startProbe(t, []string{"--wait", "60s"}, "-grandchild", "background")
			sent := time.Now()
			h.signal(tc.sig)
			// The server exits at the end of its stdin; its grandchild
			// takes SIGTERM: well within one grace period.
			code := h.wait(2 * grace)
			t.Logf("%s: exit %d, %s after the signal", tc.name, code, h.ended.Sub(sent).Round(time.Millisecond))
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, strings.Join(h.stderr, "\n"))
			}
			if n := len(h.stderr); n == 0 || h.stderr[n-1] != stoppedLine(tc.name) {
				t.Errorf("stderr:\n%s\nwant its last line %q", strings.Join(h.stderr, "\n"), stoppedLine(tc.name))
			}
			assertNoneLeft(t, pids)
		})
	}
}

// TestFaultSignalStubbornServer: a server that ignores the end of its
// stdin and SIGTERM still ends after SIGINT: stdin closed, one grace
// period, SIGTERM to the group, another, SIGKILL. probe exits 130 within
// three grace periods, and nothing is left.
func TestFaultSignalStubbornServer(t *testing.T) {
	t.Parallel()
	h, pids := startProbe(t, []string{"--wait", "60s"}, "-ignore-eof", "-ignore-term", "-grandchild", "background")
	sent := time.Now()
	h.signal(syscall.SIGINT)
	code := h.wait(3*grace + time.Second)
	took := h.ended.Sub(sent)
	t.Logf("exit %d, %s after SIGINT", code, took.Round(time.Millisecond))
	if code != 130 {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, strings.Join(h.stderr, "\n"))
	}
	if took > 3*grace {
		t.Errorf("took %s after SIGINT, want within %s", took, 3*grace)
	}
	// The stop was in order: the server had its grace periods.
	if took < 2*grace-200*time.Millisecond {
		t.Errorf("took %s after SIGINT: the server cannot have had its two grace periods", took)
	}
	if n := len(h.stderr); n == 0 || h.stderr[n-1] != stoppedLine("SIGINT") {
		t.Errorf("stderr:\n%s\nwant its last line %q", strings.Join(h.stderr, "\n"), stoppedLine("SIGINT"))
	}
	assertNoneLeft(t, pids)
}

// TestFaultSecondSignalKillsAll: while the first SIGINT's orderly stop
// waits on a stubborn server (it has taken SIGTERM and ignored it), a
// second SIGINT kills every server group at once (transport.KillAll):
// probe exits 130 well within the grace period it would otherwise have
// waited, and nothing is left.
//
// The second signal is sent once the log says the stop is under way (the
// SIGTERM step): two signals sent back to back may reach the program as
// one, which would test nothing.
func TestFaultSecondSignalKillsAll(t *testing.T) {
	t.Parallel()
	h, pids := startProbe(t, []string{"-v", "--wait", "60s"}, "-ignore-eof", "-ignore-term", "-grandchild", "background")
	secondSignalKills(t, h, pids, syscall.SIGINT, 130)
}

// secondSignalKills sends h sig, then, once the log says its orderly
// stop is waiting on the stubborn server (the SIGTERM step), sig again:
// h must exit want well within the grace period, nothing of its servers
// left.
func secondSignalKills(t *testing.T, h *liveHost, pids hostile.Pids, sig syscall.Signal, want int) {
	t.Helper()
	h.signal(sig)
	h.awaitErr(`msg="server process did not exit; signalled" server=srv`)
	sent := time.Now()
	h.signal(sig)
	code := h.wait(grace + time.Second)
	took := h.ended.Sub(sent)
	t.Logf("exit %d, %s after the second %v", code, took.Round(time.Millisecond), sig)
	if code != want {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, want, strings.Join(h.stderr, "\n"))
	}
	if took > grace/2 {
		t.Errorf("took %s after the second %v, want well within the %s grace period", took, sig, grace)
	}
	awaitNoneLeft(t, pids, grace)
}

// TestFaultSignalStopsCall: SIGINT while `mcplhost call` waits on a server
// that stopped reading: the call fails as abandoned here, call exits 130,
// and nothing is left.
func TestFaultSignalStopsCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := pidfilePath(t, dir)
	argv := []string{hostile.Binary(t), "-stop-reading", "-at", "tools/list", "-count", "1", "-grandchild", "background", "-pidfile", pf}
	cfg := writeHostConfig(t, dir, "command: "+yamlList(argv))
	h := startHost(t, "call", "-v", "--config", cfg, "srv--echo", `{"text":"x"}`)
	pids := awaitPids(t, pf)
	h.awaitErr(`msg="tools listed" server=srv`)
	h.signal(syscall.SIGINT)
	code := h.wait(3*grace + time.Second)
	if code != 130 {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, strings.Join(h.stderr, "\n"))
	}
	out := strings.Join(h.stdout, "\n")
	if !strings.HasPrefix(out, `error: The request to the "srv" server was abandoned here before it`) {
		t.Errorf("stdout %q, want the call abandoned here", out)
	}
	if n := len(h.stderr); n == 0 || h.stderr[n-1] != stoppedLine("SIGINT") {
		t.Errorf("stderr:\n%s\nwant its last line %q", strings.Join(h.stderr, "\n"), stoppedLine("SIGINT"))
	}
	assertNoneLeft(t, pids)
}

// TestFaultClosedStdout: the reader of probe's stdout goes away after the
// first line, while probe has more to print (a 100 KB call result, more
// than a pipe holds): probe stops as if signalled, exits 141, and leaves
// nothing, rather than waiting out --wait or dying of SIGPIPE.
func TestFaultClosedStdout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := pidfilePath(t, dir)
	text := strings.Repeat("x", 100_000)
	cmd := exec.Command(hostBinary(t), "probe", "--id", "srv", "--wait", "60s", "--call", "echo", `{"text":"`+text+`"}`,
		"--", hostile.Binary(t), "-grandchild", "background", "-pidfile", pf)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	start := time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	first := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(r).ReadString('\n')
		first <- l
	}()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	select {
	case l := <-first:
		if !strings.HasPrefix(l, `server "srv": hostile`) {
			t.Errorf("first line %q, want the report's", l)
		}
	case <-timer.C:
		t.Fatalf("no line on stdout within %s", waitFor)
	}
	r.Close()
	select {
	case <-exited:
	case <-timer.C:
		t.Fatalf("probe did not exit within %s of its stdout closing; stderr:\n%s", waitFor, stderr.String())
	}
	t.Logf("exit %d after %s", cmd.ProcessState.ExitCode(), time.Since(start).Round(time.Millisecond))
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("probe was killed by %v, want it to stop in order", ws.Signal())
	}
	if code := cmd.ProcessState.ExitCode(); code != 141 {
		t.Errorf("exit %d, want 141; stderr:\n%s", code, stderr.String())
	}
	if !strings.HasSuffix(stderr.String(), stoppedLine("stdout was closed")+"\n") {
		t.Errorf("stderr:\n%s\nwant it to end %q", stderr.String(), stoppedLine("stdout was closed"))
	}
	assertNoneLeft(t, readPids(t, filepath.Join(dir, "pids.json")))
}
