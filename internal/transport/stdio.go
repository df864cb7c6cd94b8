package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Command says how to start a server process.
type Command struct {
	// Argv is the program and its arguments. An Argv[0] without a slash is
	// looked up in the PATH the process gets (Env may set it), as a shell
	// running it with that environment would.
	Argv []string
	// Env holds KEY=VALUE pairs added to the process's environment. Without
	// InheritEnv the process gets only PATH, HOME, LANG, LC_*, TZ, TMPDIR,
	// USER and SHELL from this process, then these.
	Env []string
	// InheritEnv passes this process's whole environment, then Env.
	InheritEnv bool
	// Dir is the working directory; empty means this process's.
	Dir string
}

// StdioOptions tunes a subprocess stream. The zero value is usable.
type StdioOptions struct {
	// MaxMessageSize bounds one message read from the process's stdout
	// (0 means DefaultMaxMessageSize).
	MaxMessageSize int
	// Logger receives the process's exit, with its stderr tail, and each
	// stderr line at debug level. Nil means slog.Default().
	Logger *slog.Logger
	// StopWait is how long Close waits for the process to exit after
	// closing its stdin, and again after SIGTERM, before SIGKILL
	// (0 means 2s).
	StopWait time.Duration
}

// Process is a Stream over a server subprocess's stdin and stdout, one
// message per line. It runs the process in its own process group, so that
// stopping it also stops what it started (as `go run` does).
type Process struct {
	cmd     *exec.Cmd
	stdin   *os.File // our end: the process reads the other
	stdout  *os.File // our end: the process writes the other
	r       *lineReader
	wmu     sync.Mutex
	wbuf    []byte
	tail    *stderrTail
	log     *slog.Logger
	stopAft time.Duration

	closing   atomic.Bool   // Close has begun
	exited    chan struct{} // closed when Wait has returned
	readEOF   chan struct{} // closed when Read has seen the end of stdout, or at Close
	eofOnce   sync.Once
	waitDone  chan struct{} // closed when the wait goroutine has finished
	state     *os.ProcessState
	closeOnce sync.Once
}

// Spawn starts cmd and returns a Stream over its stdin and stdout.
func Spawn(cmd Command, opts StdioOptions) (*Process, error) {
	if len(cmd.Argv) == 0 {
		return nil, errors.New("transport: empty command")
	}
	log := loggerOr(opts.Logger)
	stopWait := opts.StopWait
	if stopWait <= 0 {
		stopWait = 2 * time.Second
	}
	env := buildEnv(parentEnv(), cmd.Env, cmd.InheritEnv)
	prog, err := lookPathIn(cmd.Argv[0], env)
	if err != nil {
		return nil, fmt.Errorf("transport: start %q: %w", cmd.Argv[0], err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c := exec.Command(prog, cmd.Argv[1:]...)
	c.Args[0] = cmd.Argv[0]
	c.Env = env
	c.Dir = cmd.Dir
	c.Stdin = inR
	c.Stdout = outW
	tail := newStderrTail(log)
	c.Stderr = tail
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Bound Wait's wait for stderr when something the process started
	// keeps it open after the process itself has exited.
	c.WaitDelay = stopWait
	if err := c.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("transport: start %q: %w", cmd.Argv[0], err)
	}
	// The child has its own copies now.
	inR.Close()
	outW.Close()
	p := &Process{
		cmd:      c,
		stdin:    inW,
		stdout:   outR,
		r:        newLineReader(outR, opts.MaxMessageSize),
		tail:     tail,
		log:      log.With("pid", c.Process.Pid),
		stopAft:  stopWait,
		exited:   make(chan struct{}),
		readEOF:  make(chan struct{}),
		waitDone: make(chan struct{}),
	}
	go p.wait()
	return p, nil
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

func (p *Process) wait() {
	defer close(p.waitDone)
	p.cmd.Wait()
	p.state = p.cmd.ProcessState
	// Whether we stopped it is decided now: a Close that comes once the
	// exit is known (after a Read saw it) does not make it our doing.
	stopped := p.closing.Load()
	close(p.exited)
	info := p.CloseInfo()
	attrs := []any{slog.Int("exit_code", info.ExitCode)}
	if info.Signal != "" {
		attrs = append(attrs, slog.String("signal", info.Signal))
	}
	if info.StderrTail != "" {
		attrs = append(attrs, slog.String("stderr_tail", info.StderrTail))
	}
	switch {
	case stopped:
		p.log.Debug("server process stopped", attrs...)
	case info.ExitCode != 0:
		p.log.Warn("server process exited", attrs...)
	default:
		p.log.Info("server process exited", attrs...)
	}
	// Something the process started may hold its stdout open after it has
	// gone; give the reader a while to drain, then end it.
	select {
	case <-p.readEOF:
	case <-time.After(p.stopAft):
		p.stdout.Close()
	}
}

// Read implements Stream.
func (p *Process) Read() ([]byte, error) {
	if p.closing.Load() {
		return nil, ErrClosed
	}
	msg, err := p.r.next()
	if err == nil {
		return msg, nil
	}
	if p.closing.Load() {
		return nil, ErrClosed
	}
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return nil, err
	}
	p.eofOnce.Do(func() { close(p.readEOF) })
	// Wait a little for the exit, so CloseInfo can say how it ended.
	select {
	case <-p.exited:
		return nil, io.EOF
	case <-time.After(p.stopAft):
	}
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	return nil, err
}

// Write implements Stream. A write the process does not take in time (it
// is not reading its stdin) is abandoned when ctx ends.
func (p *Process) Write(ctx context.Context, msg []byte) error {
	if p.closing.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if ctx.Done() != nil {
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			p.stdin.SetWriteDeadline(time.Unix(1, 0))
			close(fired)
		})
		defer func() {
			if !stop() {
				// The deadline is being set: wait until it is, then clear
				// it for the next write, which would otherwise fail at once.
				<-fired
				p.stdin.SetWriteDeadline(time.Time{})
			}
		}()
	}
	p.wbuf = append(append(p.wbuf[:0], msg...), '\n')
	n, err := p.stdin.Write(p.wbuf)
	if cap(p.wbuf) > 1<<20 {
		p.wbuf = nil
	}
	if err == nil {
		return nil
	}
	if p.closing.Load() {
		return ErrClosed
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		err = ctx.Err()
	}
	if n == 0 && errors.Is(err, syscall.EPIPE) {
		// The process has closed its stdin, or exited: the stream is
		// closed at the far end, and nothing was sent.
		return errors.Join(ErrClosed, err)
	}
	if n > 0 {
		// The framing is lost: the stream is closed from now on, though
		// stopping the process takes a while.
		p.closing.Store(true)
		go p.Close()
		return errors.Join(ErrPartialWrite, err)
	}
	return err
}

// Close implements Stream: it closes the process's stdin, waits for it to
// exit, then sends SIGTERM to its process group, waits again, then SIGKILL.
// It returns once the process has been reaped.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.closing.Store(true)
		// No Read will drain stdout now: the wait goroutine need not wait
		// for one once the process has gone.
		p.eofOnce.Do(func() { close(p.readEOF) })
		p.stdin.Close()
		if !p.waitExit() {
			p.signalGroup(syscall.SIGTERM)
			if !p.waitExit() {
				p.signalGroup(syscall.SIGKILL)
				<-p.exited
			}
		}
		p.stdout.Close()
	})
	<-p.waitDone
	return nil
}

func (p *Process) waitExit() bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(p.stopAft):
		return false
	}
}

func (p *Process) signalGroup(sig syscall.Signal) {
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err != nil {
		p.cmd.Process.Signal(sig)
	}
	p.log.Info("server process did not exit; signalled", "signal", signalName(sig))
}

// CloseInfo implements Stream.
func (p *Process) CloseInfo() CloseInfo {
	select {
	case <-p.exited:
	default:
		return CloseInfo{StderrTail: p.tail.String()}
	}
	info := CloseInfo{Exited: true, ExitCode: p.state.ExitCode(), StderrTail: p.tail.String()}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		info.Signal = signalName(ws.Signal())
	}
	return info
}

// signalName names a signal as an operator writes it ("SIGTERM").
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return s.String()
}
