package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/internal/status"
	"github.com/mcpl-go/mcpl/store"
)

// healthz gets the status server's /healthz.
func healthz(t *testing.T, srv *status.Server) (int, string) {
	t.Helper()
	res, err := http.Get("http://" + srv.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// burst has the channel server send count channels/incoming of one
// message of size bytes each, ids prefix-1.., and returns how it went.
func (r *agentRig) burst(prefix string, count, size int) chanserver.BurstResult {
	r.t.Helper()
	out := r.must("chat--incoming_burst", fmt.Sprintf(`{"channelId":"a","count":%d,"inflight":%d,"prefix":%q,"size":%d}`, count, count, prefix, size))
	var res chanserver.BurstResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		r.t.Fatalf("incoming_burst: %s", out)
	}
	return res
}

// inboxCount counts the inbox's messages of channel a, by id.
func (r *agentRig) inboxCount() map[string]int {
	r.t.Helper()
	n := map[string]int{}
	if err := r.st.Messages(context.Background(), 0, func(m store.Message) error {
		if m.Server == "chat" && m.Channel == "a" {
			n[m.MessageID]++
		}
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// Issue 23 item 4 through the host, with a real channel server sending
// channels/incoming: while the store's file can't grow (SetMaxPages, a
// real SQLITE_FULL) the server's messages are refused, /healthz answers
// 503 saying the store is failing, and the log has a bounded few lines,
// not one a refusal; once space is back, with no restart, the server's
// resend is accepted, each message kept once, /healthz is 200 again, and
// the log says the store writes again.
func TestStoreFullRefusesThenRecovers(t *testing.T) {
	api := fakeapi.NewOpenAI(t) // no replies: each answer ends its turn, silent
	r := newAgentRig(t, strings.Replace(openaiConfig, "APIURL", api.URL, 1), nil)
	r.serverLog(3) // the registration's opens and closes are done
	srv, err := status.Start("127.0.0.1:0", r.h, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if code, body := healthz(t, srv); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Fatalf("/healthz before = %d %q", code, body)
	}

	if _, err := r.st.SetMaxPages(1); err != nil { // the file's size now
		t.Fatal(err)
	}
	const count = 8
	var failed int
	began := time.Now()
	for round := range 2 { // two bursts, all while full
		res := r.burst("full", count, 16<<10)
		t.Logf("while full, burst %d: %d sent, %d accepted, %d failed", round, res.Sent, res.Accepted, res.FailedCount)
		failed += res.FailedCount
		for _, p := range res.Failed {
			if !strings.Contains(p.Why, "could not store the messages; none was accepted: send them again later") {
				t.Errorf("a refusal while full reads %q", p.Why)
			}
		}
	}
	elapsed := time.Since(began)
	if failed < count {
		t.Fatalf("only %d of %d messages refused while the store was full", failed, 2*count)
	}
	st := r.h.StoreHealth()
	if !st.Failing || st.FailedWrites < 1 || !strings.Contains(st.LastError, "database or disk is full") {
		t.Errorf("StoreHealth while full = %+v", st)
	}
	code, body := healthz(t, srv)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"store":"failing"`) || !strings.Contains(body, "database or disk is full") {
		t.Errorf("/healthz while full = %d %q", code, body)
	}
	// The log: in each 10 s window, a line for the store's failing and
	// one for the server's refusals, and a count of each, however many
	// refusals there were.
	var lines []logtest.Record
	turnLines := 0
	for _, l := range r.rec.AtLeast(slog.LevelError) {
		// A turn whose record failed says so once a turn (no turn starts
		// while nothing is accepted): not one of the refusals' lines.
		if strings.HasPrefix(l.Message, "an agent's turn could not be recorded") {
			turnLines++
			continue
		}
		lines = append(lines, l)
	}
	if turnLines > 3 {
		t.Errorf("%d turns not recorded while full", turnLines)
	}
	storeLines := countMsg(lines, "the store refused a write")
	windows := 1 + int(elapsed/lograte.Window)
	t.Logf("%d refusals over %v logged in %d ERROR lines", failed, elapsed.Round(time.Millisecond), len(lines))
	if storeLines < 1 || storeLines > windows || len(lines) > 4*windows {
		t.Errorf("%d refusals made %d ERROR lines (%d of the store's):\n%s", failed, len(lines), storeLines, r.rec.Dump())
	}

	if _, err := r.st.SetMaxPages(0); err != nil { // space is back
		t.Fatal(err)
	}
	// The server sends them again, as a refusal asks: every one is
	// accepted, each kept once (those accepted before are not added
	// again).
	if res := r.burst("full", count, 16<<10); res.Accepted != count {
		t.Fatalf("after space came back: %+v", res)
	}
	for id, n := range r.inboxCount() {
		if n != 1 {
			t.Errorf("message %s is in the inbox %d times", id, n)
		}
	}
	if n := len(r.inboxCount()); n != count {
		t.Errorf("the inbox holds %d of the %d messages", n, count)
	}
	if code, body := healthz(t, srv); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz after recovery = %d %q", code, body)
	}
	if st := r.h.StoreHealth(); st.Failing || st.Recovered.IsZero() {
		t.Errorf("StoreHealth after recovery = %+v", st)
	}
	var again []logtest.Record
	for _, l := range r.rec.All() {
		if strings.HasPrefix(l.Message, "the store is writing again after ") {
			again = append(again, l)
		}
	}
	if len(again) != 1 || !strings.Contains(again[0].Message, " failed writes over ") {
		t.Errorf("recovery lines: %v", again)
	}
}

func countMsg(recs []logtest.Record, prefix string) int {
	n := 0
	for _, r := range recs {
		if strings.HasPrefix(r.Message, prefix) {
			n++
		}
	}
	return n
}

// clock is a test's clock: it reads what it was last set to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Issue 23 item 7's pruning through the host: a message older than the
// retention and consumed by the agent is pruned from the inbox, and the
// server's resend of it is accepted and not kept again (the dedupe key
// outlives the message); one not yet old enough stays. After four times
// the retention the key goes too.
func TestPruneThroughHost(t *testing.T) {
	api := fakeapi.NewOpenAI(t)
	cfg := "inboxRetention: 1h\n" + strings.Replace(openaiConfig, "APIURL", api.URL, 1)
	r := prepareAgentRig(t, cfg, nil)
	clk := &clock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	r.now = clk.Now
	r.start()
	r.serverLog(3)

	r.incoming("a", "old", "an old message")
	clk.add(50 * time.Minute)
	r.incoming("a", "young", "a young message")
	// The agent consumes both: its cursor (durable, in the store) passes
	// them. (Polling: a cursor written has no event here.)
	end, err := r.st.InboxEnd(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		cur, err := r.st.Cursors(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if max(cur["agent/ada"], cur["agent/ada/chat"]) >= end {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's cursor did not reach %d within 60 s: %v", end, cur)
		}
		time.Sleep(5 * time.Millisecond)
	}

	clk.add(20 * time.Minute) // old is 70 min old, young 20
	n, err := r.h.PruneInbox(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("PruneInbox = %d, %v; want the old message pruned", n, err)
	}
	if got := r.inboxCount(); got["old"] != 0 || got["young"] != 1 {
		t.Fatalf("after pruning the inbox holds %v, want young alone", got)
	}
	// The server sends the pruned message again: accepted, not kept.
	r.incoming("a", "old", "an old message")
	if got := r.inboxCount(); got["old"] != 0 {
		t.Fatalf("a pruned message sent again is in the inbox again: %v", got)
	}

	// Past four times the retention the key is forgotten.
	clk.add(4 * time.Hour)
	if _, err := r.h.PruneInbox(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.incoming("a", "old", "an old message")
	if got := r.inboxCount(); got["old"] != 1 {
		t.Fatalf("a message sent again after its key was forgotten: the inbox holds %v", got)
	}
}
