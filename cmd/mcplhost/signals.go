package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// stopper turns what ends mcplhost from outside into an orderly shutdown.
// The first SIGINT, SIGTERM, SIGHUP or SIGQUIT, or a write to a stdout
// whose reader has gone, ends the command's context: the command fails
// what is pending (each call reads that it was abandoned here), closes its
// servers (each server's whole process group: TERM, then KILL after the
// grace period, all servers at once) and returns; the program then exits
// 128 plus the signal's number: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP),
// 131 (SIGQUIT) or 141 (stdout closed). A second signal kills every
// server's process group at once and exits with the same status, so even
// an impatient Ctrl-C Ctrl-C leaves no process behind.
//
// SIGHUP is what a closing terminal or ssh session sends; it means only
// "stop", as SIGTERM does (no reload: the configuration is read once),
// and it is left ignored when the program was started with it ignored
// (nohup).
// SIGQUIT (Ctrl-\) stops in order too, so it no longer makes the Go
// runtime print the goroutines' stacks and exit 2; SIGABRT (kill -ABRT),
// left to the runtime, still does that (and leaves the servers to their
// parent-death signal, docs/limits.md).
type stopper struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	sigs   chan os.Signal
	done   chan struct{}
	wg     sync.WaitGroup
}

// stopCause is why a command was stopped, and the status to exit with.
type stopCause struct {
	why  string // "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "stdout was closed"
	code int
}

func (c *stopCause) Error() string { return "stopped: " + c.why }

// exitFor is the status for a signal, as a shell reports a process it
// killed: 128 plus the signal's number.
func exitFor(sig syscall.Signal) int { return 128 + int(sig) }

// stopSignals are the signals the stopper takes: the four that stop in
// order, and SIGPIPE (see newStopper); SIGHUP only when the program was
// not started with it ignored. nohup (or a shell's trap "" HUP) ignores
// SIGHUP so that a program outlives its terminal, and taking it would undo
// that. SIGINT is taken even when it came ignored, as before: a shell
// without job control starts a background job with SIGINT ignored, and
// the tests' helpers (testdata/sh/bg.sh) stop such a job with kill -INT.
func stopSignals() []os.Signal {
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGPIPE}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

func newStopper() *stopper {
	s := &stopper{sigs: make(chan os.Signal, 4), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	// SIGPIPE is taken too: a write to a closed stdout then fails with
	// EPIPE (which guard acts on) instead of killing the program before
	// it can close its servers.
	signal.Notify(s.sigs, stopSignals()...)
	s.wg.Go(s.watch)
	return s
}

func (s *stopper) watch() {
	for {
		var sig os.Signal
		select {
		case sig = <-s.sigs:
		case <-s.done:
			return
		}
		ss, _ := sig.(syscall.Signal)
		if ss == syscall.SIGPIPE {
			continue
		}
		cause := &stopCause{why: transport.SignalName(ss), code: exitFor(ss)}
		if s.ctx.Err() == nil {
			s.cancel(cause)
			continue
		}
		// A second signal: no more waiting.
		transport.KillAll()
		os.Exit(cause.code)
	}
}

// stop stops taking signals.
func (s *stopper) stop() {
	signal.Stop(s.sigs)
	close(s.done)
	s.wg.Wait()
}

// stopped returns why the command was stopped, or nil.
func (s *stopper) stopped() *stopCause {
	var c *stopCause
	if errors.As(context.Cause(s.ctx), &c) {
		return c
	}
	return nil
}

// guard returns w, made to stop the command when a write to it finds its
// reader gone.
func (s *stopper) guard(w io.Writer) io.Writer { return &guarded{w: w, s: s} }

type guarded struct {
	w io.Writer
	s *stopper
}

func (g *guarded) Write(b []byte) (int, error) {
	n, err := g.w.Write(b)
	if err != nil && errors.Is(err, syscall.EPIPE) {
		g.s.cancel(&stopCause{why: "stdout was closed", code: exitFor(syscall.SIGPIPE)})
	}
	return n, err
}
