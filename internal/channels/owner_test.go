package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// The registry as its owner runs it: the counts of requests the reference
// suite asserts, a store that never answers, and channels that come and
// go by the hundred thousand.

// TestTwoDeliveriesOneOpen: two deliveries into a closed channel send one
// open (the second joins the first's); both are delivered.
func TestTwoDeliveriesOneOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		first := rg.publishAsync("c")
		open := rg.srv.expect("open", "c")
		second := rg.publishAsync("c")
		synctest.Wait()
		open.ok()
		rg.srv.expect("publish", "c").ok()
		rg.srv.expect("publish", "c").ok()
		for _, ch := range []<-chan PublishOutcome{first, second} {
			if o := recv(t, ch); o.Status != Delivered {
				t.Errorf("publish = %s %q", o.Status, o.Text)
			}
		}
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"close c", "open c", "publish c", "publish c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

// TestReplyBehindCloseSendsNoSecondClose: a reply into a channel the agent
// is closing joins the close: no second close goes out.
func TestReplyBehindCloseSendsNoSecondClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		cl := rg.srv.expect("close", "c")
		rg.reply("c")
		synctest.Wait()
		cl.ok()
		if res := recv(t, closing); res.IsError {
			t.Errorf("channel_close = %s", res.Text())
		}
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"open c", "close c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

// TestDeliveryBehindUnansweredCloseWaitsOneDeadline: a delivery into a
// channel the agent closed, whose close the server never answers, waits
// for that close: one deadline, not two.
func TestDeliveryBehindUnansweredCloseWaitsOneDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		openedChannel(rg, desc("c", true))
		start := time.Now()
		closing := rg.toolAsync(ToolClose, `{"channelId":"c"}`)
		rg.srv.expect("close", "c") // never answered
		out := rg.publishAsync("c")
		o := recv(t, out)
		if d := time.Since(start); d != DefaultTimeout {
			t.Errorf("the delivery waited %v, want one deadline, %v", d, DefaultTimeout)
		}
		if o.Status != Failed || !strings.Contains(o.Text, "no answer in time") {
			t.Errorf("publish = %s %q", o.Status, o.Text)
		}
		recv(t, closing)
		synctest.Wait()
		rg.srv.none()
		if diff := cmp.Diff([]string{"open c", "close c"}, rg.srv.log()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

// TestFreshChannelPublishedAtOnce: a publish into a channel registered a
// moment earlier, its default close still out, opens it and is delivered,
// each of 100 times.
func TestFreshChannelPublishedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		for i := range 100 {
			id := fmt.Sprint("dm-", i)
			rg.register(desc(id, false))
			out := rg.publishAsync(id)
			rg.srv.expect("close", id).ok()
			rg.srv.expect("open", id).ok()
			rg.srv.expect("publish", id).ok()
			if o := recv(t, out); o.Status != Delivered {
				t.Fatalf("publish %d = %s %q", i, o.Status, o.Text)
			}
		}
	})
}

// wedged is a store whose appends never return until the test lets them.
type wedged struct {
	store.Store
	mu      sync.Mutex
	hold    bool
	release chan struct{}
}

func (w *wedged) Append(ctx context.Context, recs ...store.Record) ([]store.Record, error) {
	w.mu.Lock()
	hold := w.hold
	w.mu.Unlock()
	if hold {
		<-w.release
	}
	return w.Store.Append(ctx, recs...)
}

// TestCloseWithWedgedStore: a store that stops answering doesn't hold
// Close: it returns after DrainTimeout and AbandonTimeout, and says what
// it abandoned.
func TestCloseWithWedgedStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := logtest.New()
		st := &wedged{Store: store.NewMemory(), release: make(chan struct{})}
		reg, err := New(Options{Store: st, Logger: logs.Logger(), Describe: describeForTest})
		if err != nil {
			t.Fatal(err)
		}
		srv := newDouble(t, "channels.register", "channels.lifecycle")
		reg.AddServer("s", srv, ServerConfig{})
		_, start := reg.Register("s", []protocol.ChannelDescriptor{desc("c", false)})
		start()
		srv.expect("close", "c").ok()
		synctest.Wait()
		st.mu.Lock()
		st.hold = true
		st.mu.Unlock()
		done := make(chan protocol.CallToolResult, 1)
		go func() {
			done <- reg.CallTool(context.Background(), ToolOpen, json.RawMessage(`{"channelId":"c"}`), Caller{})
		}()
		synctest.Wait()
		began := time.Now()
		reg.Close()
		if d := time.Since(began); d != DrainTimeout+AbandonTimeout {
			t.Errorf("Close took %v, want %v", d, DrainTimeout+AbandonTimeout)
		}
		recs := logs.Find("channel registry closed with lifecycle work abandoned: the store or a server did not answer in time")
		if len(recs) != 1 || recs[0].Attr("decisions_unrecorded") != "1" || recs[0].Attr("requests_unanswered") != "0" {
			t.Errorf("log = %v, want one line saying a decision was left unrecorded", recs)
		}
		if res := recv(t, done); !res.IsError {
			t.Errorf("channel_open = %s, want a failure", res.Text())
		}
		// The store answers at last: the append ends, and nothing of the
		// registry is left running.
		close(st.release)
		reg.appendWG.Wait()
	})
}

// TestChurnLeavesNothing: a server that registers and removes 100,000
// channels, its closes all answered, leaves the registry with no channel
// state and the store with no record, and the heap where it was (within
// 16 MiB): a channel nobody decided needs neither.
func TestChurnLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("registers 100,000 channels; skipped under -short")
	}
	st := store.NewMemory()
	reg, err := New(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	reg.AddServer("s", &instant{}, ServerConfig{})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	churn(t, reg, 100000, 1000, false)
	if !reg.waitIdle(time.Minute) {
		t.Fatal("the registry did not settle")
	}
	var chans int
	reg.do(func(m *machine) { chans = len(m.chans) })
	if chans != 0 {
		t.Errorf("%d channel states kept, want none", chans)
	}
	if n := len(reg.Snapshot()); n != 0 {
		t.Errorf("%d channels in the snapshot, want none", n)
	}
	var recs int
	st.Replay(context.Background(), func(store.Record) error { recs++; return nil })
	if recs != 0 {
		t.Errorf("%d records in the log, want none", recs)
	}
	if after := heap(); after > before+16<<20 {
		t.Errorf("the heap grew from %d to %d bytes", before, after)
	}
}

// TestChurnOfOpenChannelsStaysBounded: the same for channels registered
// initially open, each decided open by the lift: each removal forgets its
// decision, so no state stays, and the log, compacted as it grows, stays
// within CompactAfter records and a batch.
func TestChurnOfOpenChannelsStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("registers 100,000 channels; skipped under -short")
	}
	st := store.NewMemory()
	reg, err := New(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	reg.AddServer("s", &instant{}, ServerConfig{})
	churn(t, reg, 100000, 1000, true)
	if !reg.waitIdle(time.Minute) {
		t.Fatal("the registry did not settle")
	}
	var chans int
	reg.do(func(m *machine) { chans = len(m.chans) })
	if chans != 0 {
		t.Errorf("%d channel states kept, want none", chans)
	}
	var recs int
	st.Replay(context.Background(), func(store.Record) error { recs++; return nil })
	if recs > CompactAfter+2*1000 {
		t.Errorf("%d records in the log, want at most CompactAfter and a batch's two each", recs)
	}
}

// churn registers n channels, batch at a time (initially open or not),
// and removes each batch.
func churn(tb testing.TB, reg *Registry, n, batch int, open bool) {
	for i := 0; i < n; i += batch {
		descs := make([]protocol.ChannelDescriptor, batch)
		ids := make([]string, batch)
		for j := range descs {
			ids[j] = fmt.Sprint("room-", i+j)
			descs[j] = protocol.ChannelDescriptor{ID: ids[j], InitiallyOpen: open}
		}
		_, start := reg.Register("s", descs)
		start()
		res, start := reg.Changed("s", protocol.ChannelsChangedParams{Removed: ids}, false)
		start()
		if !res.Results[0].Accepted {
			tb.Fatal(res)
		}
	}
}

// BenchmarkChurn registers and removes 1,000 channels a round: the
// registry's cost, and its memory after each round (the heap it keeps,
// in B/channel of all the rounds).
func BenchmarkChurn(b *testing.B) {
	st := store.NewMemory()
	reg, err := New(Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(reg.Close)
	reg.AddServer("s", &instant{}, ServerConfig{})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	rounds := 0
	for b.Loop() {
		churn(b, reg, 1000, 1000, false)
		rounds++
	}
	reg.waitIdle(time.Minute)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(rounds*1000), "kept-B/channel")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds*1000), "ns/channel")
}

// wedgedInbox is a store whose inbox writes never return until the test
// lets them.
type wedgedInbox struct {
	store.Store
	release chan struct{}
}

func (w *wedgedInbox) AddMessages(ctx context.Context, msgs []store.Message) ([]bool, error) {
	<-w.release
	return w.Store.AddMessages(ctx, msgs)
}

// TestCloseWithWedgedInbox: a channels/incoming whose inbox write never
// returns doesn't hold Close either: the server is told nothing was
// accepted, and Close returns within its bound, saying what it left.
// The refusal itself is no failure of the store.
func TestCloseWithWedgedInbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := logtest.New()
		st := &wedgedInbox{Store: store.NewMemory(), release: make(chan struct{})}
		reg, err := New(Options{Store: st, Logger: logs.Logger(), Describe: describeForTest})
		if err != nil {
			t.Fatal(err)
		}
		srv := newDouble(t, "channels.register", "channels.incoming")
		reg.AddServer("s", srv, ServerConfig{})
		_, start := reg.Register("s", []protocol.ChannelDescriptor{desc("c", false)})
		start()
		answered := make(chan error, 1)
		go func() {
			_, err := reg.Incoming(context.Background(), "s", []json.RawMessage{json.RawMessage(`{"channelId":"c","messageId":"m1","content":[{"type":"text","text":"hi"}]}`)})
			answered <- err
		}()
		synctest.Wait()
		began := time.Now()
		reg.Close()
		if d := time.Since(began); d > DrainTimeout+AbandonTimeout {
			t.Errorf("Close took %v, want at most %v", d, DrainTimeout+AbandonTimeout)
		}
		if err := recv(t, answered); err == nil || !strings.Contains(err.Error(), refusedClosing) {
			t.Errorf("channels/incoming = %v, want it refused, nothing accepted", err)
		}
		// A refusal at shutdown is no failure of the store: said at debug
		// (at ERROR, it broke a clean SIGINT's stderr).
		logs.One(t, "inbound channel messages refused: this host is shutting down")
		if recs := logs.Find("inbound channel messages could not be stored"); len(recs) != 0 {
			t.Errorf("log = %v, want no store failure", recs)
		}
		if recs := logs.Find("channel registry closed with inbound messages abandoned: the store did not answer in time"); len(recs) != 1 {
			t.Errorf("log = %v, want the abandoned inbox named", recs)
		}
		close(st.release)
		synctest.Wait()
	})
}
