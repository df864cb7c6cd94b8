package transport

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"
	"time"
)

// Pipe returns two connected in-memory Streams: what one writes, the other
// reads, message by message. It is for tests and for running a server in the
// same process as its host. maxSize bounds one message as the reading side
// sees it (0 means DefaultMaxMessageSize). Closing either end ends both: the
// other end's Read then reports io.EOF, as a peer's close would.
func Pipe(maxSize int) (Stream, Stream) {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	st := &pipeState{done: make(chan struct{})}
	ab := make(chan []byte, 64)
	ba := make(chan []byte, 64)
	a := &pipeEnd{st: st, in: ba, out: ab, max: maxSize}
	b := &pipeEnd{st: st, in: ab, out: ba, max: maxSize}
	return a, b
}

type pipeState struct {
	once sync.Once
	done chan struct{}
}

type pipeEnd struct {
	st       *pipeState
	in, out  chan []byte
	max      int
	mu       sync.Mutex
	closedMe bool // this end called Close
	dl       readDeadline
}

func (p *pipeEnd) Read() ([]byte, error) {
	if p.closedByMe() {
		return nil, ErrClosed
	}
	// Prefer a waiting message to noticing the close: what was written
	// before the peer's close is drained, as a socket would.
	select {
	case msg := <-p.in:
		return p.check(msg)
	default:
	}
	select {
	case msg := <-p.in:
		return p.check(msg)
	case <-p.st.done:
	case <-p.dl.passed():
		return nil, os.ErrDeadlineExceeded
	}
	if p.closedByMe() {
		return nil, ErrClosed
	}
	select {
	case msg := <-p.in:
		return p.check(msg)
	default:
		return nil, io.EOF
	}
}

func (p *pipeEnd) check(msg []byte) ([]byte, error) {
	if len(msg) > p.max {
		p.Close()
		return nil, &TooLargeError{Limit: p.max, Size: len(msg)}
	}
	return msg, nil
}

func (p *pipeEnd) Write(ctx context.Context, msg []byte) error {
	select {
	case <-p.st.done:
		return ErrClosed
	default:
	}
	select {
	case p.out <- bytes.Clone(msg):
		return nil
	case <-p.st.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipeEnd) Close() error {
	p.mu.Lock()
	p.closedMe = true
	p.mu.Unlock()
	p.st.once.Do(func() { close(p.st.done) })
	return nil
}

func (p *pipeEnd) closedByMe() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closedMe
}

func (p *pipeEnd) CloseInfo() CloseInfo { return CloseInfo{} }

// SetReadDeadline implements ReadDeadliner. A message already waiting is
// read even after the deadline has passed.
func (p *pipeEnd) SetReadDeadline(t time.Time) error {
	p.dl.set(t)
	return nil
}
