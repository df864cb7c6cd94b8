package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/transport"
)

func TestPipeMessagesCrossInOrder(t *testing.T) {
	a, b := transport.Pipe(0)
	defer a.Close()
	ctx := testCtx(t, testTimeout)
	var want []string
	for i := range 200 { // more than the pipe buffers: the reader keeps up
		want = append(want, fmt.Sprintf(`{"n":%d}`, i))
	}
	errc := make(chan error, 1)
	go func() {
		for _, m := range want {
			if err := a.Write(ctx, []byte(m)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	var got []string
	for range want {
		msg, err := readWithin(t, b, testTimeout)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		got = append(got, string(msg))
	}
	if err := <-errc; err != nil {
		t.Fatalf("Write: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	// And the other way.
	if err := b.Write(ctx, []byte("back")); err != nil {
		t.Fatal(err)
	}
	if msg, err := readWithin(t, a, testTimeout); err != nil || string(msg) != "back" {
		t.Errorf("Read on a = %q, %v; want \"back\"", msg, err)
	}
}

func TestPipeWriteCopiesTheMessage(t *testing.T) {
	a, b := transport.Pipe(0)
	defer a.Close()
	buf := []byte("original")
	if err := a.Write(context.Background(), buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "changed!")
	if msg, err := b.Read(); err != nil || string(msg) != "original" {
		t.Errorf("Read = %q, %v; want \"original\"", msg, err)
	}
}

func TestPipeClose(t *testing.T) {
	for _, closer := range []string{"a", "b"} {
		t.Run("close "+closer, func(t *testing.T) {
			a, b := transport.Pipe(0)
			ends := map[string]transport.Stream{"a": a, "b": b}
			me, peer := ends[closer], ends[map[string]string{"a": "b", "b": "a"}[closer]]
			ctx := context.Background()
			// Messages in flight both ways when the close comes.
			if err := me.Write(ctx, []byte("from closer")); err != nil {
				t.Fatal(err)
			}
			if err := peer.Write(ctx, []byte("to closer")); err != nil {
				t.Fatal(err)
			}
			if err := me.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := me.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			// The peer drains what was sent before the close, then sees
			// the end, as from a socket.
			if msg, err := peer.Read(); err != nil || string(msg) != "from closer" {
				t.Errorf("peer Read = %q, %v; want the message sent before the close", msg, err)
			}
			for range 3 {
				if _, err := peer.Read(); !errors.Is(err, io.EOF) {
					t.Errorf("peer Read after the close = %v, want io.EOF", err)
				}
			}
			// The closer's own Read fails at once, even with a message waiting.
			if msg, err := me.Read(); !errors.Is(err, transport.ErrClosed) {
				t.Errorf("closer Read = %q, %v; want ErrClosed", msg, err)
			}
			if err := me.Write(ctx, []byte("x")); !errors.Is(err, transport.ErrClosed) {
				t.Errorf("closer Write = %v, want ErrClosed", err)
			}
			if err := peer.Write(ctx, []byte("x")); !errors.Is(err, transport.ErrClosed) {
				t.Errorf("peer Write after the close = %v, want ErrClosed", err)
			}
			if (me.CloseInfo() != transport.CloseInfo{}) || (peer.CloseInfo() != transport.CloseInfo{}) {
				t.Errorf("CloseInfo = %+v / %+v, want zero", me.CloseInfo(), peer.CloseInfo())
			}
		})
	}
}

func TestPipeCloseUnblocksRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := transport.Pipe(0)
		results := make(chan error, 2)
		for _, s := range []transport.Stream{a, b} {
			go func() {
				_, err := s.Read()
				results <- err
			}()
		}
		synctest.Wait() // both Reads are blocked
		a.Close()
		got := []error{<-results, <-results}
		var eof, closed int
		for _, err := range got {
			switch {
			case errors.Is(err, io.EOF):
				eof++
			case errors.Is(err, transport.ErrClosed):
				closed++
			}
		}
		if eof != 1 || closed != 1 {
			t.Errorf("blocked Reads returned %v; want one io.EOF (b) and one ErrClosed (a)", got)
		}
	})
}

func TestPipeTooLarge(t *testing.T) {
	a, b := transport.Pipe(10)
	defer a.Close()
	ctx := context.Background()
	for _, m := range []string{strings.Repeat("x", 10), strings.Repeat("y", 11), "after"} {
		if err := a.Write(ctx, []byte(m)); err != nil {
			t.Fatalf("Write(%d bytes): %v", len(m), err)
		}
	}
	if msg, err := b.Read(); err != nil || len(msg) != 10 {
		t.Fatalf("Read of a message at the limit = %d bytes, %v", len(msg), err)
	}
	_, err := b.Read()
	var tl *transport.TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 10 || tl.Size != 11 {
		t.Fatalf("Read of an oversize message = %v, want *TooLargeError{Limit: 10, Size: 11}", err)
	}
	// The stream is then unusable: closed, from both ends.
	if _, err := b.Read(); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Read after too large = %v, want ErrClosed", err)
	}
	if _, err := a.Read(); !errors.Is(err, io.EOF) {
		t.Errorf("writer's Read after its message was refused = %v, want io.EOF", err)
	}
}

func TestPipeDefaultLimit(t *testing.T) {
	a, b := transport.Pipe(0)
	defer a.Close()
	big := make([]byte, transport.DefaultMaxMessageSize)
	if err := a.Write(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if msg, err := b.Read(); err != nil || len(msg) != len(big) {
		t.Errorf("Read of a message at the default limit = %d bytes, %v", len(msg), err)
	}
	if err := a.Write(context.Background(), append(big, 'x')); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(); !tooLarge(err, transport.DefaultMaxMessageSize) {
		t.Errorf("Read over the default limit = %v, want *TooLargeError", err)
	}
}

func TestPipeWriteHonoursContextWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := transport.Pipe(0)
		defer a.Close()
		// Fill the buffer: nobody reads b.
		n := 0
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := a.Write(ctx, []byte("fill"))
			cancel()
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Write into a full pipe = %v, want context.DeadlineExceeded", err)
				}
				break
			}
			if n++; n > 10000 {
				t.Fatal("the pipe never filled")
			}
		}
		if n == 0 {
			t.Fatal("the first Write already blocked")
		}
		// A canceled context fails at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := a.Write(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
			t.Errorf("Write with a canceled context = %v, want context.Canceled", err)
		}
		// A blocked Write ends when the pipe closes.
		done := make(chan error, 1)
		go func() { done <- a.Write(context.Background(), []byte("blocked")) }()
		synctest.Wait()
		b.Close()
		if err := <-done; !errors.Is(err, transport.ErrClosed) {
			t.Errorf("blocked Write at close = %v, want ErrClosed", err)
		}
		// b closed the pipe, so its own Read fails though messages wait.
		if _, err := b.Read(); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Read on the closer = %v, want ErrClosed", err)
		}
	})
}

func TestPipeBlockedWriteProceedsWhenRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := transport.Pipe(0)
		defer a.Close()
		ctx := context.Background()
		n := 0
		for {
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			err := a.Write(tctx, []byte(fmt.Sprint(n)))
			cancel()
			if err != nil {
				break
			}
			n++
		}
		done := make(chan error, 1)
		go func() { done <- a.Write(ctx, []byte("last")) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Write into a full pipe returned %v before anything was read", err)
		default:
		}
		if msg, err := b.Read(); err != nil || string(msg) != "0" {
			t.Fatalf("Read = %q, %v; want \"0\"", msg, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Write after room was made = %v", err)
		}
		for i := 1; i < n; i++ {
			if msg, err := b.Read(); err != nil || string(msg) != fmt.Sprint(i) {
				t.Fatalf("Read = %q, %v; want %q", msg, err, fmt.Sprint(i))
			}
		}
		if msg, err := b.Read(); err != nil || string(msg) != "last" {
			t.Fatalf("Read = %q, %v; want \"last\"", msg, err)
		}
	})
}
