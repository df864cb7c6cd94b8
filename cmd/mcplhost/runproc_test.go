package main

// Helpers for the tests that run `mcplhost run` as a subprocess against
// the channel server (internal/chanserver), driven through its control
// listener, with the agents' transcript a FIFO read as it is written:
// restart_test.go and flood_test.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/procs"
)

// runProc is a non-race `mcplhost run` in a process group of its own.
type runProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *lockedBuffer
	tr     *transcriptLog
	fifo   string
	done   chan struct{} // closed once it has exited and been reaped
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startRun starts mcplhost run on cfg, with flags, its transcript the
// FIFO dir/<name>.jsonl. Cleanup kills its group, if it is still running.
func startRun(t *testing.T, dir, cfg, name string, flags ...string) *runProc {
	t.Helper()
	fifo := filepath.Join(dir, name+".jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &runProc{t: t, stderr: &lockedBuffer{}, tr: newTranscriptLog(), done: make(chan struct{}), fifo: fifo}
	go p.tr.follow(fifo)
	p.cmd = exec.Command(hostBinary(t), append([]string{"run", "--config", cfg, "--transcript", fifo}, flags...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.launch(p.endTranscript); err != nil {
		close(p.done)
		p.endTranscript()
		t.Fatalf("starting mcplhost run: %v", err)
	}
	return p
}

// launch starts p.cmd in a process group of its own and closes p.done
// when it has ended; the test's cleanup kills the group if it is still
// running, then calls after (when not nil).
func (p *runProc) launch(after func()) error {
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	p.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if after != nil {
			after()
		}
	})
	return nil
}

// endTranscript waits for the transcript's reader to end, once the host
// has exited: if the host never opened the FIFO, the reader is still
// waiting in its open, and an open for writing here meets it.
func (p *runProc) endTranscript() {
	for {
		select {
		case <-p.tr.ended:
			return
		case <-time.After(10 * time.Millisecond):
			if f, err := os.OpenFile(p.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	}
}

// kill9 SIGKILLs the host's process group, as a crash or the OOM killer
// would end it, and waits for it.
func (p *runProc) kill9() {
	p.t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		p.t.Fatalf("SIGKILL: %v", err)
	}
	p.wait(30 * time.Second)
}

// stop sends SIGTERM, waits for the orderly stop (about 20 s at most,
// docs/run.md), and returns the exit status.
func (p *runProc) stop() int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
	p.wait(60 * time.Second)
	return p.cmd.ProcessState.ExitCode()
}

func (p *runProc) wait(within time.Duration) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.endTranscript()
		p.t.Fatalf("mcplhost run did not exit within %s; it logged:\n%s", within, clip(p.stderr.String()))
	}
	p.endTranscript()
}

// peakRSSKiB is the process's peak resident set (VmHWM) so far, in KiB.
func (p *runProc) peakRSSKiB() int64 {
	p.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.t.Fatalf("reading mcplhost's status: %v", err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`).FindSubmatch(b)
	if m == nil {
		p.t.Fatalf("no VmHWM in /proc/%d/status:\n%s", p.cmd.Process.Pid, b)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// transcriptLog is a transcript being read from a FIFO.
type transcriptLog struct {
	mu      sync.Mutex
	events  []agent.Event
	changed chan struct{}
	ended   chan struct{} // closed when the writer has gone
}

func newTranscriptLog() *transcriptLog {
	return &transcriptLog{changed: make(chan struct{}), ended: make(chan struct{})}
}

// follow reads the FIFO until its writer closes it.
func (l *transcriptLog) follow(path string) {
	defer close(l.ended)
	f, err := os.Open(path) // waits for the writer
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev agent.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		l.mu.Lock()
		l.events = append(l.events, ev)
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
}

func (l *transcriptLog) all() []agent.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agent.Event(nil), l.events...)
}

// wait waits, up to within, until cond holds for the events so far.
func (l *transcriptLog) wait(t *testing.T, within time.Duration, what string, cond func([]agent.Event) bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		evs, ch := l.events, l.changed
		l.mu.Unlock()
		if cond(evs) {
			return
		}
		select {
		case <-ch:
		case <-l.ended:
			if !cond(l.all()) {
				t.Fatalf("the transcript ended before %s; it has %d events", what, len(l.all()))
			}
			return
		case <-deadline.C:
			t.Fatalf("no %s in the transcript within %s; it has %d events", what, within, len(l.all()))
		}
	}
}

// control is the channel server's control listener.
type control struct {
	chanserver.ControlFile
}

// awaitControl waits (polling: a file appearing has no event) for the
// channel server to write its control file.
func awaitControl(t *testing.T, path string, p *runProc) control {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			var c control
			if err := json.Unmarshal(b, &c.ControlFile); err != nil {
				t.Fatalf("control file %q: %v", b, err)
			}
			return c
		}
		select {
		case <-tick.C:
		case <-p.done:
			t.Fatalf("mcplhost run exited before the channel server was ready:\n%s", clip(p.stderr.String()))
		case <-deadline.C:
			t.Fatalf("the channel server wrote no control file at %s within %s; mcplhost logged:\n%s", path, waitFor, clip(p.stderr.String()))
		}
	}
}

// call calls one of the channel server's tools, within limit, and
// returns its text; an error result fails the test.
func (c control) call(t *testing.T, limit time.Duration, tool, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/tools/"+tool, strings.NewReader(args))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	defer resp.Body.Close()
	var a chanserver.ControlAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || a.IsError {
		t.Fatalf("%s %.200s: HTTP %d, %+v (%v)", tool, args, resp.StatusCode, a, err)
	}
	return a.Text
}

// burst sends an incoming_burst and fails the test unless every message
// was accepted.
func (c control) burst(t *testing.T, limit time.Duration, args string) chanserver.BurstResult {
	t.Helper()
	out := c.call(t, limit, "incoming_burst", args)
	var res chanserver.BurstResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Accepted != res.Sent || res.Sent == 0 {
		t.Fatalf("incoming_burst %s: %s", args, out)
	}
	return res
}

// awaitGone waits for the control file's server to exit (polling: another
// process's end has no event here).
func (c control) awaitGone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for procs.Alive(c.Pid) {
		if time.Now().After(deadline) {
			syscall.Kill(c.Pid, syscall.SIGKILL)
			t.Fatalf("the channel server %d outlived its host by 30 s", c.Pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// shownMessage is the header of a message of chat's channel a as a turn
// shows it.
var shownMessage = regexp.MustCompile(`(?m)^\[#a \(a\) on chat · from Ada · message (\S+) · at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\]$`)

// shownIDs are the ids of the messages of channel a a shown event shows.
func shownIDs(text string) []string {
	var out []string
	for _, m := range shownMessage.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// chanserverCommand is the channel server's command line, as YAML, with
// channel a registered open and the control file at control.
func chanserverCommand(t *testing.T, control string, flags ...string) string {
	argv := append([]string{chanserver.Binary(t), "-channels", `[{"id":"a","type":"chat","label":"#a","address":{"room":"a"},"initiallyOpen":true}]`, "-control", control}, flags...)
	return yamlList(argv)
}
