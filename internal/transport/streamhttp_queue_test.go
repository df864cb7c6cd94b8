package transport

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// The read queue is bounded in bytes: a put beyond the bound waits until a
// get makes room (one message is taken when none waits, whatever its
// size), and gives up when its context ends.
func TestMsgQueueBackpressure(t *testing.T) {
	q := newMsgQueue(10)
	ctx := context.Background()
	big := bytes.Repeat([]byte("b"), 25)
	if err := q.put(ctx, big); err != nil {
		t.Fatalf("a message over the bound into an empty queue: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- q.put(ctx, []byte("small")) }()
	select {
	case err := <-done:
		t.Fatalf("put into a full queue returned %v at once", err)
	case <-time.After(20 * time.Millisecond):
		// Still waiting, as it should: a bounded look, not a sync.
	}
	if msg, err := q.get(); err != nil || !bytes.Equal(msg, big) {
		t.Fatalf("get = %q, %v", msg, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("put did not go on once there was room")
	}
	if msg, _ := q.get(); string(msg) != "small" {
		t.Fatalf("get = %q", msg)
	}

	q.put(ctx, big)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := q.put(cctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("put with an ended context into a full queue = %v", err)
	}
	q.fail(errors.New("ended"))
	if msg, err := q.get(); !bytes.Equal(msg, big) || err != nil {
		t.Errorf("what was queued before the end is read first: %q, %v", msg, err)
	}
	if _, err := q.get(); err == nil || err.Error() != "ended" {
		t.Errorf("get after the end = %v", err)
	}
	q.close()
	if _, err := q.get(); !errors.Is(err, ErrClosed) {
		t.Errorf("get after close = %v", err)
	}
}
