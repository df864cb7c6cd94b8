//go:build !linux

package transport

import (
	"os/exec"
	"syscall"
)

// Elsewhere than Linux there is no parent-death signal: a server outlives
// a host that is killed without its orderly stop (docs/limits.md).

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func startProcess(c *exec.Cmd) error { return c.Start() }

func processReaped() {}
