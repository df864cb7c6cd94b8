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

	"github.com/mcpl-go/mcpl/internal/procs"
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
	// closing its stdin, and again for its process group to empty after
	// SIGTERM, before SIGKILL (0 means 2s). It also bounds how long the
	// end of the process's stderr and stdout is waited for once it has
	// exited, when something it started holds them open.
	StopWait time.Duration
}

// Process is a Stream over a server subprocess's stdin and stdout, one
// message per line. It runs the process in its own process group, so that
// stopping it also stops what it started (as `go run` does); a process that
// leaves the group (setsid, setpgid) escapes that. On Linux the process
// also gets SIGKILL from the kernel when this program dies without closing
// it (kill -9, a crash); what it started does not (spawn_linux.go).
type Process struct {
	cmd     *exec.Cmd
	pgid    int      // the process group: the leader's pid
	stdin   *os.File // our end: the process reads the other
	stdout  *os.File // our end: the process writes the other
	stderr  *os.File // our end: the process writes the other
	r       *lineReader
	wsem    chan struct{} // held by the one Write under way
	wbuf    []byte        // guarded by wsem
	pw      *pipeWrite    // guarded by wsem
	tail    *stderrTail
	log     *slog.Logger
	stopAft time.Duration

	closing    atomic.Bool   // Close has begun, or a partial write closed the stream
	closed     chan struct{} // closed when closing is first set
	closedOnce sync.Once
	reaped     chan struct{} // closed when the leader has exited and been reaped
	stderrDone chan struct{} // closed when the copy of stderr has ended
	exited     chan struct{} // closed when the exit and the stderr tail are known
	readEOF    chan struct{} // closed when Read has seen the end of stdout, or at Close
	dl         readDeadline  // SetReadDeadline's, for Read's wait for the exit
	// ownEnd: the process was seen going before Close (the end of its
	// stdout, or a broken pipe on its stdin), so its exit is its own even
	// when Close comes before it is reaped.
	ownEnd    atomic.Bool
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
	// Three pipes; [2*i] is the read end, [2*i+1] the write end.
	var ends [6]*os.File
	closeAll := func() {
		for _, f := range ends {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := range 3 {
		if ends[2*i], ends[2*i+1], err = os.Pipe(); err != nil {
			closeAll()
			return nil, err
		}
	}
	inR, inW, outR, outW, errR, errW := ends[0], ends[1], ends[2], ends[3], ends[4], ends[5]
	pw, err := newPipeWrite(inW)
	if err != nil {
		closeAll()
		return nil, err
	}
	c := exec.Command(prog, cmd.Argv[1:]...)
	c.Args[0] = cmd.Argv[0]
	c.Env = env
	c.Dir = cmd.Dir
	// All three are files, so Cmd starts no copying goroutine of its own
	// and Wait returns as soon as the process has been reaped: the wait
	// goroutine tells the leader's exit apart from the end of its stderr,
	// which something it started may hold open.
	c.Stdin = inR
	c.Stdout = outW
	c.Stderr = errW
	// Its own process group; on Linux a parent-death signal too
	// (spawn_linux.go).
	c.SysProcAttr = sysProcAttr()
	tail := newStderrTail(log)

	// KillAll must not miss a process started while it runs.
	groups.start.RLock()
	err = startProcess(c)
	if err != nil {
		groups.start.RUnlock()
		closeAll()
		return nil, fmt.Errorf("transport: start %q: %w", cmd.Argv[0], err)
	}
	p := &Process{
		cmd:        c,
		pgid:       c.Process.Pid,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		r:          newLineReader(outR, opts.MaxMessageSize),
		wsem:       make(chan struct{}, 1),
		tail:       tail,
		log:        log.With("pid", c.Process.Pid),
		stopAft:    stopWait,
		pw:         pw,
		closed:     make(chan struct{}),
		reaped:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
		readEOF:    make(chan struct{}),
		waitDone:   make(chan struct{}),
	}
	register(p)
	groups.start.RUnlock()
	// The child has its own copies now.
	inR.Close()
	outW.Close()
	errW.Close()
	go func() {
		defer close(p.stderrDone)
		io.Copy(tail, errR)
	}()
	go p.wait()
	return p, nil
}

// Pid returns the process id. It is also the id of the process group.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

func (p *Process) wait() {
	defer close(p.waitDone)
	p.cmd.Wait()
	processReaped()
	// Whether we stopped it is decided now: a Close that comes once the
	// exit is known (after a Read saw it) does not make it our doing, nor
	// one that comes after a read or a write found it going (a server that
	// exits at once fails the first write, and its connection is closed
	// before it is reaped): its exit is then reported as its own, with its
	// stderr, not as a stop.
	stopped := p.closing.Load() && !p.ownEnd.Load()
	close(p.reaped)
	// Something the process started may hold its stderr open after it has
	// gone; give the copy a while to finish the tail, then end it.
	t := time.NewTimer(p.stopAft)
	select {
	case <-p.stderrDone:
	case <-t.C:
	}
	t.Stop()
	p.stderr.Close()
	<-p.stderrDone
	p.state = p.cmd.ProcessState
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
	// Likewise for stdout: give the reader a while to drain, then end it.
	t = time.NewTimer(p.stopAft)
	select {
	case <-p.readEOF:
	case <-t.C:
		p.stdout.Close()
	}
	t.Stop()
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
	if errors.Is(err, io.EOF) && !p.closing.Load() {
		p.ownEnd.Store(true)
	}
	if p.closing.Load() {
		return nil, ErrClosed
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// SetReadDeadline's deadline, not the end: nothing is lost.
		return nil, err
	}
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return nil, err
	}
	p.eofOnce.Do(func() { close(p.readEOF) })
	// Wait a little for the exit, so CloseInfo can say how it ended.
	t := time.NewTimer(p.stopAft)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil, io.EOF
	case <-t.C:
	case <-p.dl.passed():
		// The next Read sees the end again, and waits again.
		return nil, os.ErrDeadlineExceeded
	}
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	return nil, err
}

// SetReadDeadline implements ReadDeadliner: once t has passed, a Read under
// way or the next returns an error wrapping os.ErrDeadlineExceeded, and
// the Read after it goes on where it stopped (a line read in part is
// kept). The zero time means none. It cuts short Read's wait for the
// process to exit after the end of its stdout, too.
func (p *Process) SetReadDeadline(t time.Time) error {
	p.dl.set(t)
	return p.stdout.SetReadDeadline(t)
}

// Write implements Stream. Writes take turns, one whole message each; a
// Write waiting for its turn gives up when ctx ends (returning ctx.Err(),
// nothing sent) or when the stream closes (ErrClosed). A write under way
// that the process does not take in time (it is not reading its stdin) is
// abandoned when ctx ends: with an error wrapping ErrStalled and ctx.Err()
// if the process took none of it, the stream staying open; with one
// wrapping ErrPartialWrite and ctx.Err() if it took part, the stream
// closing itself.
func (p *Process) Write(ctx context.Context, msg []byte) error {
	return p.WriteBy(ctx, msg, time.Time{})
}

// WriteBy is Write with a deadline of its own besides ctx's (zero for
// none): when it passes first, the write ends as when ctx's deadline
// passes, its error wrapping context.DeadlineExceeded. The deadline is the
// pipe's own (a timer of the runtime's poller), so a write with one costs
// no context and no callback; only a ctx that can be cancelled gets one.
func (p *Process) WriteBy(ctx context.Context, msg []byte, deadline time.Time) error {
	if p.closing.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case p.wsem <- struct{}{}:
	default:
		if err := p.awaitTurn(ctx, deadline); err != nil {
			return err
		}
	}
	defer func() { <-p.wsem }()
	if p.closing.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !deadline.IsZero() {
		if !time.Now().Before(deadline) {
			return context.DeadlineExceeded
		}
		p.stdin.SetWriteDeadline(deadline)
		defer p.stdin.SetWriteDeadline(time.Time{})
	}
	p.wbuf = append(append(p.wbuf[:0], msg...), '\n')
	n, err := p.pw.write(ctx, p.wbuf)
	if cap(p.wbuf) > 1<<20 {
		p.wbuf = nil
	}
	if err == nil {
		return nil
	}
	if p.closing.Load() {
		return ErrClosed
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// ctx's end, or the write's own deadline.
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		} else {
			err = context.DeadlineExceeded
		}
		if n == 0 {
			// The process took none of it: nothing was sent and the
			// framing holds. Whether to give up on a process that does not
			// read is for the caller to say.
			return errors.Join(ErrStalled, err)
		}
	}
	if n == 0 && errors.Is(err, syscall.EPIPE) {
		// The process has closed its stdin, or exited: the stream is
		// closed at the far end, and nothing was sent.
		p.ownEnd.Store(true)
		return errors.Join(ErrClosed, err)
	}
	if n > 0 {
		// The framing is lost: the stream is closed from now on, though
		// stopping the process takes a while.
		p.markClosing()
		go p.Close()
		return errors.Join(ErrPartialWrite, err)
	}
	return err
}

// awaitTurn waits for the write's turn, until ctx ends, the deadline
// passes or the stream closes; only a write that has to wait pays for a
// timer.
func (p *Process) awaitTurn(ctx context.Context, deadline time.Time) error {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case p.wsem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return context.DeadlineExceeded
	case <-p.closed:
		return ErrClosed
	}
}

// markClosing marks the stream closed, for Read and Write and for the
// writes waiting their turn.
func (p *Process) markClosing() {
	p.closing.Store(true)
	p.closedOnce.Do(func() { close(p.closed) })
}

// Close implements Stream: it stops the process and everything left in its
// process group. It closes the process's stdin and waits up to StopWait for
// the process to exit; then, if any process is left in the group (the
// server still running, or something it started), it sends SIGTERM to the
// whole group and waits up to StopWait for the group to empty; then it
// sends SIGKILL to the group. It returns once the process has been reaped
// and the group has been signalled as needed; a process that exits on
// stdin EOF and leaves nothing behind is not kept waiting for. A process
// that exited on its own before Close is treated the same way: what it
// left in its group is stopped now.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.markClosing()
		// No Read will drain stdout now: the wait goroutine need not wait
		// for one once the process has gone.
		p.eofOnce.Do(func() { close(p.readEOF) })
		p.stdin.Close()
		gone := p.stopGroup()
		p.stdout.Close()
		if gone {
			unregister(p)
		}
	})
	<-p.waitDone
	return nil
}

// groupPoll is how often Close looks whether the process group has
// emptied: there is no event for it.
const groupPoll = 20 * time.Millisecond

// stopGroup stops the leader and its group, as Close says, and reports
// whether the group was seen empty at the end (it may not be if a member
// cannot be signalled or is stuck in the kernel).
//
// On pgid reuse: the group's id is the leader's pid. While the leader is
// unreaped, or while any member remains, the kernel does not hand that id
// out again, so kill(-pgid) reaches only the group we started. Once the
// leader is reaped and the last member has gone, the id is free, and in
// theory a new process could take it and lead a group of its own between
// our seeing a member and our signal. We signal only a group we started,
// and only just after seeing members in it, which leaves that window
// microseconds wide.
func (p *Process) stopGroup() bool {
	t := time.NewTimer(p.stopAft)
	select {
	case <-p.reaped:
	case <-t.C:
	}
	t.Stop()
	if p.groupGone() {
		return true
	}
	p.signalGroup(syscall.SIGTERM)
	if p.awaitGroupGone(p.stopAft) {
		return true
	}
	p.signalGroup(syscall.SIGKILL)
	// The leader and the members die at once, unless one is stuck in the
	// kernel: bound the wait for them.
	return p.awaitGroupGone(p.stopAft)
}

// groupGone reports whether the leader has been reaped and no other
// process of its group is alive.
func (p *Process) groupGone() bool {
	return isDone(p.reaped) && !procs.GroupAlive(p.pgid)
}

// awaitGroupGone waits up to d for groupGone.
func (p *Process) awaitGroupGone(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	reaped := p.reaped
	for {
		if p.groupGone() {
			return true
		}
		select {
		case <-reaped:
			reaped = nil // look at once, then poll
		case <-tick.C:
		case <-deadline.C:
			return p.groupGone()
		}
	}
}

// signalGroup sends sig to the process group and, while it is unreaped,
// to the leader itself: a leader may have moved itself into another group
// and left members behind in its own.
func (p *Process) signalGroup(sig syscall.Signal) {
	leaderGone := isDone(p.reaped)
	err := syscall.Kill(-p.pgid, sig)
	if !leaderGone {
		if lerr := p.cmd.Process.Signal(sig); lerr == nil {
			err = nil
		}
	}
	if err != nil {
		return // nothing was left to signal
	}
	if leaderGone {
		p.log.Info("server process exited but left its process group running; signalled", "signal", SignalName(sig))
	} else {
		p.log.Info("server process did not exit; signalled", "signal", SignalName(sig))
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// groups is the registry of process groups Spawn has started and Close
// has not yet seen empty, for KillAll.
var groups struct {
	// start is held for reading across each start and its registering,
	// and for writing by KillAll, so that KillAll misses no process whose
	// start is under way.
	start sync.RWMutex
	mu    sync.Mutex
	m     map[*Process]struct{}
}

func register(p *Process) {
	groups.mu.Lock()
	defer groups.mu.Unlock()
	if groups.m == nil {
		groups.m = make(map[*Process]struct{})
	}
	groups.m[p] = struct{}{}
}

func unregister(p *Process) {
	groups.mu.Lock()
	defer groups.mu.Unlock()
	delete(groups.m, p)
}

// KillAll sends SIGKILL to every process group Spawn has started in this
// process that has not finished closing: each server and whatever it
// started that is still in its group. It is for an emergency exit, such as
// a command-line program's second interrupt: it returns once the signals
// are sent, without waiting for anything to exit or for Close. The streams
// then end as they do when a server dies: reads report the end, and Close
// still reaps (at once, the groups being empty). It is safe to call at any
// time, from any goroutine, any number of times; a Spawn under way when it
// is called is waited for and its process killed too, and processes
// started after it returns are not affected.
func KillAll() {
	groups.start.Lock()
	defer groups.start.Unlock()
	groups.mu.Lock()
	defer groups.mu.Unlock()
	for p := range groups.m {
		p.kill()
	}
}

// kill sends SIGKILL to the process group, for KillAll.
func (p *Process) kill() {
	leaderGone := isDone(p.reaped)
	if leaderGone {
		// The group's id is ours only while a member remains (see
		// stopGroup).
		if err := syscall.Kill(-p.pgid, 0); err != nil {
			return
		}
	}
	err := syscall.Kill(-p.pgid, syscall.SIGKILL)
	if err != nil && !leaderGone {
		err = p.cmd.Process.Kill()
	}
	if err == nil {
		p.log.Info("server process group killed", "signal", SignalName(syscall.SIGKILL))
	}
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
		info.Signal = SignalName(ws.Signal())
	}
	return info
}

// SignalName names a signal as an operator writes it ("SIGTERM").
func SignalName(s syscall.Signal) string {
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
