package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

// How forks come and go, and what the router does when one can't be made.

// TestForkRetires: a fork idle for ForkIdle ends: its goroutine goes, its
// cursor is dropped (a restart doesn't make it again), it is an ended
// reader for the notice rules (seeds/000: a notice for an ended replier
// goes to the primary by name), and its channel's next message starts a
// new fork that goes on with the recorded conversation.
func TestForkRetires(t *testing.T) {
	bubble(t, Options{PerChannel: true, ForkIdle: time.Hour}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "g1", "remember the word pelican"))
		if _, ok := h.cursors()[cursorName(forkGeneral)]; !ok {
			t.Fatal("the fork has no cursor")
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if _, ok := h.cursors()[cursorName(forkGeneral)]; ok {
			t.Errorf("the retired fork's cursor is still there: %v", h.cursors())
		}
		rd, ok := h.rt.Readers()[forkGeneral]
		if !ok || !rd.Ended {
			t.Fatalf("the fork as a reader after it retired: %+v, %v; want it ended", rd, ok)
		}
		h.rt.mu.Lock()
		_, live := h.rt.forks[forkKey{"chat", "general"}]
		h.rt.mu.Unlock()
		if live {
			t.Error("the retired fork is still among the forks")
		}
		// A reply of the ended fork whose open failed, the channel
		// selected for opening: the primary is told, by name.
		h.rt.Notice(channels.Notice{Kind: channels.NoticeReplyOpenFailed, Cause: channels.SourceOpenedByReply, Server: "chat", Agent: forkGeneral,
			Channels: []channels.ChannelRef{{ID: "general", Label: "#general"}}, Tool: "chat--send_message", Opening: true,
			SelectedForOpening: channels.SelectedServerBootstrap, Reason: "no room"})
		h.add(pushMsg("feed", "e1", "wake the primary"))
		notes := h.rec.of("ada", EventNotice)
		if len(notes) != 1 || !strings.Contains(notes[0].Text, forkGeneral+"'s reply through chat--send_message went out") {
			t.Errorf("the primary's notices %+v, want the ended fork's reply named", notes)
		}
		// The channel's next message: a new fork, with the conversation.
		h.add(chanMsg("chat", "general", "g2", "what was the word?"))
		reqs := requestsShowing(h.model.requests(), "what was the word?")
		if len(reqs) != 1 || !containsText(userTexts(reqs[0].Messages), "remember the word pelican") {
			t.Fatalf("the new fork's request %v, want it to carry the old conversation", reqs)
		}
		if rd := h.rt.Readers()[forkGeneral]; rd.Ended {
			t.Error("the new fork reads as ended")
		}
	})
}

// TestBusyForkDoesNotRetire: a fork whose channel keeps talking never
// sits idle for ForkIdle.
func TestBusyForkDoesNotRetire(t *testing.T) {
	bubble(t, Options{PerChannel: true, ForkIdle: time.Hour}, func(h *harness) {
		h.env.channel("chat", "general", "open")
		for i := range 3 {
			h.add(chanMsg("chat", "general", fmt.Sprint("g", i), "still here"))
			time.Sleep(40 * time.Minute)
			synctest.Wait()
		}
		if rd := h.rt.Readers()[forkGeneral]; rd.Ended {
			h.t.Error("a fork that was never idle for ForkIdle ended")
		}
	})
}

// failingForks is a store whose records of forks' cursors fail while
// failing is set.
type failingForks struct {
	store.Store
	mu      sync.Mutex
	failing bool
	tries   int
}

func (f *failingForks) Record(ctx context.Context, e []store.Entry, cur map[string]int64) ([]store.Entry, error) {
	f.mu.Lock()
	_, fork := cur[cursorName(forkGeneral)]
	if fork && len(e) == 0 {
		f.tries++
	}
	fail := f.failing && fork && len(e) == 0
	f.mu.Unlock()
	if fail {
		return nil, errors.New("disk full")
	}
	return f.Store.Record(ctx, e, cur)
}

// TestForkNotMadeIsShownLater: when a new fork's cursor can't be
// recorded, the fork isn't made and the router stops at its message,
// trying again: once the store works, the message is shown, not lost.
func TestForkNotMadeIsShownLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		st := &failingForks{Store: mem, failing: true}
		opts := Options{Store: st, PerChannel: true}
		h := setup(t, &opts)
		h.st = mem
		h.env.channel("chat", "general", "open")
		h.start(opts)
		defer h.rt.Close()
		synctest.Wait()
		h.add(chanMsg("chat", "general", "g1", "not lost"))
		if n := len(h.model.requests()); n != 0 {
			t.Fatalf("%d model calls while the fork could not be made", n)
		}
		time.Sleep(retryAfter)
		synctest.Wait()
		if n := len(h.model.requests()); n != 0 {
			t.Fatalf("%d model calls while the store still fails", n)
		}
		st.mu.Lock()
		tries := st.tries
		st.failing = false
		st.mu.Unlock()
		if tries < 2 {
			t.Errorf("the router tried to make the fork %d times, want it to try again", tries)
		}
		time.Sleep(retryAfter)
		synctest.Wait()
		if reqs := requestsShowing(h.model.requests(), "not lost"); len(reqs) != 1 {
			t.Errorf("%d requests show the message once the store works, want 1", len(reqs))
		}
	})
}

// limited is a model that refuses a request of more than max bytes of
// text, as a provider refuses one past its limit.
type limited struct {
	fakeModel
	max int
}

var errTooLarge = errors.New("request too large")

func (m *limited) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	n := len(req.System)
	for _, msg := range req.Messages {
		for _, b := range msg.Content {
			n += len(b.Text)
			if b.Result != nil {
				for _, c := range b.Result.Content {
					n += len(c.Text)
				}
			}
		}
	}
	if n > m.max {
		m.fakeModel.mu.Lock()
		m.fakeModel.errs = append(m.fakeModel.errs, errTooLarge)
		m.fakeModel.mu.Unlock()
		return model.Response{}, errTooLarge
	}
	return m.fakeModel.Generate(ctx, req)
}

func (m *limited) Info() model.Info {
	return model.Info{ID: "limited", Vendor: "test", ContextWindow: 100000}
}

// TestLargeMessageDoesNotBreakLaterTurns: a 10 MB message is shown cut,
// saying so with its size, and kept cut: against a model that refuses
// requests over 1 MB, the turn it wakes and the ten after it all succeed.
func TestLargeMessageDoesNotBreakLaterTurns(t *testing.T) {
	m := &limited{max: 1 << 20}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "big", strings.Repeat("x", 10<<20)))
		for i := range 10 {
			h.add(chanMsg("chat", "general", fmt.Sprint("s", i), "a small one"))
		}
		m.mu.Lock()
		errs := append([]error(nil), m.errs...)
		m.mu.Unlock()
		for i, err := range errs {
			if err != nil {
				t.Errorf("model call %d failed: %v", i+1, err)
			}
		}
		if len(errs) != 11 {
			t.Errorf("%d model calls, want 11", len(errs))
		}
		reqs := m.requests()
		if len(reqs) == 0 || !containsText(userTexts(reqs[0].Messages), "[host] This is cut: it is 10.5 MB, more than this agent is shown of one message, and the first ") {
			t.Errorf("the first request doesn't say the message was cut")
		}
	})
}

// TestBacklogFitsTheWindow: a backlog larger than half of what the window
// leaves is shown as its newest messages, the rest counted; no request is
// over the window's estimate.
func TestBacklogFitsTheWindow(t *testing.T) {
	m := &fakeModel{held: true}
	small := &windowed{fakeModel: m, window: 8000}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: small}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(chanMsg("chat", "general", "first", "first"))
		var msgs []store.Message
		for i := range 60 {
			msgs = append(msgs, chanMsg("chat", "general", fmt.Sprintf("m%03d", i), strings.Repeat("word ", 100)))
		}
		h.add(msgs...)
		release(m)
		release(m)
		reqs := m.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests, want 2", len(reqs))
		}
		texts := userTexts([]model.Message{lastUser(t, reqs[1])})
		if !containsText(texts, "earlier messages were left out of this turn") || !containsText(texts, "m059") || containsText(texts, "m000]") {
			t.Errorf("the backlog's turn shows %d texts, want the newest with a line counting the rest", len(texts))
		}
		for i, req := range reqs {
			if n := messagesTokens(req.Messages) + textTokens(req.System) + toolTokens(req.Tools); n > 8000 {
				t.Errorf("request %d is %d tokens by the estimate, over the 8,000 window", i+1, n)
			}
		}
	})
}

// windowed is a fake model with a context window of its own.
type windowed struct {
	*fakeModel
	window int
}

func (m *windowed) Info() model.Info {
	return model.Info{ID: "windowed", Vendor: "test", ContextWindow: m.window}
}

// counting is a store that counts the inbox rows its pages return.
type counting struct {
	store.Store
	mu   sync.Mutex
	rows int
}

func (c *counting) Page(ctx context.Context, q store.InboxQuery) ([]store.Message, error) {
	page, err := c.Store.Page(ctx, q)
	c.mu.Lock()
	c.rows += len(page)
	c.mu.Unlock()
	return page, err
}

func (c *counting) read() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.rows
	c.rows = 0
	return n
}

// TestPullReadsWhatIsNew: once an agent has consumed the inbox, a new
// message costs a read of that message (by the router and by the agent),
// not of the inbox from the agent's start.
func TestPullReadsWhatIsNew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		st := &counting{Store: mem}
		opts := Options{Store: st}
		h := setup(t, &opts)
		h.st = mem
		h.env.channel("chat", "quiet", "closed")
		h.start(opts)
		defer h.rt.Close()
		var msgs []store.Message
		for i := range 2000 {
			msgs = append(msgs, chanMsg("chat", "quiet", fmt.Sprint("q", i), "not for ada"))
		}
		h.add(msgs...)
		st.read()
		h.add(chanMsg("chat", "quiet", "last", "one more"))
		if n := st.read(); n > 4 {
			t.Errorf("one new message: %d inbox rows read, want at most 4 (the router's and the agent's, each once or twice)", n)
		}
		if c := h.cursors()[cursorName("ada")]; c < msgs[len(msgs)-1].Seq {
			t.Errorf("the agent's base is %d, want it past the consumed %d", c, msgs[len(msgs)-1].Seq)
		}
	})
}
