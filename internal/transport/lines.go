package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
)

// lineReader splits a byte stream into newline-delimited messages, each at
// most max bytes (not counting the newline or a carriage return before it).
// Blank lines are skipped. A last line without a newline is still a message.
// A read that fails part way through a line (a read deadline that passed)
// loses nothing: the part read is kept, and the next call goes on from it.
type lineReader struct {
	br  *bufio.Reader
	max int
	// partial is the start of a line a failed read broke off.
	partial []byte
	// tooLarge, once set, is returned by every later call: after an
	// oversize line the reader may be part way through it, and what follows
	// is not a message.
	tooLarge *TooLargeError
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = DefaultMaxMessageSize
	}
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next non-blank line, copied.
func (l *lineReader) next() ([]byte, error) {
	if l.tooLarge != nil {
		return nil, l.tooLarge
	}
	for {
		line, err := l.readLine()
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
		if err != nil {
			var tl *TooLargeError
			if errors.As(err, &tl) {
				l.tooLarge = tl
			}
			return nil, err
		}
	}
}

// readLine reads one line. On error it may still return a final unterminated
// line, with the error deferred to the next call by bufio itself.
func (l *lineReader) readLine() ([]byte, error) {
	chunk, err := l.br.ReadSlice('\n')
	if l.partial == nil && (err == nil || (err == io.EOF && len(chunk) > 0)) {
		if len(trimEOL(chunk)) > l.max {
			return nil, &TooLargeError{Limit: l.max, Size: len(trimEOL(chunk))}
		}
		return bytes.Clone(trimEOL(chunk)), nil
	}
	// A line longer than the buffer, or one a failed read broke off:
	// gather it, refusing it once it passes the limit rather than holding
	// an unbounded amount.
	buf := append(l.partial, chunk...)
	l.partial = nil
	for {
		if len(buf) > l.max+2 {
			return nil, &TooLargeError{Limit: l.max, Size: len(buf)}
		}
		switch {
		case err == nil, err == io.EOF && len(buf) > 0:
			line := trimEOL(buf)
			if len(line) > l.max {
				return nil, &TooLargeError{Limit: l.max, Size: len(line)}
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil, err
		default:
			// bufio has handed over what it read of the line; keep it.
			if len(buf) > 0 {
				l.partial = buf
			}
			return nil, err
		}
		chunk, err = l.br.ReadSlice('\n')
		buf = append(buf, chunk...)
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// lineWriter writes one message per line, in one Write call per message so
// that concurrent messages never interleave. Writers take turns through a
// one-slot semaphore, so that one waiting for its turn can give up.
type lineWriter struct {
	sem chan struct{} // held by the one write under way
	w   io.Writer
	buf []byte // guarded by sem
}

func newLineWriter(w io.Writer) lineWriter {
	return lineWriter{sem: make(chan struct{}, 1), w: w}
}

// write waits for its turn until ctx ends (returning ctx.Err()) or closed
// is closed (returning ErrClosed), then writes msg and a newline in one
// Write call, which nothing can abandon once begun.
func (lw *lineWriter) write(ctx context.Context, closed <-chan struct{}, msg []byte) (int, error) {
	select {
	case lw.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-closed:
		return 0, ErrClosed
	}
	defer func() { <-lw.sem }()
	// The turn may have come as the wait ended some other way.
	select {
	case <-closed:
		return 0, ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	lw.buf = append(append(lw.buf[:0], msg...), '\n')
	n, err := lw.w.Write(lw.buf)
	if cap(lw.buf) > 1<<20 {
		lw.buf = nil // do not pin a large buffer after one big message
	}
	return n, err
}

// LineStream is a Stream of newline-delimited messages over a reader and a
// writer, such as a server's own stdin and stdout.
type LineStream struct {
	r      *lineReader
	w      lineWriter
	closer io.Closer

	closeOnce sync.Once
	closed    chan struct{}
}

// NewLineStream returns a Stream that reads messages from r and writes them
// to w, one per line. maxSize bounds one message (0 means
// DefaultMaxMessageSize). Close calls closer, if not nil.
func NewLineStream(r io.Reader, w io.Writer, closer io.Closer, maxSize int) *LineStream {
	return &LineStream{
		r:      newLineReader(r, maxSize),
		w:      newLineWriter(w),
		closer: closer,
		closed: make(chan struct{}),
	}
}

// Read implements Stream.
func (s *LineStream) Read() ([]byte, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	msg, err := s.r.next()
	if err != nil && s.isClosed() {
		return nil, ErrClosed
	}
	return msg, err
}

// Write implements Stream. Writes take turns, one Write call on the
// underlying writer per message; a Write waiting for its turn gives up when
// ctx ends (returning ctx.Err(), nothing written) or when the stream closes
// (ErrClosed). Once the write has begun ctx is not consulted: an io.Writer
// offers no way to abandon it, so the write lasts as long as the writer
// blocks (Close does not end it either, unless closing the closer makes
// the writer fail), and this stream never returns ErrStalled.
func (s *LineStream) Write(ctx context.Context, msg []byte) error {
	if s.isClosed() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n, err := s.w.write(ctx, s.closed, msg)
	if err != nil && n > 0 {
		s.Close()
		return errors.Join(ErrPartialWrite, err)
	}
	return err
}

// Close implements Stream.
func (s *LineStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		if s.closer != nil {
			err = s.closer.Close()
		}
	})
	return err
}

// CloseInfo implements Stream; a line stream knows nothing of how it ended.
func (s *LineStream) CloseInfo() CloseInfo { return CloseInfo{} }

func (s *LineStream) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}
