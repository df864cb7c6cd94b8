package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// TestRandomInterleavings runs seeded schedules of registrations,
// re-announcements, retargets, removals, policy changes, the agent's
// opens, closes and declines, machine closes, speech, replies, answers in
// any order (success, failure, another channel), store failures and
// restarts, and checks the invariants after every schedule:
//
//   - an agent's decision is never replaced by a machine's;
//   - after a failed incidental open the record is the replaced decision
//     or a newer one (unless the put-back could not be recorded);
//   - an open the server received while no decision said open is
//     followed by a close: once everything settles, a registered channel
//     decided closed (or not decided) has no open as the last lifecycle
//     request its server received since it last removed the channel,
//     whatever that open was answered (a failed open may have reached the
//     server);
//   - replaying the log reproduces the in-memory decisions exactly,
//     though the registry compacts it every few records (so replay after
//     compaction gives the decisions replay of the whole log gave).
func TestRandomInterleavings(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	for seed := range uint64(n) {
		synctest.Test(t, func(t *testing.T) {
			if err, trace := runSchedule(t, seed); err != "" {
				t.Fatalf("seed %d: %s\nschedule:\n  %s", seed, err, strings.Join(trace, "\n  "))
			}
		})
	}
}

var machineSources = []string{SourceDefaultClosed, SourceServerBootstrap, SourceSubscriptionPolicy, SourceSubscriptionGC, SourceHousekeeping}

// schedule is one run's state beside the registry's.
type schedule struct {
	t       *testing.T
	rng     *rand.Rand
	rg      *rig
	pending []*call
	live    map[string]bool // registered now
	// removedAt is how many requests the server had received when each
	// channel was last removed: the server forgets a channel it removes,
	// so the requests before don't count for invariant 3.
	removedAt map[string]int
	futures   sync.WaitGroup
	mu        sync.Mutex
	broken    []string // invariant 2 failures, found as they happen
	trace     []string
}

func (s *schedule) tracef(format string, args ...any) {
	s.mu.Lock()
	s.trace = append(s.trace, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func runSchedule(t *testing.T, seed uint64) (string, []string) {
	rg := newRig(t)
	rg.compactAfter = 1 + int(seed%4)
	rg.reg.do(func(m *machine) { m.compactAfter = rg.compactAfter })
	s := &schedule{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rg: rg, live: map[string]bool{}, removedAt: map[string]int{}}
	ids := []string{"a", "b", "c"}
	steps := 20 + s.rng.IntN(40)
	for range steps {
		id := ids[s.rng.IntN(len(ids))]
		s.step(id)
		synctest.Wait()
		s.collect()
	}
	// Settle: the store works again, and every request is answered.
	rg.st.setFail(false)
	for range 1000 {
		synctest.Wait()
		s.collect()
		if len(s.pending) == 0 {
			break
		}
		for _, c := range s.pending {
			s.answer(c, "ok")
		}
		s.pending = nil
	}
	s.futures.Wait()
	synctest.Wait()
	if len(s.broken) > 0 {
		return s.broken[0], s.trace
	}
	return s.check(), s.trace
}

func (s *schedule) step(id string) {
	rg := s.rg
	k := s.rng.IntN(100)
	s.tracef("step %d on %s", k, id)
	switch {
	case k < 12:
		rg.register(s.desc(id, s.rng.IntN(3) == 0, false))
		s.live[id] = true
	case k < 16:
		res, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{id}}, false)
		start()
		if res.Results[0].Accepted {
			delete(s.live, id)
			s.removedAt[id] = len(rg.srv.log())
		}
	case k < 19:
		res, start := rg.reg.Changed("s", protocol.ChannelsChangedParams{Updated: []protocol.ChannelDescriptor{s.desc(id, false, true)}}, false)
		start()
		_ = res
	case k < 22:
		rg.admit(id, s.rng.IntN(2) == 0)
	case k < 32:
		s.async(func() {
			rg.reg.CallTool(context.Background(), ToolOpen, json.RawMessage(`{"channelId":"`+id+`"}`), Caller{})
		})
	case k < 40:
		s.async(func() {
			rg.reg.CallTool(context.Background(), ToolClose, json.RawMessage(`{"channelId":"`+id+`"}`), Caller{})
		})
	case k < 43:
		s.async(func() {
			rg.reg.CallTool(context.Background(), ToolDecline, json.RawMessage(`{"channelId":"`+id+`","messageId":"m"}`), Caller{})
		})
	case k < 46:
		src := MachineCloseSources[s.rng.IntN(2)]
		s.async(func() { rg.reg.MachineClose(context.Background(), "s", id, src, false) })
	case k < 58:
		s.async(func() { s.publish(id) })
	case k < 64:
		rg.reply(id)
	case k < 92:
		s.answerSome()
	case k < 96:
		rg.st.setFail(s.rng.IntN(2) == 0)
	default:
		s.restart()
	}
}

func (s *schedule) desc(id string, initiallyOpen, moved bool) protocol.ChannelDescriptor {
	d := desc(id, initiallyOpen)
	if moved || s.rng.IntN(4) == 0 {
		d.Address = json.RawMessage(fmt.Sprintf(`{"room":"%s-%d"}`, id, s.rng.IntN(3)))
	}
	return d
}

func (s *schedule) async(f func()) {
	s.futures.Add(1)
	go func() {
		defer s.futures.Done()
		f()
	}()
}

// publish speaks into id and checks invariant 2 the moment it returns.
func (s *schedule) publish(id string) {
	out := s.rg.reg.Publish(context.Background(), "s", id, nil, []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi"}`)}, Caller{})
	o := out.open
	if o.err == nil || !o.opening || o.selected == SelectedUnrecorded {
		return
	}
	d := s.rg.record(id)
	if d != nil && d.Seq == o.openSeq {
		s.mu.Lock()
		s.broken = append(s.broken, fmt.Sprintf("after a failed open of %s the record is still the open's own (seq %d, %s/%s)", id, d.Seq, d.State, d.Source))
		s.mu.Unlock()
	}
}

// collect moves the requests waiting at the double into pending.
func (s *schedule) collect() {
	for {
		select {
		case c := <-s.rg.srv.calls:
			s.pending = append(s.pending, c)
		default:
			return
		}
	}
}

// answerSome answers one or two pending requests, in any order.
func (s *schedule) answerSome() {
	for range 1 + s.rng.IntN(2) {
		if len(s.pending) == 0 {
			return
		}
		i := s.rng.IntN(len(s.pending))
		c := s.pending[i]
		s.pending = slices.Delete(s.pending, i, i+1)
		switch k := s.rng.IntN(10); {
		case k < 6:
			s.answer(c, "ok")
		case k < 9:
			s.answer(c, "fail")
		default:
			s.answer(c, "substitute")
		}
	}
}

func (s *schedule) answer(c *call, how string) {
	s.tracef("answer %s: %s", c, how)
	switch how {
	case "ok":
		c.ok()
	case "fail":
		c.fail("refused")
	case "substitute":
		if c.method == protocol.MethodChannelsOpen {
			c.answer(map[string]any{"channel": map[string]string{"id": "z"}})
			return
		}
		c.fail("refused")
	}
}

// restart closes the registry and opens a new one on the same store, as
// a host restart does; the server then registers its channels again.
func (s *schedule) restart() {
	done := make(chan struct{})
	go func() {
		s.rg.reg.Close()
		close(done)
	}()
	// Close lets work in flight finish: answer what it waits on.
	for {
		synctest.Wait()
		select {
		case <-done:
		default:
			s.collect()
			for _, c := range s.pending {
				s.answer(c, "fail")
			}
			s.pending = nil
			continue
		}
		break
	}
	s.futures.Wait()
	s.rg.open()
	for _, id := range slices.Sorted(maps.Keys(s.live)) {
		s.rg.register(s.desc(id, false, false))
	}
}

// check checks invariants 1, 3 and 4 once everything has settled.
func (s *schedule) check() string {
	var log []store.Record
	s.rg.st.Replay(context.Background(), func(r store.Record) error {
		if r.Kind == store.KindDecision {
			log = append(log, r)
		}
		return nil
	})
	prev := map[string]store.Record{}
	for _, r := range log {
		if p, ok := prev[r.Channel]; ok && agentOwn(p.Source) && slices.Contains(machineSources, r.Source) {
			return fmt.Sprintf("seq %d: a machine's %s/%s replaced the agent's %s/%s on %s", r.Seq, r.State, r.Source, p.State, p.Source, r.Channel)
		}
		prev[r.Channel] = r
	}
	for ch, r := range prev {
		if isDefault(&r) {
			delete(prev, ch) // the default's record: no decision
		}
	}
	live := map[string]string{}
	for _, d := range s.rg.reg.Decisions() {
		live[d.Channel] = fmt.Sprintf("%d %s/%s", d.Seq, d.State, d.Source)
	}
	replayed := map[string]string{}
	for ch, r := range prev {
		replayed[ch] = fmt.Sprintf("%d %s/%s", r.Seq, r.State, r.Source)
	}
	if fmt.Sprint(live) != fmt.Sprint(replayed) {
		return fmt.Sprintf("replay %v differs from the live decisions %v", replayed, live)
	}
	last := map[string]string{}
	for i, r := range s.rg.srv.log() {
		method, ch, _ := strings.Cut(r, " ")
		if (method == "open" || method == "close") && i >= s.removedAt[ch] {
			last[ch] = method
		}
	}
	for ch := range s.live {
		if d, ok := prev[ch]; (!ok || d.State == store.Closed) && last[ch] == "open" {
			return fmt.Sprintf("%s is decided %s/%s, but the last lifecycle request its server received was an open", ch, d.State, d.Source)
		}
	}
	return ""
}
