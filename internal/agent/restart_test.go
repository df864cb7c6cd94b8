package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

// crashed is a store that stops writing once the process "dies".
type crashed struct {
	store.Store
	dead atomic.Bool
}

func (c *crashed) Record(ctx context.Context, e []store.Entry, cur map[string]int64) ([]store.Entry, error) {
	if c.dead.Load() {
		return nil, errors.New("the process died")
	}
	return c.Store.Record(ctx, e, cur)
}

// A fork's message survives a crash before its turn is recorded, though
// the primary passed it at once.
func TestForkMessageSurvivesACrash(t *testing.T) {
	mem := store.NewMemory()
	st := &crashed{Store: mem}
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{held: true} // the fork's turn never ends
		h := startWith(t, Options{Store: st, PerChannel: true, Agents: []Spec{{Name: "ada", Model: m}}}, "open")
		addMessages(t, mem, chanMsg("chat", "general", "g1", "lost?"))
		h.rt.Wake()
		synctest.Wait()
		if len(m.requests()) != 1 {
			t.Fatal("the fork is not thinking")
		}
		st.dead.Store(true) // crash: nothing more is recorded
		h.rt.Close()
	})
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{Store: mem, PerChannel: true}, "open")
		defer h.rt.Close()
		synctest.Wait()
		if evs := h.rec.of(forkGeneral, EventShown); len(evs) != 1 {
			t.Errorf("after the restart the fork was shown %+v; want g1 again (cursors %v)", evs, h.cursors())
		}
	})
}

// A turn cut short by shutdown before it did anything is shown again at
// the next start.
func TestAbortedTurnIsShownAgain(t *testing.T) {
	mem := store.NewMemory()
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{Store: mem, Agents: []Spec{{Name: "ada", Model: &fakeModel{held: true}}}}, "open")
		h.add(chanMsg("chat", "general", "g1", "think hard"))
		h.rt.Close()
	})
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{Store: mem}, "open")
		defer h.rt.Close()
		synctest.Wait()
		if reqs := h.model.requests(); len(reqs) != 1 || !containsText(userTexts(reqs[0].Messages), "think hard") {
			t.Errorf("after the restart the model was asked %d times", len(reqs))
		}
	})
}

// A notice that comes once the agents have stopped (a lifecycle request
// the host drains at shutdown) is recorded, and read at the next start.
func TestNoticeAfterStopIsKept(t *testing.T) {
	mem := store.NewMemory()
	notice := channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByReply, Server: "chat", Agent: "ada",
		Channels: []channels.ChannelRef{{ID: "b", Label: "#b"}}}
	synctest.Test(t, func(t *testing.T) {
		opts := Options{Store: mem}
		h := setup(t, &opts)
		h.start(opts)
		synctest.Wait()
		h.rt.Close()
		h.rt.Notice(notice)
	})
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{Store: mem}, "open")
		defer h.rt.Close()
		h.add(chanMsg("chat", "general", "g1", "hello"))
		reqs := h.model.requests()
		if len(reqs) != 1 || !containsText(userTexts(reqs[0].Messages), "[channels] Now open: #b (b)") {
			t.Errorf("the notice from before the restart was not shown: %d requests", len(reqs))
		}
	})
}

// Forks come back at a start and go on consuming their channel's traffic,
// shown or not: a fork doesn't read stale traffic when its channel opens
// again.
func TestForksComeBackAtStart(t *testing.T) {
	mem := store.NewMemory()
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{Store: mem, PerChannel: true}, "open")
		h.add(chanMsg("chat", "general", "g1", "first"))
		h.rt.Close()
	})
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{Store: mem, PerChannel: true}, "closed")
		h.add(chanMsg("chat", "general", "g2", "while closed"))
		if c := h.cursors()[cursorName(forkGeneral)]; c != 2 {
			t.Errorf("the fork's cursor is %d after its closed channel's message, want 2", c)
		}
		h.rt.Close()
	})
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{Store: mem, PerChannel: true}, "open")
		defer h.rt.Close()
		h.add(chanMsg("chat", "general", "g3", "open again"))
		for _, req := range h.model.requests() {
			if containsText(userTexts(req.Messages[len(req.Messages)-1:]), "while closed") {
				t.Errorf("the fork was shown stale traffic: %q", userTexts(req.Messages))
			}
		}
		if evs := h.rec.of(forkGeneral, EventTurnStart); len(evs) != 1 || evs[0].WokenBy[0].MessageID != "g3" {
			t.Errorf("turns %+v", evs)
		}
	})
}

// An invitation says where a reply goes: this turn's prose goes to the
// newest addressed channel, so an older invitation points at
// channel_publish.
func TestInvitationsInOneTurn(t *testing.T) {
	bubble(t, Options{}, func(h *harness) {
		h.env.channel("chat", "x", "closed")
		h.env.channel("chat", "y", "closed")
		addMessages(t, h.st, chanMsg("chat", "x", "mx", "in x", content.TagAddressed), chanMsg("chat", "y", "my", "in y", content.TagAddressed))
		h.rt.Wake()
		synctest.Wait()
		reqs := h.model.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d model calls", len(reqs))
		}
		shown := strings.Join(userTexts(reqs[0].Messages), "\n")
		for _, want := range []string{
			`1. Reply there: call channel_publish with channelId "x" and serverId "chat" (what you say this turn goes to another channel); posting opens the channel, so its traffic reaches you from then on.`,
			"1. Reply there: what you say this turn is posted to #y (y), and posting it opens the channel, so its traffic reaches you from then on.",
		} {
			if !strings.Contains(shown, want) {
				t.Errorf("the model was not shown %q in:\n%s", want, shown)
			}
		}
	})
}

// A server that runs its channels itself (no channels.lifecycle) decides
// what it delivers: all of it is shown, with no invitation.
func TestChannelsWithoutLifecycle(t *testing.T) {
	bubble(t, Options{}, func(h *harness) {
		h.env.mu.Lock()
		h.env.chans[[2]string{"chat", "free"}] = channels.ListedChannel{ID: "free", ServerID: "chat", Desired: "unknown"}
		h.env.mu.Unlock()
		h.add(chanMsg("chat", "free", "f1", "ambient"))
		reqs := h.model.requests()
		if len(reqs) != 1 || containsText(userTexts(reqs[0].Messages), "[Channel invitation]") {
			t.Errorf("%d model calls; shown %q", len(reqs), userTexts(reqs[0].Messages))
		}
	})
}

// TestStopLetsTurnsEnd: Stop lets a turn in flight end by itself within
// its grace, starts no new one, and leaves untaken messages for the next
// start; past the grace, what is left is cut short.
func TestStopLetsTurnsEnd(t *testing.T) {
	t.Run("within the grace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &fakeModel{held: true}
			h := startWith(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, "open")
			h.add(chanMsg("chat", "general", "g1", "first"))
			stopped := make(chan struct{})
			go func() {
				h.rt.Stop(time.Minute)
				close(stopped)
			}()
			synctest.Wait()
			// Stopping: a message now is left for the next start.
			addMessages(t, h.st, chanMsg("chat", "general", "g2", "second"))
			h.rt.Wake()
			release(m)
			<-stopped
			if evs := h.rec.of("ada", EventTurnEnd); len(evs) != 1 || evs[0].Reason != "end_turn" {
				t.Errorf("turn ends %+v, want one that ended by itself", evs)
			}
			if n := len(m.requests()); n != 1 {
				t.Errorf("%d model calls; the second message started a turn", n)
			}
		})
	})
	t.Run("past the grace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &fakeModel{held: true}
			h := startWith(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, "open")
			h.add(chanMsg("chat", "general", "g1", "first"))
			start := time.Now()
			h.rt.Stop(10 * time.Second)
			if d := time.Since(start); d != 10*time.Second {
				t.Errorf("Stop took %s, want the 10s grace", d)
			}
			if evs := h.rec.of("ada", EventTurnEnd); len(evs) != 1 || evs[0].Reason != "aborted" {
				t.Errorf("turn ends %+v, want one cut short", evs)
			}
		})
	})
}

// TestUnregisteredChannelWaits: after a restart, a message whose channel
// its server has not registered again waits for the registration (here,
// the server connected a moment ago), holding back that server's later
// messages and no other server's.
func TestUnregisteredChannelWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{}, "open")
		defer h.rt.Close()
		h.env.mu.Lock()
		h.env.connected["own"] = time.Now()
		h.env.mu.Unlock()
		h.add(chanMsg("own", "room", "o1", "waiting first"), chanMsg("own", "room", "o2", "waiting second"), chanMsg("chat", "general", "g1", "not held"))
		reqs := h.model.requests()
		if len(reqs) != 1 || !containsText(userTexts(reqs[0].Messages), "not held") || containsText(userTexts(reqs[0].Messages), "waiting") {
			t.Fatalf("model calls before own registered its channel = %d (%v), want one, with chat's message only", len(reqs), reqs)
		}
		// The server registers it (a channel it runs itself): the agent
		// is woken and reads both, in order.
		h.env.mu.Lock()
		h.env.chans[[2]string{"own", "room"}] = channels.ListedChannel{ID: "room", ServerID: "own", Desired: "unknown", Registered: true}
		h.env.mu.Unlock()
		h.rt.Wake()
		synctest.Wait()
		reqs = h.model.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls after the registration, want 2", len(reqs))
		}
		texts := userTexts([]model.Message{lastUser(t, reqs[1])})
		shown := strings.Join(texts, "\n")
		if first, second := strings.Index(shown, "waiting first"), strings.Index(shown, "waiting second"); first < 0 || second < first {
			t.Errorf("second turn shows %q, want o1 then o2", texts)
		}
	})
}

// TestGoneChannelShownAfterTheWait: a message whose channel is never
// registered again is judged once its server has been connected for
// RegistrationWait, as from a channel that is gone: its server ran its
// own channels when it came, so it is shown, and its header says so.
func TestGoneChannelShownAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{}, "open")
		defer h.rt.Close()
		h.env.mu.Lock()
		h.env.connected["own"] = time.Now()
		h.env.mu.Unlock()
		m := chanMsg("own", "room", "o1", "from a gone room")
		m.At = time.Now()
		h.add(m)
		if n := len(h.model.requests()); n != 0 {
			t.Fatalf("%d model calls before the wait ended", n)
		}
		time.Sleep(RegistrationWait)
		synctest.Wait()
		reqs := h.model.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d model calls after the wait, want 1", len(reqs))
		}
		texts := userTexts(reqs[0].Messages)
		if !containsText(texts, "[room on own (no longer registered) · from bob · message o1 · at ") || !containsText(texts, "from a gone room") {
			t.Errorf("shown %q, want the message with a header saying its channel is gone", texts)
		}
	})
}

// TestGoneDirectedChannelNotShown: the same message from a server this
// host directed when it came (closed by default, as nobody decided) is
// consumed unseen, as it would have been.
func TestGoneDirectedChannelNotShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startWith(t, Options{}, "open")
		defer h.rt.Close()
		m := chanMsg("own", "room", "o1", "closed by default")
		m.Directed = true
		m = h.add(m)[0]
		time.Sleep(GoneWait)
		synctest.Wait()
		if n := len(h.model.requests()); n != 0 {
			t.Fatalf("%d model calls, want none", n)
		}
		if c := h.cursors()[serverCursorName("ada", "own")]; c != m.Seq {
			t.Errorf("cursor in own = %d, want %d: consumed unseen", c, m.Seq)
		}
	})
}

// startWith sets up a harness on opts, with chat's #general in state
// ("open" or "closed"), and starts the runtime: each run of a restart
// test is a process of its own on the same store.
func startWith(t *testing.T, opts Options, general string) *harness {
	t.Helper()
	h := setup(t, &opts)
	h.env.channel("chat", "general", general)
	h.start(opts)
	return h
}
