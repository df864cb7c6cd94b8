//go:build linux

package transport

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// On Linux every server process gets a parent-death signal: SIGKILL, sent
// by the kernel when the host dies however it dies (kill -9, the OOM
// killer, a crash), so that a host started again finds no server of the
// last one still running beside its own.
//
// SIGKILL, not SIGTERM: by then nobody is left to speak to, and a server
// that ignores SIGTERM (as a stubborn one does, and as Close is prepared
// for) would outlive its host. What the server started is not reached
// (the kernel signals only the direct child; see docs/limits.md).
//
// The kernel sends the signal when the thread that forked the child
// exits, not the process (prctl(2) PR_SET_PDEATHSIG; golang/go#27505).
// The Go runtime ends a thread only when a goroutine locked to it
// (runtime.LockOSThread) exits without unlocking, but any goroutine of
// the program, or of a library, may do that on any thread, so a fork from
// an arbitrary goroutine's thread would leave the server at the mercy of
// whatever runs on that thread later. So every fork is made by one
// goroutine, the forker, locked to its thread for as long as any process
// it forked is alive: that thread is never retired under a live server.
// The forker starts with the first Spawn and ends, unlocking, when the
// last process it forked has been reaped (its owner is the set of live
// processes; nothing outlives the last Close). A later Spawn starts a new
// forker on whatever thread it gets.
//
// A parent that dies between the fork and the child's prctl is covered by
// the standard library's child: it compares its parent's pid after the
// prctl with the one before and signals itself if they differ. Two limits
// remain: a setuid or setgid program clears its parent-death signal at
// exec (the kernel does this), and a server that dies of it leaves its own
// children, if they are in no process group the host could still signal,
// running.
var forker struct {
	mu   sync.Mutex
	live int           // processes forked and not yet reaped, plus starts under way
	reqs chan *forkReq // nil while no forker runs
}

type forkReq struct {
	c    *exec.Cmd
	done chan error
}

// sysProcAttr is how every server process is started: in a process group
// of its own, and with SIGKILL as its parent-death signal.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startProcess starts c on the forker's thread. When it returns nil, the
// caller owes one processReaped, after c.Wait has reaped the process.
func startProcess(c *exec.Cmd) error {
	forker.mu.Lock()
	if forker.reqs == nil {
		forker.reqs = make(chan *forkReq)
		go forkLoop(forker.reqs)
	}
	forker.live++
	reqs := forker.reqs
	forker.mu.Unlock()
	r := &forkReq{c: c, done: make(chan error, 1)}
	reqs <- r
	err := <-r.done
	if err != nil {
		processReaped()
	}
	return err
}

// processReaped says a process startProcess started has been reaped; the
// last one ends the forker.
func processReaped() {
	forker.mu.Lock()
	defer forker.mu.Unlock()
	forker.live--
	if forker.live == 0 {
		close(forker.reqs)
		forker.reqs = nil
	}
}

// forkLoop is the forker: it starts each process asked of it from its own
// locked thread, until reqs is closed (no process it started is alive).
func forkLoop(reqs <-chan *forkReq) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for r := range reqs {
		r.done <- r.c.Start()
	}
}
