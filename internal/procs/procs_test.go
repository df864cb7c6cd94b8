package procs_test

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/procs"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		stat      string
		state     byte
		pgrp      int
		wantValid bool
	}{
		{"123 (sleep) S 1 120 120 0 -1", 'S', 120, true},
		{"124 (a) b) (c) Z 1 77 77 0", 'Z', 77, true},
		{"125 (with space) R 9 125 1", 'R', 125, true},
		{"126 (cut", 0, 0, false},
		{"127 (x) S 1", 0, 0, false},
		{"128 (x) S 1 notanumber", 0, 0, false},
	}
	for _, tt := range tests {
		state, pgrp, ok := procs.ParseStat([]byte(tt.stat))
		if ok != tt.wantValid || (ok && (state != tt.state || pgrp != tt.pgrp)) {
			t.Errorf("ParseStat(%q) = %q, %d, %v; want %q, %d, %v", tt.stat, state, pgrp, ok, tt.state, tt.pgrp, tt.wantValid)
		}
	}
}

func TestSelf(t *testing.T) {
	pg := syscall.Getpgrp()
	if !slices.Contains(procs.GroupMembers(pg), os.Getpid()) || !procs.GroupAlive(pg) {
		t.Errorf("GroupMembers(%d) = %v, GroupAlive %v; want this process %d in it", pg, procs.GroupMembers(pg), procs.GroupAlive(pg), os.Getpid())
	}
	if !procs.Alive(os.Getpid()) || procs.Alive(0) || procs.Alive(-1) {
		t.Errorf("Alive: self %v, 0 %v, -1 %v", procs.Alive(os.Getpid()), procs.Alive(0), procs.Alive(-1))
	}
}

// A killed, unreaped process is a zombie: not Alive, not a member, its
// group not alive, though /proc still lists it; reaped, it is gone.
func TestZombiesCountAsGone(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			syscall.Kill(-pid, syscall.SIGKILL)
			cmd.Wait()
		}
	})
	if !procs.Alive(pid) || !slices.Equal(procs.GroupMembers(pid), []int{pid}) || !procs.GroupAlive(pid) {
		t.Fatalf("the sleeper %d: alive %v, group %v", pid, procs.Alive(pid), procs.GroupMembers(pid))
	}
	syscall.Kill(pid, syscall.SIGKILL)
	// No event says a process has died: poll, with a deadline.
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for procs.Alive(pid) {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%d still alive 10s after SIGKILL", pid)
		}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if state, _, ok := procs.ParseStat(b); err != nil || !ok || state != 'Z' {
		t.Errorf("the unreaped sleeper's stat %q (%v), want state Z", b, err)
	}
	if got := procs.GroupMembers(pid); len(got) != 0 || procs.GroupAlive(pid) {
		t.Errorf("a zombie counts as alive: members %v, group alive %v", got, procs.GroupAlive(pid))
	}
	cmd.Wait()
	reaped = true
	if procs.Alive(pid) || procs.GroupAlive(pid) {
		t.Errorf("%d alive after it was reaped", pid)
	}
}
