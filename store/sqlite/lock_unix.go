//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is a writer's hold on its store: the store's lock file, open,
// with flock(2) LOCK_EX on it, and the holder's pid written in it.
type lockFile struct {
	f *os.File
}

// lock takes the store's lock file (see the package doc, "One writer"):
// it creates the file if missing (mode 0o600), takes LOCK_EX without
// waiting, and writes this process's pid in it. A lock another process
// (or another open DB of this one) holds is an *InUseError.
func lock(store, path string) (*lockFile, error) {
	// os.OpenFile sets O_CLOEXEC: a server the host starts does not
	// inherit the descriptor, so the lock ends with the host, not with
	// the last of its children.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store %s: open its lock file: %w", store, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		pid := readPID(f)
		f.Close()
		return nil, &InUseError{Path: store, LockPath: path, PID: pid}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store %s: lock its lock file %s (flock): %w", store, path, err)
	}
	if err := writePID(f); err != nil {
		f.Close() // releases the lock
		return nil, fmt.Errorf("store %s: write this process's pid in its lock file %s: %w", store, path, err)
	}
	return &lockFile{f: f}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// readPID reads the holder's pid from its lock file: 0 when there is none
// yet (the holder took the lock and has not written it) or it is not a
// number.
func readPID(f *os.File) int {
	var b [32]byte
	n, _ := f.ReadAt(b[:], 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// release empties the lock file (its pid would be stale) and closes it,
// which releases the flock. The file stays: removing it would let two
// writers each hold a lock, one on the removed file, one on its
// successor.
func (l *lockFile) release() error {
	if l == nil {
		return nil
	}
	errT := l.f.Truncate(0)
	return errors.Join(errT, l.f.Close())
}
