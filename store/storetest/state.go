package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/mcpl-go/mcpl/store"
)

// loadState reads name, failing the test on an error.
func loadState(t *testing.T, s store.Store, name string) ([]byte, bool) {
	t.Helper()
	b, ok, err := s.LoadState(context.Background(), name)
	if err != nil {
		t.Fatalf("LoadState(%q): %v", name, err)
	}
	return b, ok
}

func testSaveState(t *testing.T, s store.Store) {
	ctx := context.Background()
	if b, ok := loadState(t, s, "coalesce"); ok || b != nil {
		t.Fatalf("LoadState of a name never saved = %q, %v; want nothing, false", b, ok)
	}
	for _, body := range []string{`{"v":1}`, `{"v":2,"longer":true}`, `{}`} {
		if err := s.SaveState(ctx, "coalesce", []byte(body)); err != nil {
			t.Fatalf("SaveState(%s): %v", body, err)
		}
		if b, ok := loadState(t, s, "coalesce"); !ok || string(b) != body {
			t.Fatalf("LoadState after SaveState(%s) = %q, %v", body, b, ok)
		}
	}
	if err := s.SaveState(ctx, "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if b, _ := loadState(t, s, "coalesce"); string(b) != `{}` {
		t.Fatalf("another name's save changed coalesce to %q", b)
	}
	if err := s.SaveState(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if b, ok := loadState(t, s, "empty"); !ok || len(b) != 0 {
		t.Fatalf("LoadState of an empty body = %q, %v; want empty, true", b, ok)
	}
	if err := s.SaveState(ctx, "", []byte("x")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("SaveState with no name: %v, want ErrInvalid", err)
	}
	// What the caller keeps is its own: changing it changes nothing saved.
	buf := []byte("abc")
	if err := s.SaveState(ctx, "mine", buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X'
	if b, _ := loadState(t, s, "mine"); !bytes.Equal(b, []byte("abc")) {
		t.Fatalf("the saved body follows the caller's buffer: %q", b)
	}
}

func testSaveStateCanceled(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.SaveState(ctx, "a", []byte("1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("SaveState on an ended context: %v", err)
	}
	if _, ok := loadState(t, s, "a"); ok {
		t.Fatal("SaveState on an ended context saved")
	}
	s.Close()
	if err := s.SaveState(context.Background(), "a", []byte("1")); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("SaveState after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.LoadState(context.Background(), "a"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("LoadState after Close: %v, want ErrClosed", err)
	}
}

func testReopenStates(t *testing.T, s store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	if err := s.SaveState(context.Background(), "coalesce", []byte(`{"kept":true}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := reopen(t, s)
	if b, ok := loadState(t, r, "coalesce"); !ok || string(b) != `{"kept":true}` {
		t.Fatalf("after reopening, LoadState = %q, %v", b, ok)
	}
}
