package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// drain reads lines from l until it fails.
func drain(l *lineReader) ([]string, error) {
	var got []string
	for {
		line, err := l.next()
		if err != nil {
			return got, err
		}
		got = append(got, string(line))
	}
}

func TestLineReaderFraming(t *testing.T) {
	const bufSize = 64 << 10
	long := strings.Repeat("x", bufSize+1000) // longer than bufio's buffer
	tests := []struct {
		name     string
		in       string
		max      int
		want     []string
		wantTooL bool // the reader ends with a TooLargeError, not io.EOF
	}{
		{name: "empty input", in: "", max: 10},
		{name: "LF", in: "a\nbb\n", max: 10, want: []string{"a", "bb"}},
		{name: "CRLF", in: "a\r\nbb\r\n", max: 10, want: []string{"a", "bb"}},
		{name: "mixed endings", in: "a\r\nb\nc\r\n", max: 10, want: []string{"a", "b", "c"}},
		{name: "CR inside a line is kept", in: "a\rb\n", max: 10, want: []string{"a\rb"}},
		{name: "only the last CR is trimmed", in: "a\r\r\n", max: 10, want: []string{"a\r"}},
		{name: "blank lines skipped", in: "\n\na\n\n\r\n \t \nb\n\n", max: 10, want: []string{"a", "b"}},
		{name: "whitespace-only input", in: " \n\t\r\n", max: 10},
		{name: "last line without newline", in: "a\nlast", max: 10, want: []string{"a", "last"}},
		{name: "last line CR without newline", in: "a\r", max: 10, want: []string{"a"}},
		{name: "inner spaces kept", in: "  a b  \n", max: 10, want: []string{"  a b  "}},
		{name: "exactly at the limit", in: "abc\n", max: 3, want: []string{"abc"}},
		{name: "at the limit with CRLF", in: "abc\r\n", max: 3, want: []string{"abc"}},
		{name: "at the limit at EOF", in: "abc", max: 3, want: []string{"abc"}},
		{name: "one byte over", in: "abcd\n", max: 3, wantTooL: true},
		{name: "one byte over at EOF", in: "abcd", max: 3, wantTooL: true},
		{name: "over the limit after good lines", in: "ab\nabcd\nab\n", max: 3, want: []string{"ab"}, wantTooL: true},
		{name: "blank over-limit line is still too large", in: "     \nab\n", max: 3, wantTooL: true},
		{name: "longer than the buffer, under the limit", in: long + "\nnext\n", max: 1 << 20, want: []string{long, "next"}},
		{name: "longer than the buffer, CRLF", in: long + "\r\nnext\r\n", max: 1 << 20, want: []string{long, "next"}},
		{name: "longer than the buffer, at EOF", in: "a\n" + long, max: 1 << 20, want: []string{"a", long}},
		{name: "longer than the buffer, exactly at the limit", in: long + "\n", max: len(long), want: []string{long}},
		{name: "longer than the buffer, at the limit with CRLF", in: long + "\r\n", max: len(long), want: []string{long}},
		{name: "longer than the buffer, at the limit at EOF", in: long, max: len(long), want: []string{long}},
		{name: "longer than the buffer, one byte over", in: long + "y\n", max: len(long), wantTooL: true},
		{name: "longer than the buffer, one byte over with CRLF", in: long + "y\r\n", max: len(long), wantTooL: true},
		{name: "longer than the buffer, one byte over at EOF", in: long + "y", max: len(long), wantTooL: true},
		{name: "many buffers over", in: strings.Repeat("z", 5*bufSize) + "\nafter\n", max: 2*bufSize + 7, wantTooL: true},
	}
	for _, tt := range tests {
		for _, rd := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{
			{"whole", func(r io.Reader) io.Reader { return r }},
			{"one byte at a time", iotest.OneByteReader},
			{"half", iotest.HalfReader},
		} {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				l := newLineReader(rd.wrap(strings.NewReader(tt.in)), tt.max)
				got, err := drain(l)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("lines (-want +got):\n%s", diff)
				}
				if tt.wantTooL {
					if !tooLarge(err, tt.max) {
						t.Fatalf("err = %v, want a *TooLargeError with limit %d", err, tt.max)
					}
					// The reader stays failed: what follows an oversize
					// line is not a message.
					if _, err2 := l.next(); !tooLarge(err2, tt.max) {
						t.Errorf("second next after too large: err = %v, want the same *TooLargeError", err2)
					}
				} else if err != io.EOF {
					t.Fatalf("err = %v, want io.EOF", err)
				}
			})
		}
	}
}

func TestLineReaderDefaultLimit(t *testing.T) {
	for _, max := range []int{0, -1} {
		if got := newLineReader(strings.NewReader(""), max).max; got != DefaultMaxMessageSize {
			t.Errorf("newLineReader(_, %d).max = %d, want %d", max, got, DefaultMaxMessageSize)
		}
	}
	if DefaultMaxMessageSize != 16<<20 {
		t.Errorf("DefaultMaxMessageSize = %d, want 16 MiB", DefaultMaxMessageSize)
	}
}

// A line over the limit is refused once the limit is passed, not after the
// reader has gathered all of it.
func TestLineReaderOverLimitReadsBoundedAmount(t *testing.T) {
	const max = 1 << 20
	src := &countingReader{r: endless('x')}
	l := newLineReader(src, max)
	_, err := l.next()
	if !tooLarge(err, max) {
		t.Fatalf("err = %v, want a *TooLargeError with limit %d", err, max)
	}
	// What was read beyond the limit is at most a few buffer fills.
	if limit := int64(max + 3*(64<<10)); src.n > limit {
		t.Errorf("read %d bytes of an endless line before refusing it; want at most %d", src.n, limit)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// endless is a reader of the one byte, forever.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

func TestLineReaderReturnsLinesCopied(t *testing.T) {
	l := newLineReader(strings.NewReader("first\nsecond\n"), 0)
	a, err := l.next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.next(); err != nil {
		t.Fatal(err)
	}
	// bufio reuses its buffer; the first line must not have changed.
	if string(a) != "first" {
		t.Errorf("first line changed to %q after the next read", a)
	}
}

func TestLineReaderPassesOnReadError(t *testing.T) {
	boom := errors.New("boom")
	l := newLineReader(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)), 0)
	got, err := drain(l)
	if diff := cmp.Diff([]string{"a"}, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want %v", err, boom)
	}
}

func TestTooLargeErrorText(t *testing.T) {
	err := &TooLargeError{Limit: 10, Size: 11}
	if got, want := err.Error(), "transport: message of at least 11 bytes exceeds the limit of 10 bytes"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// refLines is what lineReader should produce, from the whole input at once:
// the lines, and whether it then ends with a TooLargeError.
func refLines(data []byte, max int) ([]string, bool) {
	parts := bytes.Split(data, []byte("\n"))
	if len(parts[len(parts)-1]) == 0 {
		parts = parts[:len(parts)-1] // a final newline, or no input
	}
	var lines []string
	for _, p := range parts {
		p = bytes.TrimSuffix(p, []byte("\r"))
		if len(p) > max {
			return lines, true
		}
		if len(bytes.TrimSpace(p)) > 0 {
			lines = append(lines, string(p))
		}
	}
	return lines, false
}

func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nb\n"), uint8(10), uint8(0))
	f.Add([]byte("a\r\nb\r\n\r\n"), uint8(1), uint8(1))
	f.Add([]byte("\n\n\n"), uint8(0), uint8(2))
	f.Add([]byte("no newline at all"), uint8(5), uint8(0))
	f.Add([]byte("exactly\nexactly!\n"), uint8(6), uint8(1))
	f.Add([]byte(strings.Repeat("x", 100)+"\r\n"+strings.Repeat("y", 40)), uint8(99), uint8(1))
	f.Add([]byte("\r\r\n\r"), uint8(3), uint8(2))
	f.Add([]byte(" \u00a0\u0085\n x \n"), uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, limit, mode uint8) {
		max := int(limit)%64 + 1
		var r io.Reader = bytes.NewReader(data)
		if mode%2 == 1 {
			r = iotest.OneByteReader(r)
		}
		l := newLineReader(r, max)
		if mode%3 != 0 {
			// The smallest buffer bufio allows, so that lines longer than
			// it take the gathering path.
			l = &lineReader{br: bufio.NewReaderSize(r, 16), max: max}
		}
		var got []string
		var err error
		for range len(data) + 2 {
			var line []byte
			line, err = l.next()
			if err != nil {
				break
			}
			if bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line %q contains a newline", line)
			}
			if len(line) > max {
				t.Fatalf("line of %d bytes exceeds the limit of %d", len(line), max)
			}
			got = append(got, string(line))
		}
		if err == nil {
			t.Fatalf("more lines than the input has bytes")
		}
		want, wantTooL := refLines(data, max)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lines of %q, limit %d (-want +got):\n%s", data, max, diff)
		}
		switch {
		case wantTooL && !tooLarge(err, max):
			t.Errorf("err = %v, want a *TooLargeError with limit %d", err, max)
		case !wantTooL && err != io.EOF:
			t.Errorf("err = %v, want io.EOF", err)
		}
	})
}

// recordingWriter records each Write call; it fails after failAfter calls
// (if positive), having written only partN bytes of that call.
type recordingWriter struct {
	mu        sync.Mutex
	writes    []string
	failAfter int
	partN     int
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failAfter > 0 && len(w.writes) >= w.failAfter {
		return w.partN, errors.New("writer broke")
	}
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

type countingCloser struct {
	mu  sync.Mutex
	n   int
	err error
}

func (c *countingCloser) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.err
}

func (c *countingCloser) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func TestLineStreamWriteOneCallPerMessage(t *testing.T) {
	w := &recordingWriter{}
	s := NewLineStream(strings.NewReader(""), w, nil, 0)
	for _, msg := range []string{`{"a":1}`, `{"b":2}`, ``} {
		if err := s.Write(context.Background(), []byte(msg)); err != nil {
			t.Fatalf("Write(%q): %v", msg, err)
		}
	}
	if diff := cmp.Diff([]string{"{\"a\":1}\n", "{\"b\":2}\n", "\n"}, w.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func TestLineStreamConcurrentWritesDoNotInterleave(t *testing.T) {
	var buf bytes.Buffer
	s := NewLineStream(strings.NewReader(""), &buf, nil, 0)
	const writers, each = 8, 50
	want := map[string]bool{}
	for g := range writers {
		for i := range each {
			want[fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat(string(rune('a'+g)), 2000))] = true
		}
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				msg := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat(string(rune('a'+g)), 2000))
				if err := s.Write(context.Background(), []byte(msg)); err != nil {
					t.Errorf("Write: %v", err)
				}
			}
		})
	}
	wg.Wait()
	got, err := drain(newLineReader(&buf, 0))
	if err != io.EOF {
		t.Fatalf("reading back: %v", err)
	}
	if len(got) != writers*each {
		t.Fatalf("read back %d lines, want %d", len(got), writers*each)
	}
	for _, line := range got {
		if !want[line] {
			t.Fatalf("line %.40q... is not one of the messages written: writes interleaved", line)
		}
		delete(want, line)
	}
}

func TestLineStreamReadAndEOF(t *testing.T) {
	s := NewLineStream(strings.NewReader("one\r\n\ntwo"), io.Discard, nil, 0)
	got, err := readUntilErr(t, s, testTimeout)
	if diff := cmp.Diff([]string{"one", "two"}, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if !errors.Is(err, io.EOF) {
		t.Errorf("err = %v, want io.EOF", err)
	}
	if (s.CloseInfo() != CloseInfo{}) {
		t.Errorf("CloseInfo() = %+v, want zero", s.CloseInfo())
	}
}

func TestLineStreamTooLarge(t *testing.T) {
	s := NewLineStream(strings.NewReader("ok\n"+strings.Repeat("x", 11)+"\nafter\n"), io.Discard, nil, 10)
	got, err := readUntilErr(t, s, testTimeout)
	if diff := cmp.Diff([]string{"ok"}, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if !tooLarge(err, 10) {
		t.Errorf("err = %v, want a *TooLargeError with limit 10", err)
	}
}

func TestLineStreamClose(t *testing.T) {
	closer := &countingCloser{err: errors.New("close failed")}
	w := &recordingWriter{}
	s := NewLineStream(strings.NewReader("a\nb\nc\n"), w, closer, 0)
	if msg, err := s.Read(); err != nil || string(msg) != "a" {
		t.Fatalf("Read = %q, %v; want \"a\"", msg, err)
	}
	if err := s.Close(); err == nil || err.Error() != "close failed" {
		t.Errorf("Close() = %v, want the closer's error", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	if n := closer.count(); n != 1 {
		t.Errorf("closer called %d times, want 1", n)
	}
	// Lines are still buffered, but the stream is closed.
	if msg, err := s.Read(); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close = %q, %v; want ErrClosed", msg, err)
	}
	if err := s.Write(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if len(w.writes) != 0 {
		t.Errorf("Write after Close wrote %q", w.writes)
	}
}

func TestLineStreamCloseUnblocksRead(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	s := NewLineStream(pr, io.Discard, pr, 0)
	done := make(chan error, 1)
	go func() {
		_, err := s.Read()
		done <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Read blocked across Close = %v, want ErrClosed", err)
	}
}

func TestLineStreamWriteCanceledContext(t *testing.T) {
	w := &recordingWriter{}
	s := NewLineStream(strings.NewReader(""), w, nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Write(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a canceled context = %v, want context.Canceled", err)
	}
	if len(w.writes) != 0 {
		t.Errorf("wrote %q with a canceled context", w.writes)
	}
}

func TestLineStreamWriteFailure(t *testing.T) {
	t.Run("nothing written", func(t *testing.T) {
		closer := &countingCloser{}
		s := NewLineStream(strings.NewReader(""), &recordingWriter{failAfter: 1}, closer, 0)
		if err := s.Write(context.Background(), []byte("first")); err != nil {
			t.Fatal(err)
		}
		err := s.Write(context.Background(), []byte("second"))
		if err == nil || errors.Is(err, ErrPartialWrite) {
			t.Fatalf("Write = %v, want a plain error", err)
		}
		if closer.count() != 0 {
			t.Errorf("a write that sent nothing closed the stream")
		}
	})
	t.Run("part written", func(t *testing.T) {
		closer := &countingCloser{}
		s := NewLineStream(strings.NewReader(""), &recordingWriter{failAfter: 1, partN: 3}, closer, 0)
		if err := s.Write(context.Background(), []byte("first")); err != nil {
			t.Fatal(err)
		}
		err := s.Write(context.Background(), []byte("second"))
		if !errors.Is(err, ErrPartialWrite) {
			t.Fatalf("Write = %v, want ErrPartialWrite", err)
		}
		if closer.count() != 1 {
			t.Errorf("closer called %d times after a partial write, want 1", closer.count())
		}
		if err := s.Write(context.Background(), []byte("third")); !errors.Is(err, ErrClosed) {
			t.Errorf("Write after a partial write = %v, want ErrClosed", err)
		}
	})
}

// scriptedReader returns its steps in turn: a chunk of bytes, or an error.
type scriptedReader struct{ steps []any }

func (r *scriptedReader) Read(b []byte) (int, error) {
	if len(r.steps) == 0 {
		return 0, io.EOF
	}
	step := r.steps[0]
	r.steps = r.steps[1:]
	if err, ok := step.(error); ok {
		return 0, err
	}
	s := step.(string)
	if len(s) > len(b) {
		r.steps = append([]any{s[len(b):]}, r.steps...)
		s = s[:len(b)]
	}
	return copy(b, s), nil
}

// A read that fails part way through a line (a read deadline) loses
// nothing: the next call goes on from the part read, for a short line and
// for one longer than the buffer.
func TestLineReaderKeepsALineAFailedReadBrokeOff(t *testing.T) {
	errStop := errors.New("deadline")
	long := strings.Repeat("y", 100<<10)
	r := &scriptedReader{steps: []any{
		"first\nsec", errStop, "ond\n",
		long[:70<<10], errStop, long[70<<10:], errStop, errStop, "\nlast",
	}}
	l := newLineReader(r, 1<<20)
	var got []string
	for {
		line, err := l.next()
		if errors.Is(err, errStop) {
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("next = %v", err)
			}
			break
		}
		got = append(got, string(line))
	}
	if diff := cmp.Diff([]string{"first", "second", long, "last"}, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// The limit holds across failed reads: a line gathered in parts is
// refused once it passes it.
func TestLineReaderLimitAcrossFailedReads(t *testing.T) {
	errStop := errors.New("deadline")
	r := &scriptedReader{steps: []any{"abc", errStop, "def", errStop, "ghi\n"}}
	l := newLineReader(r, 5)
	var err error
	for range 5 {
		if _, err = l.next(); !errors.Is(err, errStop) {
			break
		}
	}
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("next = %v, want a TooLargeError", err)
	}
}
