package transport_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/procs"
	"github.com/mcpl-go/mcpl/internal/transport"
)

// A server that does not read its stdin: once the pipe is full, a write
// is abandoned at its deadline as stalled, and the stream stays open.
func TestWriteStalled(t *testing.T) {
	t.Parallel()
	p := spawn(t, transport.Command{Argv: []string{"sleep", "600"}}, transport.StdioOptions{StopWait: 200 * time.Millisecond})
	// Messages under PIPE_BUF go into the pipe whole or not at all.
	err, took := fillStdin(t, p, 1000, 200*time.Millisecond)
	if !errors.Is(err, transport.ErrStalled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write into a full pipe = %v, want ErrStalled with context.DeadlineExceeded", err)
	}
	if errors.Is(err, transport.ErrPartialWrite) || errors.Is(err, transport.ErrClosed) {
		t.Errorf("stalled Write = %v, want neither ErrPartialWrite nor ErrClosed", err)
	}
	if took > 2*time.Second {
		t.Errorf("the stalled Write took %s, want about its 200ms deadline", took)
	}
	// The stream is still open: the next write, as large, stalls in its
	// turn (its deadline is its own, not one left behind), and a canceled
	// context is refused before the write begins.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Write(ctx, []byte(strings.Repeat("a", 1000))); !errors.Is(err, transport.ErrStalled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("next Write = %v, want ErrStalled again", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Write(canceled, []byte("x")); !errors.Is(err, context.Canceled) || errors.Is(err, transport.ErrStalled) {
		t.Errorf("Write with a canceled context = %v, want context.Canceled alone", err)
	}
	// WriteBy's own deadline, with a context that has none, stalls the
	// same way (the pipe's deadline, no context derived), and leaves no
	// deadline behind for the next write; one already passed sends nothing.
	start := time.Now()
	err = transport.WriteBy(p, context.Background(), []byte(strings.Repeat("b", 1000)), start.Add(100*time.Millisecond))
	if !errors.Is(err, transport.ErrStalled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WriteBy past its own deadline = %v, want ErrStalled with context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 2*time.Second {
		t.Errorf("WriteBy stalled after %s, want about its 100ms deadline", d)
	}
	if err := transport.WriteBy(p, context.Background(), []byte("x"), time.Now().Add(-time.Second)); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transport.ErrStalled) {
		t.Errorf("WriteBy with its deadline passed = %v, want context.DeadlineExceeded alone", err)
	}
	select {
	case <-p.Exited():
		t.Fatal("the process was stopped after a stalled write")
	default:
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if info := p.CloseInfo(); info.Signal != "SIGTERM" {
		t.Errorf("CloseInfo = %+v, want the server stopped by SIGTERM", info)
	}
}

// startWrite runs p.Write in a goroutine and returns its outcome's channel.
func startWrite(s transport.Stream, ctx context.Context, msg string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Write(ctx, []byte(msg)) }()
	return done
}

// waitTurnTaken waits until a Write holds p's turn.
func waitTurnTaken(t *testing.T, p *transport.Process) {
	t.Helper()
	eventually(t, "a Write takes the turn", p.WriteTurnTaken)
}

// A Write waiting behind one stuck on a full pipe gives up at its own
// deadline, while the first is still stuck.
func TestWriteWaitingForItsTurnHonoursItsContext(t *testing.T) {
	t.Parallel()
	p := spawn(t, transport.Command{Argv: []string{"sleep", "600"}}, transport.StdioOptions{StopWait: 200 * time.Millisecond})
	if err, _ := fillStdin(t, p, 1000, 100*time.Millisecond); !errors.Is(err, transport.ErrStalled) {
		t.Fatalf("filling stdin: %v", err)
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	// As large as the write that stalled, so it stalls too.
	first := startWrite(p, ctxA, strings.Repeat("s", 1000))
	waitTurnTaken(t, p)

	ctxB, cancelB := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancelB()
	start := time.Now()
	err := p.Write(ctxB, []byte("waiting"))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transport.ErrStalled) || errors.Is(err, transport.ErrClosed) {
		t.Errorf("waiting Write = %v, want context.DeadlineExceeded alone", err)
	}
	if took > 2*time.Second {
		t.Errorf("waiting Write took %s, want about its 150ms deadline", took)
	}
	// So does one waiting with a deadline of its own (WriteBy), and no
	// context deadline.
	start = time.Now()
	err = transport.WriteBy(p, context.Background(), []byte("waiting"), start.Add(150*time.Millisecond))
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transport.ErrStalled) || took > 2*time.Second {
		t.Errorf("waiting WriteBy = %v after %s, want context.DeadlineExceeded alone, at about 150ms", err, took)
	}
	select {
	case err := <-first:
		t.Fatalf("the stuck Write returned (%v) before the waiting one gave up", err)
	default:
	}

	cancelA()
	select {
	case err := <-first:
		if !errors.Is(err, transport.ErrStalled) || !errors.Is(err, context.Canceled) {
			t.Errorf("stuck Write = %v, want ErrStalled with context.Canceled", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the stuck Write did not end with its context")
	}
}

// A write cut off part way closes the stream; a Write waiting its turn is
// told so.
func TestPartialWriteClosesTheStream(t *testing.T) {
	t.Parallel()
	p := spawn(t, transport.Command{Argv: []string{"sleep", "600"}}, transport.StdioOptions{StopWait: 200 * time.Millisecond})
	// More than the pipe holds: part goes in, the rest cannot.
	first := startWrite(p, testCtx(t, 300*time.Millisecond), strings.Repeat("m", 1<<20))
	waitTurnTaken(t, p)
	waiting := startWrite(p, testCtx(t, testTimeout), "waiting")
	for name, ch := range map[string]<-chan error{"cut off": first, "waiting": waiting} {
		select {
		case err := <-ch:
			if name == "cut off" && (!errors.Is(err, transport.ErrPartialWrite) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transport.ErrStalled)) {
				t.Errorf("Write cut off part way = %v, want ErrPartialWrite with context.DeadlineExceeded, not ErrStalled", err)
			}
			if name == "waiting" && !errors.Is(err, transport.ErrClosed) {
				t.Errorf("Write waiting behind a partial write = %v, want ErrClosed", err)
			}
		case <-time.After(testTimeout):
			t.Fatalf("the %s Write did not return", name)
		}
	}
	select {
	case <-p.Exited():
	case <-time.After(testTimeout):
		t.Fatal("the process was not stopped after the partial write")
	}
	if err := p.Write(context.Background(), []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after a partial write = %v, want ErrClosed", err)
	}
	p.Close()
	if live := procs.GroupMembers(p.Pid()); len(live) > 0 {
		t.Errorf("processes %v of the group are alive after Close", live)
	}
}

// blockingWriter blocks each Write until release is closed, announcing on
// entered that a Write has begun.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	writes  []string
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// doneWatcher is a context that reports that Done was asked for: a Write
// asks as it starts to wait for its turn.
type doneWatcher struct {
	context.Context
	asked chan struct{}
	once  sync.Once
}

func (c *doneWatcher) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

func TestLineStreamWaitForTurn(t *testing.T) {
	t.Parallel()
	w := &blockingWriter{entered: make(chan struct{}, 4), release: make(chan struct{})}
	s := transport.NewLineStream(strings.NewReader(""), w, nil, 0)
	first := startWrite(s, context.Background(), "first")
	select {
	case <-w.entered:
	case <-time.After(testTimeout):
		t.Fatal("the first Write did not reach the writer")
	}

	// Waiting for the turn gives up when the context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Write(ctx, []byte("second")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Write waiting its turn = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Write waiting its turn took %s, want about its 50ms deadline", took)
	}

	// And when the stream closes, though the write under way cannot end.
	watch := &doneWatcher{Context: context.Background(), asked: make(chan struct{})}
	third := startWrite(s, watch, "third")
	<-watch.asked
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-third:
		if !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Write waiting its turn across Close = %v, want ErrClosed", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("a Write waiting its turn was not ended by Close")
	}
	select {
	case err := <-first:
		t.Fatalf("the blocked write returned (%v) before its writer did", err)
	default:
	}

	close(w.release)
	if err := <-first; err != nil {
		t.Errorf("the first Write = %v, want nil once its writer took it", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.writes) != 1 || w.writes[0] != "first\n" {
		t.Errorf("writer got %q, want only the first message", w.writes)
	}
}
