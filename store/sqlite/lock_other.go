//go:build !unix

package sqlite

// lockFile is nothing where flock(2) is not: on this platform a store is
// not locked (see the package doc, "One writer").
type lockFile struct{}

func lock(store, path string) (*lockFile, error) { return nil, nil }

func (l *lockFile) release() error { return nil }
