package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/store"
)

// fillStore makes a closed store at path with n inbox messages of about
// size bytes each, and returns its size in pages.
func fillStore(t testing.TB, path string, n, size int) int64 {
	t.Helper()
	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := []byte(fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", size)))
	for i := 0; i < n; {
		batch := make([]store.Message, 0, 1000)
		for ; i < n && len(batch) < cap(batch); i++ {
			batch = append(batch, store.Message{Server: "chat", Channel: fmt.Sprintf("c%d", i%50), MessageID: fmt.Sprintf("m%d", i), Body: body, At: time.Unix(int64(i), 0)})
		}
		if _, err := d.AddMessages(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Append(ctx, lockRec("chat", "c0", store.Open)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil { // checkpoints: the -wal is in the file
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size() / pageSize
}

const pageSize = 4096 // SQLite's default, which the store keeps

// TestCorruptRefused writes garbage over pages in the middle of a closed
// store: Open refuses it with a *CorruptError naming the file, writes
// nothing to it, and leaves the lock free (a second Open is refused the
// same way, not as in use).
func TestCorruptRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.db")
	pages := fillStore(t, path, 3000, 400)
	if pages < 100 {
		t.Fatalf("the store has %d pages; the test wants many", pages)
	}
	// Intact, it opens.
	d, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open of the intact store: %v", err)
	}
	d.Close()

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 4*pageSize)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	if _, err := f.WriteAt(garbage, pages/2*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		d, err := Open(path, nil)
		if err == nil {
			d.Close()
			t.Fatalf("Open %d of the damaged store succeeded", i+1)
		}
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("Open %d of the damaged store: %v (%T), want a *CorruptError", i+1, err, err)
		}
		if ce.Path != path || (len(ce.Problems) == 0 && ce.Err == nil) || len(ce.Problems) > maxProblems {
			t.Fatalf("CorruptError %+v: want Path %s and what quick_check found (at most %d problems)", ce, path, maxProblems)
		}
		if want := "store " + path + ": the file is damaged: SQLite's quick_check found: "; !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("error %q, want it to start %q", err, want)
		}
		t.Logf("Open %d: %v", i+1, err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("the refused Opens changed the damaged file")
	}
}

// BenchmarkOpenQuickCheck is the cost of Open's quick_check on a store of
// 100,000 inbox messages of about 200 bytes (about 50 MB with its
// indexes): the figure docs/run.md gives. Each iteration is one
// PRAGMA quick_check on a fresh connection, the file in the page cache.
func BenchmarkOpenQuickCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "host.db")
	pages := fillStore(b, path, 100_000, 200)
	d, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	b.ResetTimer()
	for b.Loop() {
		if err := d.quickCheck(context.Background(), d.read); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pages*pageSize)/1e6, "MB")
}

// BenchmarkOpen is Open and Close of the same 100,000-message store:
// the quick_check and the rest of Open.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "host.db")
	fillStore(b, path, 100_000, 200)
	b.ResetTimer()
	for b.Loop() {
		d, err := Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
}
