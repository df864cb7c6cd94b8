package hostile_test

import (
	"path/filepath"
	"testing"

	"github.com/mcpl-go/mcpl/internal/hostile"
)

func TestReadPids(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pids")
	want := hostile.Pids{Pid: 10, Pgid: 11, Grandchild: 12}
	if err := hostile.WritePids(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := hostile.ReadPids(path)
	if err != nil || got != want {
		t.Errorf("ReadPids = %+v, %v; want %+v", got, err, want)
	}
	if _, err := hostile.ReadPids(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Errorf("ReadPids of no file: no error")
	}
}
