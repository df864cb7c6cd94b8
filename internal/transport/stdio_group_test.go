package transport_test

import (
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/procs"
	"github.com/mcpl-go/mcpl/internal/transport"
)

// eventually polls cond until it holds, failing the test if it does not
// within testTimeout. It is for states no event reports, such as a
// process's death.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, testTimeout)
		}
		<-tick.C
	}
}

// readLine reads one message and fails the test unless it is want.
func readLine(t *testing.T, p *transport.Process, want string) {
	t.Helper()
	msg, err := readWithin(t, p, testTimeout)
	if err != nil || string(msg) != want {
		t.Fatalf("Read = %q, %v; want %q", msg, err, want)
	}
}

func TestCloseStopsTheWholeGroup(t *testing.T) {
	t.Parallel()
	const short = 250 * time.Millisecond
	tests := []struct {
		name       string
		script     string // prints "started" once ready
		stopWait   time.Duration
		min, max   time.Duration // how long Close may take
		wantSignal string        // what ended the leader
		wantSent   []string      // the signals Close sent, in order
	}{
		// A long StopWait: Close must not wait it out.
		{"leader exits on EOF, nothing left", `echo started; exec cat`, 20 * time.Second, 0, 5 * time.Second, "", nil},
		{"leader exits on EOF, helper left", `sleep 600 & echo started; exec cat`, 20 * time.Second, 0, 5 * time.Second, "", []string{"SIGTERM"}},
		{"leader ignores EOF, all stop on SIGTERM", `sleep 600 & echo started; wait`, short, short, 3 * short, "SIGTERM", []string{"SIGTERM"}},
		{"leader stops on SIGTERM, helper ignores it", `(trap "" TERM; echo started; exec sleep 600) & wait`, short, 2 * short, 3 * short, "SIGTERM", []string{"SIGTERM", "SIGKILL"}},
		{"all ignore EOF and SIGTERM", `trap "" TERM; sleep 600 & echo started; wait`, short, 2 * short, 3 * short, "SIGKILL", []string{"SIGTERM", "SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &logRecorder{}
			p := spawn(t, sh(tt.script), transport.StdioOptions{StopWait: tt.stopWait, Logger: slog.New(rec)})
			readLine(t, p, "started")
			pgid := p.Pid()
			if !p.Registered() {
				t.Error("a running process is not registered for KillAll")
			}
			start := time.Now()
			if err := p.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			elapsed := time.Since(start)
			if elapsed < tt.min || elapsed > tt.max {
				t.Errorf("Close took %s, want between %s and %s", elapsed, tt.min, tt.max)
			}
			if live := procs.GroupMembers(pgid); len(live) > 0 {
				t.Errorf("processes %v of the group are alive after Close", live)
			}
			assertReaped(t, pgid)
			info := p.CloseInfo()
			if !info.Exited || info.Signal != tt.wantSignal || (tt.wantSignal == "" && info.ExitCode != 0) {
				t.Errorf("CloseInfo = %+v, want exited by signal %q", info, tt.wantSignal)
			}
			if diff := cmp.Diff(tt.wantSent, rec.Signals()); diff != "" {
				t.Errorf("signals logged (-want +got):\n%s", diff)
			}
			if p.Registered() {
				t.Error("still registered for KillAll after Close")
			}
		})
	}
}

// A server that exits on its own, leaving something it started holding its
// stdout: the stream ends at the reader's wait, and Close stops the rest.
func TestCloseStopsWhatOutlivedTheServer(t *testing.T) {
	t.Parallel()
	const stopWait = 250 * time.Millisecond
	rec := &logRecorder{}
	p := spawn(t, sh(`sleep 600 & echo $!; exit 0`), transport.StdioOptions{StopWait: stopWait, Logger: slog.New(rec)})
	msg, err := readWithin(t, p, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(string(msg))
	if err != nil {
		t.Fatalf("child pid %q: %v", msg, err)
	}
	if _, err := readWithin(t, p, testTimeout); !errors.Is(err, io.EOF) {
		t.Fatalf("Read after the server exited = %v, want io.EOF", err)
	}
	if info := p.CloseInfo(); !info.Exited || info.ExitCode != 0 || info.Signal != "" {
		t.Errorf("CloseInfo = %+v, want a clean exit", info)
	}
	// Nothing is stopped before Close.
	if !processAlive(child) {
		t.Fatalf("the server's child %d was stopped before Close", child)
	}
	if !p.Registered() {
		t.Error("a group with a live member is not registered for KillAll")
	}
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 3*stopWait {
		t.Errorf("Close took %s, want under %s", elapsed, 3*stopWait)
	}
	if live := procs.GroupMembers(p.Pid()); len(live) > 0 {
		t.Errorf("processes %v of the group are alive after Close", live)
	}
	if processAlive(child) {
		t.Errorf("the server's child %d outlived Close", child)
	}
	if diff := cmp.Diff([]string{"SIGTERM"}, rec.Signals()); diff != "" {
		t.Errorf("signals logged (-want +got):\n%s", diff)
	}
	if _, attrs, ok := rec.Find("server process exited but left its process group running; signalled"); !ok || attrs["signal"].String() != "SIGTERM" {
		t.Errorf("no record of the leftover group signalled with SIGTERM (found %v, %v)", ok, attrs)
	}
	if p.Registered() {
		t.Error("still registered for KillAll after Close")
	}
}

// Not parallel: KillAll reaches every process this test binary started.
func TestKillAll(t *testing.T) {
	rec := &logRecorder{}
	// A long StopWait: Close would take a minute without KillAll.
	opts := transport.StdioOptions{StopWait: 30 * time.Second, Logger: slog.New(rec)}
	stubborn := spawn(t, sh(`trap "" TERM; sleep 600 & echo started; wait`), opts)
	plain := spawn(t, sh(`sleep 600 & echo started; exec cat`), opts)
	started := []*transport.Process{stubborn, plain}
	for _, p := range started {
		readLine(t, p, "started")
		if !p.Registered() {
			t.Fatalf("process %d is not registered", p.Pid())
		}
	}
	transport.KillAll()
	for _, p := range started {
		select {
		case <-p.Exited():
		case <-time.After(testTimeout):
			t.Fatalf("process %d still running after KillAll", p.Pid())
		}
		if info := p.CloseInfo(); info.Signal != "SIGKILL" {
			t.Errorf("process %d ended with %+v, want SIGKILL", p.Pid(), info)
		}
		eventually(t, "the group's members die", func() bool { return len(procs.GroupMembers(p.Pid())) == 0 })
	}
	if got := len(rec.All("server process group killed")); got != 2 {
		t.Errorf("%d kills logged, want 2", got)
	}
	for _, p := range started {
		start := time.Now()
		p.Close()
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("Close after KillAll took %s", elapsed)
		}
		if p.Registered() {
			t.Errorf("process %d still registered after Close", p.Pid())
		}
		assertReaped(t, p.Pid())
	}
	// Nothing is left to kill.
	transport.KillAll()
	if got := len(rec.All("server process group killed")); got != 2 {
		t.Errorf("%d kills logged after a second KillAll, want still 2", got)
	}
}

// KillAll alongside Spawn and Close, for the race detector and for the
// registry's bookkeeping. Not parallel, as TestKillAll.
func TestKillAllConcurrently(t *testing.T) {
	stop := make(chan struct{})
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for {
			select {
			case <-stop:
				return
			default:
				transport.KillAll()
			}
		}
	}()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started []*transport.Process
	)
	for range 8 {
		wg.Go(func() {
			p, err := transport.Spawn(transport.Command{Argv: []string{"sh", "-c", "sleep 600 & exec cat"}},
				transport.StdioOptions{StopWait: 200 * time.Millisecond, Logger: discardLogger})
			if err != nil {
				t.Errorf("Spawn: %v", err)
				return
			}
			p.Close()
			mu.Lock()
			started = append(started, p)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stop)
	<-killerDone
	if len(started) != 8 {
		t.Fatalf("%d processes started and closed, want 8", len(started))
	}
	for _, p := range started {
		if live := procs.GroupMembers(p.Pid()); len(live) > 0 {
			t.Errorf("group %d has live members %v after Close", p.Pid(), live)
		}
		if p.Registered() {
			t.Errorf("process %d still registered after Close", p.Pid())
		}
		assertReaped(t, p.Pid())
	}
}

// A server that moves itself out of its process group, leaving a child
// behind in it, both ignoring SIGTERM: Close still signals the server (not
// only the group it left, which still has a member to take the signal), so
// Close returns, and nothing of either is left.
func TestCloseLeaderThatLeftItsGroup(t *testing.T) {
	pidfile := t.TempDir() + "/pids.json"
	p, err := transport.Spawn(transport.Command{Argv: []string{hostile.Binary(t),
		"-grandchild", "background", "-stubborn-grandchild", "-leave-group", "-ignore-term", "-ignore-eof", "-pidfile", pidfile}},
		transport.StdioOptions{Logger: discardLogger, StopWait: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var pids hostile.Pids
	eventually(t, "the server writes its pids", func() bool {
		pids, err = hostile.ReadPids(pidfile)
		return err == nil
	})
	if pg, err := syscall.Getpgid(pids.Pid); err != nil || pg == pids.Pgid {
		t.Fatalf("the server's group is %d (%v); it was to leave %d", pg, err, pids.Pgid)
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testTimeout):
		syscall.Kill(pids.Pid, syscall.SIGKILL)
		<-closed
		t.Fatalf("Close did not return within %s", testTimeout)
	}
	if procs.Alive(pids.Pid) || procs.Alive(pids.Grandchild) || len(procs.GroupMembers(pids.Pgid)) > 0 {
		t.Errorf("left alive: server %v, grandchild %v, group %v", procs.Alive(pids.Pid), procs.Alive(pids.Grandchild), procs.GroupMembers(pids.Pgid))
	}
}
