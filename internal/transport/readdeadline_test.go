package transport_test

import (
	"errors"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// A read cut short by its deadline part way through a line loses none of
// it: the next Read returns the whole line. The process writes half a line
// and waits; the deadline passes (the half has most likely been read by
// then; lines_test pins the case exactly); then it writes the rest.
func TestProcessReadDeadlineKeepsThePartRead(t *testing.T) {
	t.Parallel()
	p := spawn(t, sh(`printf '{"a":'; read go; printf '1}\n'; read end`), transport.StdioOptions{})
	if err := p.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatalf("SetReadDeadline: %v", err)
	}
	if msg, err := p.Read(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %q, %v; want the deadline's error", msg, err)
	}
	if err := p.Write(testCtx(t, testTimeout), []byte("go")); err != nil {
		t.Fatal(err)
	}
	if err := p.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	msg, err := readWithin(t, p, testTimeout)
	if err != nil || string(msg) != `{"a":1}` {
		t.Fatalf("Read after the deadline = %q, %v; want the whole line", msg, err)
	}
}

// A deadline in the past, set from another goroutine, interrupts a Read
// under way; the stream stays usable.
func TestProcessReadDeadlineInterrupts(t *testing.T) {
	t.Parallel()
	p := spawn(t, sh(`read go; echo '{"b":2}'; read end`), transport.StdioOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := p.Read()
		done <- err
	}()
	if err := p.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("interrupted Read = %v, want the deadline's error", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Read not interrupted by a deadline in the past")
	}
	p.SetReadDeadline(time.Time{})
	if err := p.Write(testCtx(t, testTimeout), []byte("go")); err != nil {
		t.Fatal(err)
	}
	if msg, err := readWithin(t, p, testTimeout); err != nil || string(msg) != `{"b":2}` {
		t.Fatalf("Read after the interrupt = %q, %v", msg, err)
	}
}

func TestPipeReadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := transport.Pipe(0)
		defer a.Close()
		rd := a.(transport.ReadDeadliner)

		// A deadline in the future passes while Read waits.
		rd.SetReadDeadline(time.Now().Add(time.Second))
		start := time.Now()
		if _, err := a.Read(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read past its deadline = %v", err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("Read gave up after %v, want 1s", waited)
		}

		// It stays passed until set again; a message waiting is read
		// whatever the deadline.
		if _, err := a.Read(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("second Read = %v, want the deadline's error still", err)
		}
		b.Write(t.Context(), []byte("m1"))
		if msg, err := a.Read(); err != nil || string(msg) != "m1" {
			t.Fatalf("Read of a waiting message past the deadline = %q, %v", msg, err)
		}

		// Cleared, Read waits for the next message; a deadline in the
		// past interrupts it.
		rd.SetReadDeadline(time.Time{})
		done := make(chan error, 1)
		go func() {
			_, err := a.Read()
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Read with no deadline returned %v", err)
		default:
		}
		rd.SetReadDeadline(time.Unix(1, 0))
		if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("interrupted Read = %v", err)
		}

		// A deadline moved later before it passes does not fire early.
		rd.SetReadDeadline(time.Now().Add(time.Second))
		rd.SetReadDeadline(time.Now().Add(3 * time.Second))
		start = time.Now()
		a.Read()
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("Read gave up after %v, want the later deadline's 3s", waited)
		}
	})
}

// After the end of its stdout, Read waits for the process to exit (so
// CloseInfo can say how it ended); the read deadline cuts that wait short
// too, and a later Read still ends with io.EOF once it exits.
func TestProcessReadDeadlineCutsTheExitWait(t *testing.T) {
	t.Parallel()
	p := spawn(t, sh(`exec 1>&-; read go`), transport.StdioOptions{StopWait: time.Minute})
	p.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	done := make(chan error, 1)
	go func() {
		_, err := p.Read()
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read = %v, want the deadline's error", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the deadline did not cut short the wait for the exit")
	}
	p.SetReadDeadline(time.Time{})
	if err := p.Write(testCtx(t, testTimeout), []byte("go")); err != nil {
		t.Fatal(err)
	}
	if _, err := readWithin(t, p, testTimeout); !errors.Is(err, io.EOF) {
		t.Fatalf("Read after the exit = %v, want io.EOF", err)
	}
}

// Setting a process's read deadline allocates nothing: a call reading its
// own answer sets it on every call.
func TestProcessSetReadDeadlineAllocatesNothing(t *testing.T) {
	p := spawn(t, sh(`read end`), transport.StdioOptions{})
	later := time.Now().Add(time.Hour)
	if n := testing.AllocsPerRun(100, func() {
		p.SetReadDeadline(later)
		p.SetReadDeadline(time.Time{})
	}); n != 0 {
		t.Errorf("SetReadDeadline allocates %v times a call, want 0", n)
	}
}
