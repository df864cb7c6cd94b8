package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// Issue 27 item 2: a server that numbers its messages from 1 on every run
// is deduplicated against its last run's from its second run on. Here the
// channel server (a real subprocess) sends chat-1 … chat-3 to a host,
// which stops; a second host on the same SQLite store runs it again, and
// it sends the same ids again. The second run's are not added (the inbox
// still holds each once), and that is no longer silent: each is counted
// in mcpl_inbox_duplicates_total{server="chat"}, and logged at info,
// naming the server, the count and the id range: the first at once, the
// two that follow within the window (lograte.Window) summed into one line,
// which the host's Close logs.
func TestInboxDuplicatesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cfgText := "servers:\n  - id: chat\n    command: " + list(chanserver.Binary(t), "-channels", chatChannels) + "\n"
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "host.db")

	// run starts a host on the store, has the server send each id in a
	// channels/incoming of its own, each accepted, and closes the host.
	run := func(ids ...string) (*recorder, *prometheus.Registry) {
		t.Helper()
		st, err := sqlite.Open(dbPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rec, reg := newRecorder(), prometheus.NewRegistry()
		h, err := host.New(host.Options{Logger: rec.Logger(), Store: st, Metrics: reg})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if err := h.Start(cfg); err != nil {
			t.Fatal(err)
		}
		<-h.Settled()
		for _, id := range ids {
			res, err := h.CallTool(context.Background(), "chat--incoming", json.RawMessage(fmt.Sprintf(`{"channelId":"a","messageId":%q,"text":"hello"}`, id)))
			if err != nil {
				t.Fatal(err)
			}
			if out := res.Text(); !strings.Contains(out, `"accepted":true`) {
				t.Fatalf("channels/incoming of %s: %s", id, out)
			}
		}
		h.Close()
		return rec, reg
	}
	// dupLines are rec's lines about duplicates.
	dupLines := func(rec *recorder) []string {
		var out []string
		for _, r := range rec.All() {
			if strings.Contains(r.Message, "already in the inbox") {
				out = append(out, r.Message)
			}
		}
		return out
	}

	rec1, reg1 := run("chat-1", "chat-2", "chat-3")
	if got := dupLines(rec1); len(got) != 0 {
		t.Errorf("the first run logged duplicates: %q", got)
	}
	if n := testutil.CollectAndCount(reg1, "mcpl_inbox_duplicates_total"); n != 0 {
		t.Errorf("the first run has %d duplicates series", n)
	}

	// The second run: chat-1 is logged at once; chat-2 and chat-3 come
	// within its window, so they are summed, and Close logs the sum.
	rec2, reg2 := run("chat-1", "chat-2", "chat-3")
	want := `# HELP mcpl_inbox_duplicates_total Inbound messages and push events not added to the inbox because one with their server and id was there already (deduplicated, not delivered again), by server.
# TYPE mcpl_inbox_duplicates_total counter
mcpl_inbox_duplicates_total{server="chat"} 3
`
	if err := testutil.GatherAndCompare(reg2, strings.NewReader(want), "mcpl_inbox_duplicates_total"); err != nil {
		t.Error(err)
	}
	const why = " and were not delivered again: a server that numbers its messages from 1 on every run needs ids unique across runs"
	wantLines := []string{
		"1 message from chat was already in the inbox (id chat-1) and was not delivered again: a server that numbers its messages from 1 on every run needs ids unique across runs",
		"2 messages from chat were already in the inbox (ids chat-2 … chat-3)" + why,
	}
	if got := dupLines(rec2); strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("the second run's duplicate lines:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}
	line := rec2.One(t, wantLines[1])
	if line.Level != slog.LevelInfo || line.Attr("server") != "chat" || line.Attr("count") != "2" || line.Attr("first_id") != "chat-2" || line.Attr("last_id") != "chat-3" {
		t.Errorf("the summary line: %+v", line)
	}

	// The inbox holds each id once.
	st, err := sqlite.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	count := map[string]int{}
	if err := st.Messages(context.Background(), 0, func(m store.Message) error {
		count[m.MessageID]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(count) != 3 || count["chat-1"] != 1 || count["chat-2"] != 1 || count["chat-3"] != 1 {
		t.Errorf("the inbox holds %v, want chat-1 … chat-3 once each", count)
	}
}
