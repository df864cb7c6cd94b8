package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// runOnce runs the non-race mcplhost with args to its exit, within 60 s,
// and returns its exit status and what it printed.
func runOnce(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hostBinary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("mcplhost %s did not exit within 60 s; it printed:\n%s%s", strings.Join(args, " "), out.String(), errb.String())
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatalf("mcplhost %s: %v", strings.Join(args, " "), err)
	}
	return 0, out.String(), errb.String()
}

// controlPID is the pid in the channel server's control file, 0 if there
// is none.
func controlPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	var c chanserver.ControlFile
	if err != nil || json.Unmarshal(b, &c) != nil {
		t.Fatalf("control file %q: %v", b, err)
	}
	return c.Pid
}

// TestRunOneHostPerStore is issue 23's two hosts on one store, through
// the path a user takes: while an mcplhost run holds its store, a second
// run, and an mcplhost call, on the same config exit 1 naming the store
// and the first one's pid, and start no server; mcplhost channels still
// reads the store meanwhile, what the running host wrote included. Once
// the first has stopped, a run starts on the store; once that one is
// killed with SIGKILL, another does too (the kernel released the lock).
func TestRunOneHostPerStore(t *testing.T) {
	dir := t.TempDir()
	dbPath, ctlPath, cfg := storeConfig(t, dir)

	run1 := startRun(t, dir, cfg, "run1")
	ctl := awaitControl(t, ctlPath, run1) // the store is open before the servers start
	if out := ctl.call(t, waitFor, "incoming", `{"channelId":"a","messageId":"m1","text":"first"}`); !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("incoming m1: %s", out)
	}
	pid := run1.cmd.Process.Pid

	code, stdout, stderr := runOnce(t, "run", "--config", cfg)
	want := fmt.Sprintf("mcplhost run: the store %s is in use by another host (pid %d); nothing was started. Stop that host first, or give this one a store of its own (store: in its config)\n", dbPath, pid)
	if code != exitFail || stdout != "" || stderr != want {
		t.Fatalf("a second run on the store: exit %d, stdout %q, stderr %q; want exit 1 and stderr %q", code, stdout, stderr, want)
	}
	code, stdout, stderr = runOnce(t, "call", "--config", cfg, "channel_list", "{}")
	want = fmt.Sprintf("mcplhost call: the store %s is in use by another host (pid %d); nothing was called: a call runs its own copy of the config's servers, which would answer their messages a second time beside that host's. Stop that host first, or give the call a config whose store is its own\n", dbPath, pid)
	if code != exitFail || stdout != "" || stderr != want {
		t.Fatalf("a call on the store: exit %d, stdout %q, stderr %q; want exit 1 and stderr %q", code, stdout, stderr, want)
	}
	// Neither started a server: the control file is still the first's.
	if got := controlPID(t, ctlPath); got != ctl.Pid {
		t.Fatalf("the control file names server pid %d, want the first run's server %d: a refused host started one", got, ctl.Pid)
	}

	// Reading needs no lock.
	code, stdout, stderr = runOnce(t, "channels", "--store", dbPath, "--messages", "--json")
	var msgs []struct {
		MessageID string `json:"messageId"`
	}
	if code != exitOK || stderr != "" || json.Unmarshal([]byte(stdout), &msgs) != nil || len(msgs) != 1 || msgs[0].MessageID != "m1" {
		t.Fatalf("channels --messages while the host runs: exit %d, stdout %q, stderr %q; want m1", code, stdout, stderr)
	}
	code, stdout, stderr = runOnce(t, "channels", "--store", dbPath)
	if code != exitOK || stderr != "" || stdout == "" {
		t.Fatalf("channels while the host runs: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	if code := run1.stop(); code != 128+15 {
		t.Fatalf("the first run exited %d at SIGTERM, want 143; it logged:\n%s", code, clip(run1.stderr.String()))
	}
	ctl.awaitGone(t)
	if err := os.Remove(ctlPath); err != nil {
		t.Fatal(err)
	}

	// Stopped, it let the store go.
	run2 := startRun(t, dir, cfg, "run2")
	ctl2 := awaitControl(t, ctlPath, run2)
	if out := ctl2.call(t, waitFor, "incoming", `{"channelId":"a","messageId":"m2","text":"second"}`); !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("incoming m2 on the second run: %s", out)
	}
	run2.kill9()
	ctl2.awaitGone(t)
	if err := os.Remove(ctlPath); err != nil {
		t.Fatal(err)
	}

	// Killed, it let the store go too, its pid left in the lock file.
	run3 := startRun(t, dir, cfg, "run3")
	ctl3 := awaitControl(t, ctlPath, run3)
	code, _, stderr = runOnce(t, "run", "--config", cfg)
	if code != exitFail || !strings.Contains(stderr, fmt.Sprintf("in use by another host (pid %d)", run3.cmd.Process.Pid)) {
		t.Fatalf("a run beside the third: exit %d, stderr %q; want exit 1 naming pid %d", code, stderr, run3.cmd.Process.Pid)
	}
	if code := run3.stop(); code != 128+15 {
		t.Fatalf("the third run exited %d at SIGTERM, want 143; it logged:\n%s", code, clip(run3.stderr.String()))
	}
	ctl3.awaitGone(t)
	st, err := sqlite.Open(dbPath, &sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ids []string
	if err := st.Messages(context.Background(), 0, func(m store.Message) error {
		ids = append(ids, m.MessageID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "m1,m2" {
		t.Fatalf("the inbox holds %v, want m1 and m2, each once", ids)
	}
}

// TestRunCorruptStore: a store whose pages in the middle are garbage is
// refused by mcplhost run and mcplhost call, exit 1, naming the file and
// what to do, starting no server and leaving the file as it was.
func TestRunCorruptStore(t *testing.T) {
	dir := t.TempDir()
	dbPath, ctlPath, cfg := storeConfig(t, dir)
	// A store of many pages, closed, then 4 pages in its middle overwritten.
	st, err := sqlite.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"text":"` + strings.Repeat("x", 400) + `"}`)
	msgs := make([]store.Message, 3000)
	for i := range msgs {
		msgs[i] = store.Message{Server: "chat", Channel: "a", MessageID: fmt.Sprintf("m%d", i), Body: body, At: time.Unix(int64(i), 0)}
	}
	if _, err := st.AddMessages(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	if fi.Size() < 100*page {
		t.Fatalf("the store is %d bytes; the test wants many pages", fi.Size())
	}
	f, err := os.OpenFile(dbPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte("garbage!"), 4*page/8), fi.Size()/page/2*page); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ command, nothing string }{
		{"run", "nothing was started"},
		{"call", "nothing was called"},
	} {
		args := []string{c.command, "--config", cfg}
		if c.command == "call" {
			args = append(args, "channel_list", "{}")
		}
		code, stdout, stderr := runOnce(t, args...)
		lines := strings.SplitAfter(stderr, "\n")
		first := fmt.Sprintf("mcplhost %s: the store %s is damaged, and was not opened (%s): SQLite's quick_check found: ", c.command, dbPath, c.nothing)
		second := fmt.Sprintf("mcplhost %s: restore %s from a backup, or move it aside (with its -wal and -shm files, if there are any) to start afresh with a new store there; a new store has none of what this one kept: the channel decisions (each channel is decided anew), the inbox (the messages the servers sent, and how far each agent had read) and the agents' histories\n", c.command, dbPath)
		if code != exitFail || stdout != "" || len(lines) != 3 || !strings.HasPrefix(lines[0], first) || lines[1] != second || lines[2] != "" {
			t.Fatalf("mcplhost %s on a damaged store: exit %d, stdout %q, stderr:\n%s\nwant exit 1, and stderr a line starting %q then %q", c.command, code, stdout, stderr, first, second)
		}
	}
	if _, err := os.Stat(ctlPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a server was started on a damaged store (its control file: %v)", err)
	}
	after, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("the refused hosts changed the damaged store")
	}
}

// storeConfig writes dir/config.yaml: the store dir/host.db and the
// channel server "chat" with its control file dir/control.json.
func storeConfig(t *testing.T, dir string) (dbPath, ctlPath, cfg string) {
	t.Helper()
	dbPath = filepath.Join(dir, "host.db")
	ctlPath = filepath.Join(dir, "control.json")
	cfg = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`store: ./host.db
servers:
  - id: chat
    command: `+chanserverCommand(t, ctlPath)+`
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dbPath, ctlPath, cfg
}
