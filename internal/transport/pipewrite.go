package transport

import (
	"context"
	"io"
	"os"
	"syscall"
	"time"
)

// pipeWrite writes to a subprocess's stdin without a context callback per
// write. os.File.Write would have to be armed for cancellation before it
// starts (a context.AfterFunc that sets a past deadline: four allocations
// and a registration, every write); this writes through the file's raw
// connection instead and arms the callback only once the pipe is full,
// when the write has to wait. A write that finds room, as nearly every
// one does, costs the write(2) and nothing else.
//
// A Process has one, used by the one write under way (writes take turns),
// so its state needs no lock and a write allocates nothing.
type pipeWrite struct {
	file *os.File
	rc   syscall.RawConn
	step func(fd uintptr) bool // w.writeStep, made once

	// The write under way.
	ctx   context.Context
	b     []byte
	n     int
	err   error
	stop  func() bool   // the ctx's callback, once armed
	fired chan struct{} // closed once the callback has set a past deadline
}

func newPipeWrite(f *os.File) (*pipeWrite, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &pipeWrite{file: f, rc: rc}
	w.step = w.writeStep
	return w, nil
}

// write writes all of b unless ctx ends, the file's write deadline passes
// or the file closes first; n is how much of b was written.
func (w *pipeWrite) write(ctx context.Context, b []byte) (n int, err error) {
	w.ctx, w.b, w.n, w.err = ctx, b, 0, nil
	err = w.rc.Write(w.step)
	if w.stop != nil {
		if !w.stop() {
			// The callback has set, or is setting, a past deadline: wait
			// until it has, then clear it for the next write, which
			// would otherwise fail at once.
			<-w.fired
			w.file.SetWriteDeadline(time.Time{})
		}
		w.stop, w.fired = nil, nil
	}
	n, w.ctx, w.b = w.n, nil, nil
	if w.err != nil {
		return n, w.err
	}
	return n, err
}

// writeStep is the raw connection's callback: it writes what is left, and
// reports false (wait until the pipe can take more) when it is full.
func (w *pipeWrite) writeStep(fd uintptr) bool {
	for w.n < len(w.b) {
		m, err := syscall.Write(int(fd), w.b[w.n:])
		if m > 0 {
			w.n += m
		}
		switch err {
		case nil:
			if m <= 0 {
				w.err = io.ErrShortWrite
				return true
			}
		case syscall.EINTR:
		case syscall.EAGAIN:
			w.arm()
			return false
		default:
			w.err = os.NewSyscallError("write", err)
			return true
		}
	}
	return true
}

// arm makes the write's context end it while it waits: its end sets a
// past write deadline, which wakes the wait.
func (w *pipeWrite) arm() {
	if w.stop != nil || w.ctx.Done() == nil {
		return
	}
	f, fired := w.file, make(chan struct{})
	w.fired = fired
	w.stop = context.AfterFunc(w.ctx, func() {
		f.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
}
