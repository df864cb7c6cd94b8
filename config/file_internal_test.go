package config

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadFileSwap: a regular file swapped for a named pipe between
// readFile's look at the path and its open is refused, at once: the open
// doesn't wait for a writer (O_NONBLOCK), and the look at what was opened
// (fstat) sees the pipe.
func TestReadFileSwap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "host.yaml")
	if err := os.WriteFile(path, []byte("servers: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	swapped := false
	afterStat = func(p string) {
		swapped = true
		fifo := filepath.Join(dir, "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Error(err)
			return
		}
		if err := os.Rename(fifo, p); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterStat = nil })

	errc := make(chan error, 1)
	go func() {
		_, err := readFile(path)
		errc <- err
	}()
	select {
	case err := <-errc:
		if !swapped {
			t.Fatal("the hook did not run")
		}
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("readFile of a file swapped for a FIFO: %v, want ErrNotRegular", err)
		}
		if want := "read " + path + ": is a named pipe (FIFO), not a regular file; give the path of a YAML config file"; err.Error() != want {
			t.Errorf("error %q\nwant  %q", err, want)
		}
	case <-time.After(60 * time.Second):
		// A blocked open: writing to the pipe would free the goroutine.
		t.Fatal("readFile still blocked after 60s: it opened the FIFO waiting for a writer")
	}
}
