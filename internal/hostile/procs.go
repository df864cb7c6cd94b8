package hostile

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Pids is what -pidfile holds: the server's pid and process group, and its
// -grandchild's pid (0 if none).
type Pids struct {
	Pid        int `json:"pid"`
	Pgid       int `json:"pgid"`
	Grandchild int `json:"grandchild"`
}

// ReadPids reads a -pidfile.
func ReadPids(path string) (Pids, error) {
	var p Pids
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	err = json.Unmarshal(b, &p)
	return p, err
}

// WritePids writes p to path whole: a reader sees all of it or none.
func WritePids(path string, p Pids) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// StartWS runs the hostile program with -ws and args, in a process group of
// its own, and returns the URL it prints. At the test's end the whole group
// is killed and the program reaped.
func StartWS(tb testing.TB, args ...string) string {
	tb.Helper()
	bin := Binary(tb)
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-ws"}, args...)...)
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		tb.Fatalf("starting %s: %v", bin, err)
	}
	w.Close()
	pgid := cmd.Process.Pid
	tb.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL)
		cmd.Wait()
		r.Close()
	})
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		got <- line{s, err}
	}()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case l := <-got:
		url := strings.TrimSpace(l.s)
		if l.err != nil || !strings.HasPrefix(url, "ws://127.0.0.1:") {
			tb.Fatalf("hostile -ws printed %q (%v), want its ws:// URL", l.s, l.err)
		}
		return url
	case <-timer.C:
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-got // the kill ends the read
		tb.Fatalf("hostile -ws printed no URL within 10s")
		return ""
	}
}
