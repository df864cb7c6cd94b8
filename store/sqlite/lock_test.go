//go:build unix

package sqlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/store"
)

// lockHolderEnv names the store TestLockHolderChild opens.
const lockHolderEnv = "MCPL_SQLITE_LOCK_HOLDER"

// TestLockHolderChild is TestLockOtherProcess's child: it opens the
// store, says so, and holds it until killed or its stdin closes.
func TestLockHolderChild(t *testing.T) {
	path := os.Getenv(lockHolderEnv)
	if path == "" {
		t.Skip("the lock test's child; runs only under TestLockOtherProcess")
	}
	d, err := Open(path, nil)
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
	if _, err := d.Append(context.Background(), lockRec("child", "a", store.Open)); err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("open %d\n", os.Getpid())
	time.AfterFunc(60*time.Second, func() { os.Exit(3) })
	io.Copy(io.Discard, os.Stdin)
	os.Exit(2) // without Close: as a crash leaves it
}

func lockRec(server, channel string, state store.State) store.Record {
	return store.Record{Kind: store.KindDecision, Server: server, Channel: channel, State: state, Source: "test", At: time.Unix(1, 0)}
}

// inUse asserts err is an *InUseError for path held by pid.
func inUse(t *testing.T, err error, path string, pid int) {
	t.Helper()
	var iu *InUseError
	if !errors.As(err, &iu) {
		t.Fatalf("Open of a held store: %v (%T), want an *InUseError", err, err)
	}
	if iu.Path != path || iu.LockPath != path+".lock" || iu.PID != pid {
		t.Fatalf("InUseError %+v, want Path %s, LockPath %s.lock, PID %d", iu, path, path, pid)
	}
	if want := fmt.Sprintf("store %s: in use by another process (pid %d), which holds its lock file %s.lock", path, pid, path); err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// TestLockSameProcess: a second Open of a store that is open fails with
// an *InUseError naming this process, and changes nothing; once the first
// is closed, the store opens again.
func TestLockSameProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.db")
	d := openAt(t, path, nil)
	ctx := context.Background()
	if _, err := d.Append(ctx, lockRec("s", "a", store.Open)); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path + ".lock"); err != nil || string(b) != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Fatalf("the lock file holds %q (%v), want this process's pid", b, err)
	}
	if fi, err := os.Stat(path + ".lock"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the lock file: %v, %v; want mode 0600", fi, err)
	}
	d2, err := Open(path, nil)
	if err == nil {
		d2.Close()
		t.Fatal("a second Open of an open store succeeded")
	}
	inUse(t, err, path, os.Getpid())
	// The first is unharmed by the refusal.
	if _, err := d.Append(ctx, lockRec("s", "b", store.Open)); err != nil {
		t.Fatalf("Append after the refused Open: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path + ".lock"); err != nil || len(b) != 0 {
		t.Fatalf("after Close the lock file holds %q (%v), want it empty", b, err)
	}
	d3 := openAt(t, path, nil)
	if got := replayAll(t, d3); len(got) != 2 {
		t.Fatalf("the reopened store replays %d records, want 2", len(got))
	}
}

// TestLockOtherProcess: a store another process holds is refused with
// its pid; once that process is killed with SIGKILL (no Close), the kernel
// has released the lock and the store opens, with what the child wrote.
func TestLockOtherProcess(t *testing.T) {
	if os.Getenv(lockHolderEnv) != "" {
		t.Skip("in the child")
	}
	path := filepath.Join(t.TempDir(), "state", "host.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderChild$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if want := fmt.Sprintf("open %d\n", cmd.Process.Pid); line != want {
		t.Fatalf("the child said %q (%v), want %q", line, err, want)
	}

	_, err = Open(path, nil)
	inUse(t, err, path, cmd.Process.Pid)

	// Reading needs no lock: the child's record is there.
	ro := openAt(t, path, &Options{ReadOnly: true})
	if got := replayAll(t, ro); len(got) != 1 || got[0].Server != "child" {
		t.Fatalf("read-only, the held store replays %+v, want the child's record", got)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	d := openAt(t, path, nil)
	if got := replayAll(t, d); len(got) != 1 || got[0].Server != "child" {
		t.Fatalf("after the child's SIGKILL the store replays %+v, want the child's record", got)
	}
	if b, err := os.ReadFile(path + ".lock"); err != nil || string(b) != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Fatalf("the lock file holds %q (%v), want this process's pid", b, err)
	}
}

// TestLockFailedOpenReleases: an Open that fails after taking the lock
// (here, a file that is not a database) releases it.
func TestLockFailedOpenReleases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.db")
	if err := os.WriteFile(path, []byte("not a database at all, but long enough"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := Open(path, nil)
		if err == nil || !strings.Contains(err.Error(), "the file is not a SQLite database") {
			t.Fatalf("Open %d of a file that is not a database: %v", i+1, err)
		}
	}
}

// TestReadOnly: a read-only DB reads a store a writer holds, sees what
// the writer commits after it opened, refuses every write with
// ErrReadOnly, and neither makes a missing file nor takes the lock.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "host.db")
	ctx := context.Background()

	if _, err := Open(filepath.Join(dir, "missing.db"), &Options{ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only Open of a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the read-only Open made the missing file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db.lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the read-only Open made a lock file: %v", err)
	}

	w := openAt(t, path, nil)
	if _, err := w.Append(ctx, lockRec("s", "a", store.Open)); err != nil {
		t.Fatal(err)
	}
	ro := openAt(t, path, &Options{ReadOnly: true})
	ro2 := openAt(t, path, &Options{ReadOnly: true}) // readers do not exclude each other
	if got := replayAll(t, ro); len(got) != 1 {
		t.Fatalf("read-only replay: %d records, want 1", len(got))
	}
	if _, err := w.Append(ctx, lockRec("s", "b", store.Closed)); err != nil {
		t.Fatal(err)
	}
	if got := replayAll(t, ro2); len(got) != 2 {
		t.Fatalf("read-only replay after the writer's second Append: %d records, want 2", len(got))
	}
	if _, err := w.AddMessages(ctx, []store.Message{{Server: "s", Channel: "a", MessageID: "m1", At: time.Unix(2, 0)}}); err != nil {
		t.Fatal(err)
	}
	if end, err := ro.InboxEnd(ctx); err != nil || end != 1 {
		t.Fatalf("read-only InboxEnd: %d, %v; want 1", end, err)
	}

	writes := map[string]func() error{
		"Append": func() error { _, err := ro.Append(ctx, lockRec("s", "c", store.Open)); return err },
		"AddMessages": func() error {
			_, err := ro.AddMessages(ctx, []store.Message{{Server: "s", Channel: "a", MessageID: "m2"}})
			return err
		},
		"Record": func() error {
			_, err := ro.Record(ctx, []store.Entry{{Conversation: "c", Body: []byte(`{}`)}}, nil)
			return err
		},
		"Compact":     func() error { _, err := ro.Compact(ctx, 1, nil); return err },
		"DropCursors": func() error { return ro.DropCursors(ctx, "x") },
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), path) {
			t.Errorf("read-only %s: %v, want ErrReadOnly naming %s", name, err, path)
		}
	}
	if got := replayAll(t, w); len(got) != 2 {
		t.Fatalf("after the refused writes the log has %d records, want 2", len(got))
	}
	// The writer's lock is the writer's alone still.
	if _, err := Open(path, nil); err == nil {
		t.Fatal("a writer's Open succeeded while another writer holds the store")
	}
	if err := ro.Close(); err != nil {
		t.Fatalf("read-only Close: %v", err)
	}
	if _, err := ro.Append(ctx, lockRec("s", "c", store.Open)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Append after Close: %v, want store.ErrClosed", err)
	}

	// A store no one has open (its -wal and -shm gone with the writer's
	// Close) reads as well.
	ro2.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after the last Close the -wal file is still there: %v", err)
	}
	ro3 := openAt(t, path, &Options{ReadOnly: true})
	if got := replayAll(t, ro3); len(got) != 2 {
		t.Fatalf("read-only replay of a closed store: %d records, want 2", len(got))
	}
}

// TestReadOnlyOldSchema: a read-only open of a file at an older schema
// version is refused, saying so, and the file is left at its version.
func TestReadOnlyOldSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.db")
	db := rawDB(t, path)
	if _, err := db.Exec(migrations[0] + "PRAGMA journal_mode=WAL; PRAGMA user_version = 1;"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, &Options{ReadOnly: true})
	want := fmt.Sprintf("store %s: the file's schema is version 1, older than this program's (version %d), and a read-only open does not migrate it", path, SchemaVersion)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("read-only Open of a version 1 file: %v, want %q...", err, want)
	}
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 1 {
		t.Fatalf("user_version %d (%v) after the refused open, want 1", v, err)
	}
}

// replayAll is d's whole log.
func replayAll(t *testing.T, d *DB) []store.Record {
	t.Helper()
	var out []store.Record
	if err := d.Replay(context.Background(), func(r store.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return out
}
