package host

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/inbox"
	"github.com/mcpl-go/mcpl/internal/logtest"
)

// A window's end logs what it summed and keeps the window open; a window
// that summed nothing closes, so the next duplicate is logged at once.
// Servers are windowed apart. The window is shortened; the test waits
// for lines, with a deadline, not for time.
func TestDuplicatesWindow(t *testing.T) {
	rec := logtest.New()
	d := newDuplicates(rec.Logger(), nil)
	d.window = 50 * time.Millisecond
	defer d.close()
	dup := func(server string, ids ...string) {
		var ds []inbox.Duplicate
		for _, id := range ids {
			ds = append(ds, inbox.Duplicate{Server: server, MessageID: id})
		}
		d.seen(ds)
	}
	lines := func() []string {
		var out []string
		for _, r := range rec.All() {
			out = append(out, r.Attr("server")+" "+r.Attr("count")+" "+r.Attr("first_id")+"…"+r.Attr("last_id"))
		}
		return out
	}
	wait := func(n int) {
		t.Helper()
		rec.WaitFunc(t, "log lines", func(rs []logtest.Record) bool { return len(rs) >= n })
	}

	dup("a", "a-1", "a-2") // logged at once
	dup("b", "b-1")        // another server: logged at once
	dup("a", "a-3")        // summed
	dup("a", "a-4", "a-5") // summed
	if got := strings.Join(lines(), "; "); got != "a 2 a-1…a-2; b 1 b-1…b-1" {
		t.Fatalf("before the window ends: %s", got)
	}
	wait(3)
	// The window ended with a-3 … a-5 summed; the next window sums
	// nothing, ends, and closes, and the next duplicate is logged at once.
	d.mu.Lock()
	open := d.servers["a"] != nil
	d.mu.Unlock()
	if !open {
		t.Fatal("a's window closed though it had summed duplicates")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		open = d.servers["a"] != nil || d.servers["b"] != nil
		d.mu.Unlock()
		if !open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the windows that summed nothing did not close")
		}
		time.Sleep(5 * time.Millisecond)
	}
	dup("a", "a-6")
	wait(4)
	if got := strings.Join(lines(), "; "); got != "a 2 a-1…a-2; b 1 b-1…b-1; a 3 a-3…a-5; a 1 a-6…a-6" {
		t.Errorf("lines: %s", got)
	}
	if got := rec.All()[2].Message; got != DuplicatesText("a", 3, "a-3", "a-5") {
		t.Errorf("the summary: %s", got)
	}
}
