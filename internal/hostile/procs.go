package hostile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Pids is what -pidfile holds: the server's pid and process group, and its
// -grandchild's pid (0 if none).
type Pids struct {
	Pid        int `json:"pid"`
	Pgid       int `json:"pgid"`
	Grandchild int `json:"grandchild"`
}

// ReadPids reads a -pidfile.
func ReadPids(path string) (Pids, error) {
	var p Pids
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	err = json.Unmarshal(b, &p)
	return p, err
}

// WritePids writes p to path whole: a reader sees all of it or none.
func WritePids(path string, p Pids) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// procStat is what GroupMembers and Alive read of /proc/PID/stat.
type procStat struct {
	state byte
	pgrp  int
}

func readStat(pid string) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return procStat{}, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, false
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], pgrp: pgrp}, true
}

func (s procStat) live() bool { return s.state != 'Z' && s.state != 'X' }

// GroupMembers returns the live (not zombie, not dead) processes whose
// process group is pgid, as /proc says.
func GroupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(e.Name()); ok && st.live() && st.pgrp == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Alive reports whether pid is a live (not zombie, not dead) process.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	st, ok := readStat(strconv.Itoa(pid))
	return ok && st.live()
}

// StartWS runs the hostile program with -ws and args, in a process group of
// its own, and returns the URL it prints. At the test's end the whole group
// is killed and the program reaped.
func StartWS(tb testing.TB, args ...string) string {
	tb.Helper()
	bin := Binary(tb)
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-ws"}, args...)...)
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		tb.Fatalf("starting %s: %v", bin, err)
	}
	w.Close()
	pgid := cmd.Process.Pid
	tb.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL)
		cmd.Wait()
		r.Close()
	})
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		got <- line{s, err}
	}()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case l := <-got:
		url := strings.TrimSpace(l.s)
		if l.err != nil || !strings.HasPrefix(url, "ws://127.0.0.1:") {
			tb.Fatalf("hostile -ws printed %q (%v), want its ws:// URL", l.s, l.err)
		}
		return url
	case <-timer.C:
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-got // the kill ends the read
		tb.Fatalf("hostile -ws printed no URL within 10s")
		return ""
	}
}
