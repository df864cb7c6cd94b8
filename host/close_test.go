package host_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/procs"
)

// Stubborn servers (they ignore EOF and SIGTERM, and leave a grandchild)
// are closed in parallel, each whole process group: three take about the
// two grace periods one does (EOF, then TERM; 2s each), not three times
// that, and nothing any of them started is left.
func TestCloseStubbornServersInParallel(t *testing.T) {
	h, _ := newHost(t)
	dir := t.TempDir()
	bin := hostile.Binary(t)
	var pidfiles []string
	for _, id := range []string{"a", "b", "c"} {
		pf := filepath.Join(dir, id+".json")
		pidfiles = append(pidfiles, pf)
		cmd := list(bin, "-ignore-eof", "-ignore-term", "-grandchild", "background", "-pidfile", pf)
		if err := h.Connect(t.Context(), server(t, "id: "+id+"\ncommand: "+cmd)); err != nil {
			t.Fatal(err)
		}
	}
	var pids []hostile.Pids
	for _, pf := range pidfiles {
		p, err := hostile.ReadPids(pf)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p)
	}
	start := time.Now()
	h.Close()
	took := time.Since(start)
	// One server alone takes two grace periods (4s) and a little; three in
	// turn would take 12s.
	if took > 7*time.Second {
		t.Errorf("closing three stubborn servers took %v, want about one server's 4s", took)
	}
	for _, p := range pids {
		if left := procs.GroupMembers(p.Pgid); len(left) > 0 {
			t.Errorf("server %d left %v in its process group", p.Pid, left)
		}
		if procs.Alive(p.Grandchild) {
			t.Errorf("grandchild %d of server %d is alive", p.Grandchild, p.Pid)
		}
	}
}
