package host

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/inbox"
	"github.com/mcpl-go/mcpl/internal/logtest"
)

// A window's end logs what it summed and keeps the window open; a window
// that summed nothing closes, so the next duplicate is logged at once.
// Servers are windowed apart. On the synctest clock, with the real window.
func TestDuplicatesWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := logtest.New()
		d := newDuplicates(rec.Logger(), nil)
		defer d.close()
		dup := func(server string, ids ...string) {
			var ds []inbox.Duplicate
			for _, id := range ids {
				ds = append(ds, inbox.Duplicate{Server: server, MessageID: id})
			}
			d.seen(ds)
		}
		lines := func() string {
			var out []string
			for _, r := range rec.All() {
				out = append(out, r.Attr("server")+" "+r.Attr("count")+" "+r.Attr("first_id")+"…"+r.Attr("last_id"))
			}
			return strings.Join(out, "; ")
		}
		open := func(server string) bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.servers[server] != nil
		}

		dup("a", "a-1", "a-2") // logged at once
		dup("b", "b-1")        // another server: logged at once
		dup("a", "a-3")        // summed
		time.Sleep(d.window / 2)
		dup("a", "a-4", "a-5") // summed
		if got := lines(); got != "a 2 a-1…a-2; b 1 b-1…b-1" {
			t.Fatalf("before the window ends: %s", got)
		}
		time.Sleep(d.window / 2)
		synctest.Wait()
		// The window ended with a-3 … a-5 summed, and stays open.
		if got := lines(); got != "a 2 a-1…a-2; b 1 b-1…b-1; a 3 a-3…a-5" {
			t.Fatalf("after the window: %s", got)
		}
		if !open("a") {
			t.Fatal("a's window closed though it had summed duplicates")
		}
		// The next windows sum nothing, end, and close; the next duplicate
		// is logged at once.
		time.Sleep(d.window)
		synctest.Wait()
		if open("a") || open("b") {
			t.Fatal("the windows that summed nothing did not close")
		}
		dup("a", "a-6")
		if got := lines(); got != "a 2 a-1…a-2; b 1 b-1…b-1; a 3 a-3…a-5; a 1 a-6…a-6" {
			t.Errorf("lines: %s", got)
		}
		if got := rec.All()[2].Message; got != DuplicatesText("a", 3, "a-3", "a-5") {
			t.Errorf("the summary: %s", got)
		}
	})
}
