package channels

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// A channel a push names that its server never registered is registered
// lazily: closed, listed and marked lazy, durable across a restart and a
// reconnect, replaced by the server's own registration, ended by its
// removal; a reply into it opens it first.
func TestLazyRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		ctx := context.Background()
		o := rg.reg.EnsureRegistered(ctx, "s", "dm:bob")
		if !o.Registered || !o.Lazy || !o.Directed {
			t.Fatalf("EnsureRegistered = %+v, want registered, lazy, directed", o)
		}
		ch, ok := rg.reg.Channel("s", "dm:bob")
		if !ok || !ch.Registered || !ch.Lazy || ch.Desired != "closed" || ch.Open {
			t.Fatalf("the lazy channel reads %+v, want registered, lazy and closed", ch)
		}
		if l := rg.reg.Channels(); len(l) != 1 || !l[0].Lazy {
			t.Errorf("channel_list = %+v, want the lazy channel marked lazy", l)
		}
		if again := rg.reg.EnsureRegistered(ctx, "s", "dm:bob"); !again.Registered || !again.Lazy {
			t.Errorf("EnsureRegistered again = %+v", again)
		}
		lazyRecords := func() int {
			n := 0
			if err := rg.st.Replay(ctx, func(r store.Record) error {
				if r.Kind == store.KindLazy {
					n++
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := lazyRecords(); n != 1 {
			t.Errorf("lazy records = %d, want 1 (the second call found it registered)", n)
		}

		// A reply into it opens it first, as into any closed channel.
		out := rg.publishAsync("dm:bob")
		rg.srv.expect("open", "dm:bob").answer(map[string]any{"channel": map[string]any{"id": "dm:bob", "type": "dm", "label": "@bob", "tags": []string{"chat:dm"},
			"capabilities": map[string]any{"publish": map[string]string{"target": "root"}}}})
		rg.srv.expect("publish", "dm:bob").answer(map[string]any{"delivered": true, "messageId": "m1"})
		if o := recv(t, out); o.Status != Delivered {
			t.Fatalf("publish into the lazy channel = %+v", o)
		}
		// The open's answer describes it: its label, privacy and target
		// as its server has them; still lazy, its target unchanged (no
		// second open).
		if ch, _ := rg.reg.Channel("s", "dm:bob"); !ch.Lazy || ch.Label != "@bob" || !ch.Private || ch.PublishTarget != "root" || ch.Type != "" {
			t.Errorf("after its open the lazy channel reads %+v, want the server's label, privacy and target, still lazy", ch)
		}
		synctest.Wait()
		rg.srv.none()

		// A restart: the lazy channel is live again once its server is,
		// and, decided open by the reply, opened again once the server's
		// connection is up.
		rg.reg.Close()
		rg.open()
		ch, ok = rg.reg.Channel("s", "dm:bob")
		if !ok || !ch.Registered || !ch.Lazy {
			t.Fatalf("after a restart the lazy channel reads %+v (known %v), want it registered and lazy", ch, ok)
		}
		rg.reg.Connected("s")
		rg.srv.expect("open", "dm:bob").ok()
		synctest.Wait()
		if ch, _ := rg.reg.Channel("s", "dm:bob"); !ch.Open || ch.Desired != "open" {
			t.Errorf("after the reconnect the lazy channel reads %+v, want it open again", ch)
		}

		// The server's own registration takes its place.
		rg.register(protocol.ChannelDescriptor{ID: "dm:bob", Type: "dm", Label: "@bob"})
		if ch, _ := rg.reg.Channel("s", "dm:bob"); ch.Lazy || ch.Label != "@bob" {
			t.Errorf("after the server registered it: %+v, want its own descriptor, not lazy", ch)
		}
		// Its removal ends the lazy registration for good.
		rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"dm:bob"}}, false)
		synctest.Wait()
		rg.reg.Close()
		rg.open()
		if ch, ok := rg.reg.Channel("s", "dm:bob"); ok && ch.Registered {
			t.Errorf("after its removal and a restart the channel reads %+v, want it gone", ch)
		}
	})
}

// A lazy registration's record outlives a compaction of the log.
func TestLazyRegistrationKeptByCompaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.compactAfter = 4
		rg.reg.Close()
		rg.open()
		ctx := context.Background()
		if o := rg.reg.EnsureRegistered(ctx, "s", "dm:kept"); !o.Registered {
			t.Fatalf("EnsureRegistered = %+v", o)
		}
		// Decisions enough to compact the log several times over.
		for i := range 12 {
			id := fmt.Sprintf("c%d", i)
			rg.register(desc(id, true))
			rg.srv.expect("open", id).ok()
			synctest.Wait()
			rg.tool("channel_close", `{"channelId":"`+id+`"}`)
			rg.srv.expect("close", id).ok()
			synctest.Wait()
		}
		rg.reg.Close()
		n := 0
		rg.st.Replay(ctx, func(store.Record) error { n++; return nil })
		if n >= 25 {
			t.Fatalf("the log holds %d records: it was never compacted", n)
		}
		rg.open()
		if ch, ok := rg.reg.Channel("s", "dm:kept"); !ok || !ch.Lazy {
			t.Errorf("after compactions and a restart the lazy channel reads %+v (known %v)", ch, ok)
		}
	})
}

// What can't be registered lazily says why: an id no agent could repeat,
// a server that is not here, the bound.
func TestLazyRegistrationRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		ctx := context.Background()
		for _, tc := range []struct{ server, id, why string }{
			{"s", "", "empty"},
			{"s", "dm\u202ebob", "invisible"},
			{"s", strings.Repeat("x", MaxIDBytes+1), "longer than 512 bytes"},
			{"gone", "dm:x", "not connected"},
		} {
			if o := rg.reg.EnsureRegistered(ctx, tc.server, tc.id); o.Registered || !strings.Contains(o.Why, tc.why) {
				t.Errorf("EnsureRegistered(%q, %q) = %+v, want refused saying %q", tc.server, tc.id, o, tc.why)
			}
		}
		rg.srv.setGrant("channels.publish", false)
		if o := rg.reg.EnsureRegistered(ctx, "s", "dm:x"); o.Registered || !strings.Contains(o.Why, "not granted channels.publish") {
			t.Errorf("without channels.publish: %+v", o)
		}
		rg.srv.setGrant("channels.publish", true)

		// At the bound the oldest that is not decided open makes room.
		rg.reg.do(func(m *machine) {
			for i := range MaxLazyPerServer {
				m.rememberLazy(Key{"s", fmt.Sprint("pre-", i)}, int64(i+1))
			}
		})
		if o := rg.reg.EnsureRegistered(ctx, "s", "one-more"); !o.Registered {
			t.Errorf("past the bound, with room to make: %+v", o)
		}
		rg.reg.do(func(m *machine) {
			if _, kept := m.lazy["s"]["pre-0"]; kept || len(m.lazy["s"]) != MaxLazyPerServer {
				t.Errorf("after making room: pre-0 kept %v, %d lazy, want the oldest gone and %d", kept, len(m.lazy["s"]), MaxLazyPerServer)
			}
			// Every one decided open: none can go.
			for ch := range m.lazy["s"] {
				c := m.chanOf(Key{"s", ch})
				c.decision = &store.Record{Kind: store.KindDecision, State: store.Open}
			}
		})
		if o := rg.reg.EnsureRegistered(ctx, "s", "one-too-many"); o.Registered || !strings.Contains(o.Why, "the most this host keeps") {
			t.Errorf("past the bound, every one decided open: %+v", o)
		}
	})
}

// While a registration's lift is being recorded the channel reads as
// lifting, so a reader waits for its decision; once it is durable, it
// reads open and OnRegistered says so again.
func TestLiftingWhileItsDecisionIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &wedged{Store: store.NewMemory(), release: make(chan struct{}), hold: true}
		var woken atomic.Int32
		reg, err := New(Options{Store: st, Describe: describeForTest, OnRegistered: func() { woken.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		srv := newDouble(t, "channels.register", "channels.lifecycle")
		reg.AddServer("s", srv, ServerConfig{})
		_, start := reg.Register("s", []protocol.ChannelDescriptor{desc("general", true)})
		start()
		synctest.Wait()
		if ch, _ := reg.Channel("s", "general"); !ch.Registered || !ch.Lifting || ch.Desired != "closed" {
			t.Fatalf("while its lift is recorded the channel reads %+v, want registered and lifting", ch)
		}
		before := woken.Load()
		close(st.release)
		srv.expect("open", "general").ok()
		synctest.Wait()
		if ch, _ := reg.Channel("s", "general"); ch.Lifting || ch.Desired != "open" {
			t.Errorf("after its lift the channel reads %+v, want it open and not lifting", ch)
		}
		if woken.Load() == before {
			t.Error("OnRegistered was not called once the lift was recorded")
		}
	})
}
