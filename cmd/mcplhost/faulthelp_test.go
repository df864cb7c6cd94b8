package main

// Helpers for the fault suite (fault_test.go, fault_ws_test.go,
// signal_test.go): mcplhost run against the hostile server
// (internal/hostile), as a subprocess built without -race (so that its peak
// RSS means something) or in this process (so that TestMain's goleak check
// covers it), with what it leaves behind checked by process group.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/procs"
)

// Bounds the fault suite states.
const (
	// maxRSSKiB bounds the peak RSS of a non-race mcplhost in the memory
	// cases (the acceptance's 300 MB).
	maxRSSKiB = 300 * 1000
	// defaultRSSKiB bounds every other case's peak RSS.
	defaultRSSKiB = 200 * 1000
	// grace is transport.StdioOptions.StopWait's default: each step of a
	// server's close ladder (stdin EOF, SIGTERM, SIGKILL) waits this long.
	grace = 2 * time.Second
	// waitFor bounds the wait for something that should happen soon (a
	// pidfile, a report line).
	waitFor = 15 * time.Second
)

// faultBuild is the non-race mcplhost, built once per test process.
var faultBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// hostBinary builds mcplhost without -race once per test process and
// returns its path: its peak RSS is the program's, not the race detector's.
// The binary's directory is removed by faultCleanup.
func hostBinary(tb testing.TB) string {
	tb.Helper()
	faultBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcplhost-fault-")
		if err != nil {
			faultBuild.err = err
			return
		}
		faultBuild.dir = dir
		faultBuild.path = filepath.Join(dir, "mcplhost")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", faultBuild.path, ".")
		cmd.Dir = filepath.Dir(file)
		faultBuild.out, faultBuild.err = cmd.CombinedOutput()
	})
	if faultBuild.err != nil {
		tb.Fatalf("building mcplhost without -race: %v\n%s", faultBuild.err, faultBuild.out)
	}
	return faultBuild.path
}

// faultCleanup removes what the fault suite built: the non-race mcplhost
// and the hostile server. TestMain should call it after the tests, next to
// testserver.Cleanup (main_test.go is not the fault suite's to edit).
func faultCleanup() {
	if faultBuild.dir != "" {
		os.RemoveAll(faultBuild.dir)
	}
	hostile.Cleanup()
}

// hostRun is how one run of mcplhost went.
type hostRun struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
	// rssKiB is the peak RSS the wrapper measured (subprocess runs only;
	// 0 in-process). It is never below the wrapper's own RSS when it
	// started mcplhost, about 26 MB for a -race test binary: see
	// rssWrapperEnv.
	rssKiB int64
}

func (r hostRun) String() string {
	return fmt.Sprintf("exit %d after %s (peak RSS %d KiB)\nstdout:\n%s\nstderr:\n%s",
		r.code, r.elapsed.Round(time.Millisecond), r.rssKiB, clip(r.stdout), clip(r.stderr))
}

// clip keeps a failure message readable when a run printed megabytes.
func clip(s string) string {
	const max = 4000
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("\n... (%d bytes more)", len(s)-max)
}

// faultCase is one row of the fault table.
type faultCase struct {
	name string
	// transports the case runs over: "stdio" (the server is a subprocess
	// mcplhost starts) and "ws" (hostile.StartWS).
	transports []string
	cmd        string   // "probe" or "call"
	server     []string // hostile flags; $DIR is the run's directory
	// prepare, if set, returns more hostile flags (a second server's URL).
	prepare func(t *testing.T, dir string) []string
	args    []string // probe: its flags; call: TOOL JSON (default srv--echo {"text":"fault"})
	config  []string // call: more YAML lines for the server
	env     []string // added to a subprocess's environment (such a case runs only as one)
	code    int
	within  time.Duration
	rssKiB  int64 // peak RSS bound; 0 means defaultRSSKiB
	stdout  []string
	stderr  []string
	// inProcess runs the case in this process too (race-built, leak-checked).
	inProcess bool
	check     func(t *testing.T, dir string, r hostRun)
}

var bothTransports = []string{"stdio", "ws"}

// maxConcurrentRuns bounds the runs under way at once. go test runs only
// GOMAXPROCS parallel tests at a time, and most runs here wait (on a
// deadline, a grace period), so the runner runs them in goroutines of its
// own; this keeps the CPU-heavy ones (floods) from crowding two cores.
const maxConcurrentRuns = 8

// runSlots holds a slot for each run under way, across the tests.
var runSlots = make(chan struct{}, maxConcurrentRuns)

// faultRun is one run of a case: over one transport, as a subprocess or in
// this process.
type faultRun struct {
	name    string
	c       faultCase
	inProc  bool
	dir     string
	pidfile string // stdio only
	args    []string
	done    chan struct{}
	r       hostRun
	err     error
}

// runFaultCases runs every case over each of its transports, as a
// subprocess and (when the case says) in this process. Each run is set up
// in the test's goroutine, then all of them run concurrently, and each is
// checked in a subtest of its own.
func runFaultCases(t *testing.T, cases []faultCase) {
	bin := hostBinary(t)
	var runs []*faultRun
	for _, c := range cases {
		for _, tr := range c.transports {
			modes := []bool{false}
			if c.inProcess && len(c.env) == 0 {
				modes = append(modes, true)
			}
			for _, inProc := range modes {
				name := c.name + "/" + tr + "/subprocess"
				if inProc {
					name = c.name + "/" + tr + "/in-process"
				}
				fr := &faultRun{name: name, c: c, inProc: inProc, done: make(chan struct{})}
				fr.setup(t, tr)
				runs = append(runs, fr)
			}
		}
	}
	for _, fr := range runs {
		go func() {
			defer close(fr.done)
			runSlots <- struct{}{}
			defer func() { <-runSlots }()
			if fr.inProc {
				fr.r = runInProcess(fr.args...)
			} else {
				fr.r, fr.err = runHost(bin, fr.c.within+10*time.Second, fr.c.env, fr.args...)
			}
		}()
	}
	for _, fr := range runs {
		t.Run(fr.name, func(t *testing.T) {
			<-fr.done
			fr.check(t)
		})
	}
	for _, fr := range runs {
		<-fr.done // runs -run left out, before their servers are cleaned up
	}
}

// setup makes the run's directory, its server (a WebSocket one started
// now; a stdio one is mcplhost's to start) and its command line.
func (fr *faultRun) setup(t *testing.T, transport string) {
	c := fr.c
	fr.dir = t.TempDir()
	flags := make([]string, 0, len(c.server))
	for _, f := range c.server {
		flags = append(flags, strings.ReplaceAll(f, "$DIR", fr.dir))
	}
	if c.prepare != nil {
		flags = append(flags, c.prepare(t, fr.dir)...)
	}
	var url string
	var argv []string
	switch transport {
	case "stdio":
		fr.pidfile = pidfilePath(t, fr.dir)
		argv = append(append([]string{hostile.Binary(t)}, flags...), "-pidfile", fr.pidfile)
	case "ws":
		url = hostile.StartWS(t, flags...)
	default:
		t.Fatalf("unknown transport %q", transport)
	}
	switch c.cmd {
	case "probe":
		fr.args = append([]string{"probe", "--id", "srv"}, c.args...)
		if url != "" {
			fr.args = append(fr.args, "--url", url)
		} else {
			fr.args = append(append(fr.args, "--"), argv...)
		}
	case "call":
		where := "url: " + url
		if url == "" {
			where = "command: " + yamlList(argv)
		}
		cfg := writeHostConfig(t, fr.dir, append([]string{where}, c.config...)...)
		call := c.args
		if call == nil {
			call = []string{"srv--echo", `{"text":"fault"}`}
		}
		fr.args = append([]string{"call", "--config", cfg}, call...)
	default:
		t.Fatalf("unknown command %q", c.cmd)
	}
}

// check checks what the run did against its case.
func (fr *faultRun) check(t *testing.T) {
	c, r := fr.c, fr.r
	if fr.err != nil {
		t.Error(fr.err)
	}
	mode := "subprocess"
	if fr.inProc {
		mode = "in-process"
	}
	t.Logf("%s %s: exit %d in %s, peak RSS %d KiB", c.cmd, mode, r.code, r.elapsed.Round(time.Millisecond), r.rssKiB)
	if r.code != c.code {
		t.Errorf("exit %d, want %d", r.code, c.code)
	}
	if r.elapsed > c.within {
		t.Errorf("took %s, want it within %s", r.elapsed.Round(time.Millisecond), c.within)
	}
	bound := c.rssKiB
	if bound == 0 {
		bound = defaultRSSKiB
	}
	if !fr.inProc && r.rssKiB > bound {
		t.Errorf("peak RSS %d KiB, want under %d KiB", r.rssKiB, bound)
	}
	for _, want := range c.stdout {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for _, want := range c.stderr {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if c.check != nil {
		c.check(t, fr.dir, r)
	}
	if fr.pidfile != "" {
		assertNoneLeft(t, readPids(t, fr.pidfile))
	}
	if t.Failed() {
		t.Logf("mcplhost %s\n%s", strings.Join(fr.args, " "), r)
	}
}

// rssWrapperEnv makes this test binary, run again, a wrapper that runs
// its arguments as a command, passes its exit status on, and writes the
// command's peak RSS (KiB) to file descriptor 3.
//
// Why a wrapper: wait4's ru_maxrss for a child counts the high-water RSS
// of the memory the child had when it called exec, and Go starts children
// with vfork semantics, so a child of this test process (hundreds of MB
// under -race) starts with this process's peak. The wrapper is small: a
// child of it carries at most the wrapper's own few MB, and the number it
// reports is mcplhost's peak or that of a server mcplhost reaped,
// whichever is larger, never less than mcplhost's own.
const rssWrapperEnv = "MCPLHOST_FAULT_RSS_WRAPPER"

func init() {
	if os.Getenv(rssWrapperEnv) != "1" {
		return
	}
	os.Unsetenv(rssWrapperEnv)
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Run()
	report := os.NewFile(3, "rss")
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && report != nil {
		fmt.Fprintf(report, "%d\n", ru.Maxrss)
	}
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	os.Exit(code)
}

// runHost runs the non-race mcplhost at bin with args and env added to
// this process's environment, through the RSS wrapper, killing it if it
// outlives limit, and returns how it went with its peak RSS; err says what
// went wrong with the run itself. It calls no testing method, so that runs
// can go on in goroutines of their own.
func runHost(bin string, limit time.Duration, env []string, args ...string) (r hostRun, err error) {
	self, err := os.Executable()
	if err != nil {
		return r, err
	}
	rssR, rssW, err := os.Pipe()
	if err != nil {
		return r, err
	}
	defer rssR.Close()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, append([]string{bin}, args...)...)
	// A race-built wrapper sleeps a second at exit (GORACE atexit_sleep_ms)
	// unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(append(os.Environ(), env...), rssWrapperEnv+"=1", "GORACE="+gorace)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.ExtraFiles = []*os.File{rssW}
	// The wrapper and mcplhost share a process group (mcplhost's servers
	// have groups of their own): a run past its limit is killed whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Start()
	rssW.Close()
	if err != nil {
		return r, fmt.Errorf("starting mcplhost: %v", err)
	}
	cmd.Wait()
	r = hostRun{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		return r, fmt.Errorf("mcplhost %s was still running after %s and was killed", strings.Join(args, " "), limit)
	}
	b, _ := io.ReadAll(rssR)
	if _, err := fmt.Sscan(string(b), &r.rssKiB); err != nil {
		return r, fmt.Errorf("the wrapper reported no peak RSS (%q)", b)
	}
	return r, nil
}

// runInProcess runs the command in this process (built with -race when
// the tests are), so that TestMain's goleak check covers it.
func runInProcess(args ...string) hostRun {
	start := time.Now()
	code, stdout, stderr := runCLI(args...)
	return hostRun{code: code, stdout: stdout, stderr: stderr, elapsed: time.Since(start)}
}

// pidfilePath returns a -pidfile path in dir, and makes sure that whatever
// is left of the group it names at the test's end is killed, so that a
// failing test leaves no process behind either.
func pidfilePath(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "pids.json")
	t.Cleanup(func() {
		p, err := hostile.ReadPids(path)
		if err != nil {
			return
		}
		if len(procs.GroupMembers(p.Pgid)) > 0 {
			syscall.Kill(-p.Pgid, syscall.SIGKILL)
		}
		if procs.Alive(p.Grandchild) {
			syscall.Kill(p.Grandchild, syscall.SIGKILL)
		}
	})
	return path
}

// readPids reads a -pidfile the server has written.
func readPids(t *testing.T, path string) hostile.Pids {
	t.Helper()
	p, err := hostile.ReadPids(path)
	if err != nil {
		t.Fatalf("reading the server's pidfile: %v", err)
	}
	if p.Pgid <= 0 {
		t.Fatalf("pidfile %s names no process group: %+v", path, p)
	}
	return p
}

// awaitPids waits (polling: a file appearing has no event) for the server
// to write its pidfile, and reads it.
func awaitPids(t *testing.T, path string) hostile.Pids {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if p, err := hostile.ReadPids(path); err == nil {
			return p
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("the server wrote no pidfile at %s within %s", path, waitFor)
		}
	}
}

// assertNoneLeft checks that nothing of the server's process group is
// alive, and that its grandchild (if it had one) is not either.
func assertNoneLeft(t *testing.T, p hostile.Pids) {
	t.Helper()
	if m := procs.GroupMembers(p.Pgid); len(m) > 0 {
		t.Errorf("processes %v of the server's group %d are still alive", m, p.Pgid)
	}
	if p.Grandchild != 0 && procs.Alive(p.Grandchild) {
		t.Errorf("the server's grandchild %d is still alive", p.Grandchild)
	}
}

// awaitNoneLeft is assertNoneLeft allowing within for the processes to
// die: for SIGKILLs sent without waiting (transport.KillAll).
func awaitNoneLeft(t *testing.T, p hostile.Pids, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for len(procs.GroupMembers(p.Pgid)) > 0 || (p.Grandchild != 0 && procs.Alive(p.Grandchild)) {
		select {
		case <-tick.C:
		case <-deadline.C:
			assertNoneLeft(t, p)
			return
		}
	}
}

// writeHostConfig writes a host configuration of one server, id srv, with
// more YAML lines for it (command: or url:, requestTimeout: ...), and
// returns its path.
func writeHostConfig(t *testing.T, dir string, lines ...string) string {
	t.Helper()
	body := "servers:\n  - id: srv\n"
	for _, l := range lines {
		body += "    " + l + "\n"
	}
	path := filepath.Join(dir, "host.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// yamlList writes argv as a YAML flow list of double-quoted strings.
func yamlList(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a) // YAML's double-quoted scalars take Go's escapes for what these hold
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// liveHost is a non-race mcplhost running as a subprocess whose stdout
// and stderr are read line by line as they come, for the signal tests.
type liveHost struct {
	t      *testing.T
	cmd    *exec.Cmd
	start  time.Time
	out    chan string // stdout lines; closed at EOF
	errs   chan string // stderr lines; closed at EOF
	stdout []string    // the lines nextOut has taken
	stderr []string    // the lines nextErr has taken
	done   chan struct{}
	state  *os.ProcessState
	ended  time.Time
}

// startHost starts the non-race mcplhost with args. It is killed, and
// everything it printed drained, at the test's end at the latest.
func startHost(t *testing.T, args ...string) *liveHost {
	t.Helper()
	return startCommand(t, exec.Command(hostBinary(t), args...))
}

// startCommand is startHost for a command that runs mcplhost some other
// way (a shell that execs it).
func startCommand(t *testing.T, cmd *exec.Cmd) *liveHost {
	t.Helper()
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &liveHost{t: t, cmd: cmd, out: make(chan string, 1024), errs: make(chan string, 1024), done: make(chan struct{})}
	h.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting mcplhost: %v", err)
	}
	var readers sync.WaitGroup
	readers.Go(func() { readLines(outR, h.out) })
	readers.Go(func() { readLines(errR, h.errs) })
	go func() {
		readers.Wait() // Wait closes the pipes: read them to their end first
		cmd.Wait()
		h.state = cmd.ProcessState
		h.ended = time.Now()
		close(h.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		drain(h.out)
		drain(h.errs)
		<-h.done
	})
	return h
}

// readLines sends r's lines to lines, and closes it at the end of r.
func readLines(r io.Reader, lines chan<- string) {
	defer close(lines)
	br := bufio.NewReader(r)
	for {
		l, err := br.ReadString('\n')
		if l != "" {
			lines <- strings.TrimSuffix(l, "\n")
		}
		if err != nil {
			return
		}
	}
}

func drain(c <-chan string) {
	for range c {
	}
}

// awaitLine reads lines from c (into *seen) until one contains want.
func (h *liveHost) awaitLine(c <-chan string, seen *[]string, what, want string) {
	h.t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-c:
			if !ok {
				h.t.Fatalf("%s ended without a line containing %q; it printed:\n%s", what, want, strings.Join(*seen, "\n"))
			}
			*seen = append(*seen, l)
			if strings.Contains(l, want) {
				return
			}
		case <-deadline.C:
			h.t.Fatalf("no %s line containing %q within %s; it printed:\n%s", what, want, waitFor, strings.Join(*seen, "\n"))
		}
	}
}

// awaitOut waits for a stdout line containing want.
func (h *liveHost) awaitOut(want string) { h.t.Helper(); h.awaitLine(h.out, &h.stdout, "stdout", want) }

// awaitErr waits for a stderr line containing want.
func (h *liveHost) awaitErr(want string) {
	h.t.Helper()
	h.awaitLine(h.errs, &h.stderr, "stderr", want)
}

// signal sends sig to mcplhost (not to its servers: they are in groups of
// their own).
func (h *liveHost) signal(sig syscall.Signal) {
	h.t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		h.t.Fatalf("sending %v: %v", sig, err)
	}
}

// wait waits up to within for mcplhost to exit, collecting the rest of
// what it printed, and returns its exit status (-1 if a signal killed it).
func (h *liveHost) wait(within time.Duration) int {
	h.t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	expired := timer.C
	killed := false
	out, errs := h.out, h.errs
	for out != nil || errs != nil {
		select {
		case l, ok := <-out:
			if !ok {
				out = nil
				continue
			}
			h.stdout = append(h.stdout, l)
		case l, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			h.stderr = append(h.stderr, l)
		case <-expired:
			h.cmd.Process.Kill()
			killed, expired = true, nil
		}
	}
	<-h.done
	if killed {
		h.t.Fatalf("mcplhost did not exit within %s; it printed:\n%s\nstderr:\n%s", within,
			strings.Join(h.stdout, "\n"), strings.Join(h.stderr, "\n"))
	}
	return h.state.ExitCode()
}

// controlRune returns the first byte or rune in s that a terminal would
// act on, or that hides or reorders text: a C0 control other than
// newline, DEL, a C1 control, or a bidirectional control; -1 if none.
func controlRune(s string) rune {
	for _, r := range s {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return r
		}
	}
	return -1
}
