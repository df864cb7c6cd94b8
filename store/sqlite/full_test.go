package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mcpl-go/mcpl/store"
)

// bigMessage is a message of about 16 KiB, so a few fill a small bound.
func bigMessage(id string) store.Message {
	return store.Message{Server: "s", Channel: "c", MessageID: id,
		Body: json.RawMessage(fmt.Sprintf(`{"id":%q,"pad":%q}`, id, strings.Repeat("x", 16<<10)))}
}

func addOne(d *DB, id string) error {
	_, err := d.AddMessages(context.Background(), []store.Message{bigMessage(id)})
	return err
}

// inboxIDs is the inbox's message ids, in Seq order.
func inboxIDs(t *testing.T, d *DB) []string {
	t.Helper()
	var ids []string
	if err := d.Messages(t.Context(), 0, func(m store.Message) error {
		ids = append(ids, m.MessageID)
		return nil
	}); err != nil {
		t.Fatalf("Messages: %v", err)
	}
	return ids
}

// fillUntilRefused adds messages until one is refused, and returns the ids
// accepted and the one refused.
func fillUntilRefused(t *testing.T, d *DB, prefix string) (accepted []string, refused string, err error) {
	t.Helper()
	for i := range 2000 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if err := addOne(d, id); err != nil {
			return accepted, id, err
		}
		accepted = append(accepted, id)
	}
	t.Fatalf("2000 messages of 16 KiB were all accepted: the disk never filled")
	return nil, "", nil
}

// checkFullThenRecovered is what both full-disk tests check once the
// disk is full (refused is the id of the first message refused): more
// writes are refused, saying why, and leave nothing; once free() gives
// space back, the next write succeeds without a reopen, the refused
// messages are not in the inbox, a refused one sent again is added once,
// and every accepted one is there.
func checkFullThenRecovered(t *testing.T, d *DB, accepted []string, refused string, first error, free func()) {
	t.Helper()
	t.Logf("the first refusal: %v", first)
	if !spaceFailure(first) {
		t.Errorf("the first refusal is not a want of space: %v", first)
	}
	refusedIDs := []string{refused}
	for i := range 3 {
		id := fmt.Sprintf("while-full-%d", i)
		err := addOne(d, id)
		if err == nil {
			t.Fatalf("a message was accepted while the disk was still full")
		}
		if strings.Contains(err.Error(), "reopen the store") {
			t.Fatalf("a write while full says the store is broken: %v", err)
		}
		refusedIDs = append(refusedIDs, id)
	}
	if got := inboxIDs(t, d); strings.Join(got, ",") != strings.Join(accepted, ",") {
		t.Fatalf("while full the inbox holds %v, want the accepted %v", got, accepted)
	}
	free()
	if err := addOne(d, "after"); err != nil {
		t.Fatalf("the first write after space came back: %v", err)
	}
	added, err := d.AddMessages(t.Context(), []store.Message{bigMessage(refused), bigMessage(refused)})
	if err != nil || len(added) != 2 || !added[0] || added[1] {
		t.Fatalf("a refused message sent again (twice in one call): added %v, %v; want [true false]", added, err)
	}
	want := append(append([]string{}, accepted...), "after", refused)
	if got := inboxIDs(t, d); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after recovery the inbox holds %v, want %v", got, want)
	}
	// The file holds the same after a reopen.
	path := d.Path()
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := openAt(t, path, nil)
	if got := inboxIDs(t, r); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("reopened, the inbox holds %v, want %v", got, want)
	}
}

// A file bounded by SetMaxPages fills as a disk does (SQLite's "database
// or disk is full"), and the store recovers once the bound is lifted, with
// no reopen: the injected fault, which runs everywhere.
func TestFullByMaxPagesRecovers(t *testing.T) {
	d := openTemp(t)
	if err := addOne(d, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.SetMaxPages(1); err != nil { // SQLite keeps it at the file's size
		t.Fatalf("SetMaxPages: %v", err)
	}
	accepted, refused, err := fillUntilRefused(t, d, "m")
	var se interface{ Code() int }
	if !errors.As(err, &se) || se.Code()&0xff != 13 { // SQLITE_FULL
		t.Errorf("refusal: %v, want SQLITE_FULL", err)
	}
	checkFullThenRecovered(t, d, append([]string{"before"}, accepted...), refused, err, func() {
		if _, err := d.SetMaxPages(0); err != nil {
			t.Fatalf("SetMaxPages(0): %v", err)
		}
	})
}

// While writes keep failing for want of space, the writer tries once per
// backoff, not once per call: concurrent callers' calls queue behind the
// wait and go in one batch.
func TestFullBacksOff(t *testing.T) {
	d := openTemp(t)
	if _, err := d.SetMaxPages(1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fillUntilRefused(t, d, "m"); err == nil {
		t.Fatal("not full")
	}
	before := d.batches.Load()
	const callers, each = 8, 6
	var wg sync.WaitGroup
	var failed sync.Map
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				if err := addOne(d, fmt.Sprintf("c%d-%d", c, i)); err != nil {
					failed.Store(fmt.Sprintf("c%d-%d", c, i), true)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	failed.Range(func(any, any) bool { n++; return true })
	if n != callers*each {
		t.Fatalf("%d of %d calls failed while full, want all", n, callers*each)
	}
	batches := d.batches.Load() - before
	t.Logf("%d calls while full took %d transactions", callers*each, batches)
	if batches > callers*each/2 {
		t.Errorf("%d calls while full took %d transactions: the writer did not back off", callers*each, batches)
	}
}

// tmpfsEnv names, for the test binary run again inside a user and mount
// namespace, the directory a 2 MiB tmpfs is mounted on.
const tmpfsEnv = "MCPL_TEST_TMPFS_DIR"

// A store on a real 2 MiB tmpfs that fills (ENOSPC at SQLite's writes,
// its COMMIT among them) refuses writes while full and recovers by itself
// once space is back. Mounting a tmpfs needs privileges: the test runs
// itself again under unshare -rm (a user and mount namespace, where it
// may mount), and is skipped, saying why, where that is not allowed.
func TestFullDiskTmpfs(t *testing.T) {
	dir := os.Getenv(tmpfsEnv)
	if dir == "" {
		runInTmpfs(t, "TestFullDiskTmpfs")
		return
	}
	d := openAt(t, filepath.Join(dir, "host.db"), nil)
	if err := addOne(d, "before"); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	accepted, refused, err := fillUntilRefused(t, d, "m")
	checkFullThenRecovered(t, d, append([]string{"before"}, accepted...), refused, err, func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	})
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for range 1 << 16 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			return
		}
	}
	t.Fatalf("wrote 256 MiB to the tmpfs and it never filled")
}

// runInTmpfs runs the test named again, in this test binary, inside a user
// and mount namespace with a 2 MiB tmpfs mounted, and fails if it fails.
// It skips, saying why, when the namespace or the mount is refused.
func runInTmpfs(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1) here to mount a tmpfs in a user namespace: " + err.Error())
	}
	dir := t.TempDir()
	probe := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=2m tmpfs "$1"`, "sh", dir)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("can't mount a tmpfs in a user namespace here (unshare -rm, mount -t tmpfs: %v: %s); the injected-fault test TestFullByMaxPagesRecovers covers recovery", err, strings.TrimSpace(string(out)))
	}
	args := []string{"-rm", "sh", "-c", `mount -t tmpfs -o size=2m tmpfs "$1" && shift && exec "$@"`, "sh", dir,
		os.Args[0], "-test.run=^" + name + "$", "-test.v", "-test.count=1"}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), tmpfsEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("inside the namespace:\n%s", out)
	if err != nil {
		t.Fatalf("%s on a 2 MiB tmpfs: %v", name, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s on a 2 MiB tmpfs did not pass", name)
	}
}
