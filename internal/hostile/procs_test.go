package hostile_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpl-go/mcpl/internal/hostile"
)

func TestGroupMembersSelf(t *testing.T) {
	if !slices.Contains(hostile.GroupMembers(syscall.Getpgrp()), os.Getpid()) {
		t.Errorf("GroupMembers(%d) = %v lacks this process %d", syscall.Getpgrp(), hostile.GroupMembers(syscall.Getpgrp()), os.Getpid())
	}
	if !hostile.Alive(os.Getpid()) || hostile.Alive(0) || hostile.Alive(-1) {
		t.Errorf("Alive: self %v, 0 %v, -1 %v", hostile.Alive(os.Getpid()), hostile.Alive(0), hostile.Alive(-1))
	}
}

// A killed, unreaped process is a zombie: not Alive, not a member, though
// /proc still lists it; reaped, it is gone.
func TestAliveSkipsZombies(t *testing.T) {
	cmd := exec.Command(hostile.Binary(t), "-sleeper")
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
	if !hostile.Alive(pid) || !slices.Equal(hostile.GroupMembers(pid), []int{pid}) {
		t.Fatalf("the sleeper %d: alive %v, group %v", pid, hostile.Alive(pid), hostile.GroupMembers(pid))
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, pid)
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatalf("the unreaped sleeper's stat: %v", err)
	}
	if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) == 0 || f[0] != "Z" {
		t.Errorf("the unreaped sleeper's stat %q, want state Z", b)
	}
	if got := hostile.GroupMembers(pid); len(got) != 0 {
		t.Errorf("GroupMembers lists the zombie: %v", got)
	}
	cmd.Wait()
	reaped = true
	if hostile.Alive(pid) {
		t.Errorf("Alive(%d) after it was reaped", pid)
	}
}

func TestReadPids(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pids")
	want := hostile.Pids{Pid: 10, Pgid: 11, Grandchild: 12}
	if err := hostile.WritePids(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := hostile.ReadPids(path)
	if err != nil || got != want {
		t.Errorf("ReadPids = %+v, %v; want %+v", got, err, want)
	}
	if _, err := hostile.ReadPids(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Errorf("ReadPids of no file: no error")
	}
}
