// Package procs reads Linux's /proc for which processes and process groups
// are still alive. A zombie counts as gone: its parent may never reap it
// (PID 1 in some containers does not), and it holds nothing open.
package procs

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ParseStat returns the state and process group from the contents of
// /proc/PID/stat: "pid (comm) state ppid pgrp ...", where comm may hold
// spaces and parentheses.
func ParseStat(b []byte) (state byte, pgrp int, ok bool) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}

// stat reads pid's state and group; ok is false when it is gone.
func stat(pid string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, false
	}
	return ParseStat(b)
}

func live(state byte) bool { return state != 'Z' && state != 'X' }

// GroupMembers returns the live processes whose process group is pgid (nil
// when /proc cannot be read).
func GroupMembers(pgid int) []int {
	names, err := pids()
	if err != nil {
		return nil
	}
	var out []int
	for _, name := range names {
		if state, pg, ok := stat(name); ok && pg == pgid && live(state) {
			pid, _ := strconv.Atoi(name)
			out = append(out, pid)
		}
	}
	return out
}

// GroupAlive reports whether process group pgid has a live member. When
// /proc cannot be read it says true: it cannot tell the group is gone.
func GroupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	names, err := pids()
	if err != nil {
		return true
	}
	for _, name := range names {
		if state, pg, ok := stat(name); ok && pg == pgid && live(state) {
			return true
		}
	}
	return false
}

// Alive reports whether pid is a live process.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	state, _, ok := stat(strconv.Itoa(pid))
	return ok && live(state)
}

// pids lists the process ids /proc holds.
func pids() ([]string, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if n != "" && n[0] >= '1' && n[0] <= '9' {
			out = append(out, n)
		}
	}
	return out, nil
}
