package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/treat"
	"github.com/mcpl-go/mcpl/store"
)

// What wakes an agent (wake.go): treatment rules, debounce and its bound,
// what a turn carried. The runtime runs in a synctest bubble, so the
// debounce's times are the bubble's clock.

// now stamps m with the bubble's time, as the host's inbox does at
// receipt.
func now(m store.Message) store.Message {
	m.At = time.Now()
	return m
}

func echoModel() *fakeModel {
	return &fakeModel{respond: func(int, model.Request) (model.Response, error) {
		return respond(model.EndTurn, textBlock("reply")), nil
	}}
}

// TestWakeAmbientThenAddressed: 40 ambient messages in an open channel,
// then one that addresses the agent: one model call, which is shown the
// ambient ones too (they were recorded between turns, with no call).
func TestWakeAmbientThenAddressed(t *testing.T) {
	for _, debounce := range []time.Duration{0, 1500 * time.Millisecond} {
		t.Run(fmt.Sprint("debounce ", debounce), func(t *testing.T) {
			m := echoModel()
			bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: WakeRules{Debounce: debounce}}}}, func(h *harness) {
				t := h.t
				h.env.typing = map[string]bool{"chat/general": true}
				h.env.channel("chat", "general", "open")
				for i := range 40 {
					h.add(now(chanMsg("chat", "general", fmt.Sprint("a", i), fmt.Sprint("people talk ", i), "chat:ambient")))
					time.Sleep(200 * time.Millisecond)
				}
				if n := len(m.requests()); n != 0 {
					t.Fatalf("%d model calls for ambient messages alone, want 0", n)
				}
				h.add(now(chanMsg("chat", "general", "q", "ada, what did they say?", "chat:mention", "chat:addressed")))
				time.Sleep(2 * debounce)
				synctest.Wait()
				reqs := m.requests()
				if len(reqs) != 1 {
					t.Fatalf("%d model calls, want 1", len(reqs))
				}
				texts := userTexts(reqs[0].Messages)
				for _, want := range []string{"people talk 0", "people talk 39", "ada, what did they say?"} {
					if !containsText(texts, want) {
						t.Errorf("the request holds no %q: %q", want, texts)
					}
				}
				_, _, _, pubs := h.env.snapshot()
				if len(pubs) != 1 || pubs[0].Channel != "general" {
					t.Errorf("publications %+v, want one reply in general", pubs)
				}
				if sent := h.env.sent(); !slices.Equal(sent, []string{"typing start chat/general", "typing stop chat/general"}) {
					t.Errorf("typing signals %q, want one start and one stop", sent)
				}
				var batched, woke int
				for _, ev := range h.rec.of("ada", EventTreated) {
					for _, c := range ev.Treated {
						switch c.Treat {
						case treat.Batch:
							batched += c.N
						case treat.Wake:
							woke += c.N
						}
					}
				}
				if batched != 40 || woke != 1 {
					t.Errorf("treated events count %d batched, %d woke; want 40 and 1", batched, woke)
				}
			})
		})
	}
}

// TestWakeDebounce: ten addressed messages 100 ms apart wake one turn,
// once 1.5 s have passed since the last; not before.
func TestWakeDebounce(t *testing.T) {
	m := echoModel()
	const debounce = 1500 * time.Millisecond
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: WakeRules{Debounce: debounce}}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		for i := range 10 {
			h.add(now(chanMsg("chat", "general", fmt.Sprint("q", i), fmt.Sprint("question ", i), "chat:addressed")))
			time.Sleep(100 * time.Millisecond)
		}
		last := time.Now().Add(-100 * time.Millisecond)
		time.Sleep(debounce - 200*time.Millisecond)
		synctest.Wait()
		if n := len(m.requests()); n != 0 {
			t.Fatalf("%d model calls before the debounce passed, want 0", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(m.requests()); n != 1 {
			t.Fatalf("%d model calls, want 1", n)
		}
		starts := h.rec.of("ada", EventTurnStart)
		if got := starts[0].At.Sub(last); got < debounce || got > debounce+time.Millisecond {
			t.Errorf("the turn started %v after the last message, want %v", got, debounce)
		}
		if got := wokenBy(h, "ada"); len(got) != 1 || len(got[0]) != 10 {
			t.Errorf("turns woken by %q, want one woken by the ten", got)
		}
	})
}

// TestWakeMaxDelay: a steady stream of waking messages, each within the
// debounce of the one before, can't put the turn off past MaxDelay after
// the first.
func TestWakeMaxDelay(t *testing.T) {
	m := echoModel()
	w := WakeRules{Debounce: 1500 * time.Millisecond, MaxDelay: 5 * time.Second}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: w}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		first := time.Now()
		for i := range 20 {
			h.add(now(chanMsg("chat", "general", fmt.Sprint("q", i), fmt.Sprint("question ", i), "chat:addressed")))
			time.Sleep(time.Second)
		}
		synctest.Wait()
		starts := h.rec.of("ada", EventTurnStart)
		if len(starts) < 2 {
			t.Fatalf("%d turns in 20 s of messages a second apart, want the bound to start several", len(starts))
		}
		if got := starts[0].At.Sub(first); got != w.MaxDelay {
			t.Errorf("the first turn started %v after the first message, want MaxDelay %v", got, w.MaxDelay)
		}
	})
}

// TestWakeRules: the agent's rules go before the defaults: ignored
// messages are consumed unseen and counted; a rule can make ambient
// messages of one channel wake the agent.
func TestWakeRules(t *testing.T) {
	m := echoModel()
	rules := []treat.Rule{
		{Servers: []string{"noisy"}, Treat: treat.Ignore},
		{Channels: []string{"support"}, TagsAny: []string{"chat:ambient"}, Treat: treat.Wake},
	}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: WakeRules{Rules: rules}}}}, func(h *harness) {
		t := h.t
		h.env.channel("noisy", "all", "open")
		h.env.channel("chat", "support", "open")
		h.add(now(chanMsg("noisy", "all", "n1", "buy now", "chat:addressed")), now(pushMsg("noisy", "e1", "an event")))
		if n := len(m.requests()); n != 0 {
			t.Fatalf("%d model calls for ignored messages, want 0", n)
		}
		if c := h.cursor("ada", "noisy"); c == 0 {
			t.Errorf("the ignored messages were not consumed (cursor %d)", c)
		}
		h.add(now(chanMsg("chat", "support", "s1", "is anyone there?", "chat:ambient")))
		reqs := m.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d model calls, want 1 (the rule wakes ambient messages in support)", len(reqs))
		}
		texts := userTexts(reqs[0].Messages)
		if containsText(texts, "buy now") || containsText(texts, "an event") {
			t.Errorf("ignored messages were shown: %q", texts)
		}
		var ignored int
		for _, ev := range h.rec.of("ada", EventTreated) {
			for _, c := range ev.Treated {
				if c.Treat == treat.Ignore && c.Server == "noisy" {
					ignored += c.N
				}
			}
		}
		if ignored != 2 {
			t.Errorf("treated events count %d ignored on noisy, want 2", ignored)
		}
	})
}

// TestWakeHeldDuringTurn: what comes while a turn runs is answered by one
// follow-up turn, whose turn_start says what it carried.
func TestWakeHeldDuringTurn(t *testing.T) {
	m := heldModel()
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: WakeRules{Debounce: time.Second}}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		h.add(now(chanMsg("chat", "general", "q0", "first", "chat:addressed")))
		time.Sleep(2 * time.Second)
		synctest.Wait() // the first turn waits in its model call
		h.add(now(chanMsg("chat", "general", "q1", "second", "chat:addressed")))
		h.add(now(chanMsg("chat", "general", "a1", "chatter", "chat:ambient")))
		time.Sleep(3 * time.Second)
		release(m)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		release(m)
		starts := h.rec.of("ada", EventTurnStart)
		if len(starts) != 2 {
			t.Fatalf("%d turns, want 2", len(starts))
		}
		if got := wokenBy(h, "ada")[1]; !slices.Equal(got, []string{"q1"}) {
			t.Errorf("the follow-up was woken by %q, want [q1]", got)
		}
		if c := starts[1].Carried; c == nil || c.Held != 1 || c.Batched != 1 || c.Ignored != 0 {
			t.Errorf("the follow-up carried %+v, want held 1, batched 1", c)
		}
	})
}

// TestWakeBatchedSaysNothingOfLocus: a turn an event woke doesn't reply
// into, or type in, the channel of an ambient message it read with it.
func TestWakeBatchedSaysNothingOfLocus(t *testing.T) {
	m := heldModel()
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m}}}, func(h *harness) {
		t := h.t
		h.env.typing = map[string]bool{"chat/general": true}
		h.env.channel("chat", "general", "open")
		h.add(now(chanMsg("chat", "general", "g0", "first", "chat:addressed")))
		// Held: the next turn reads both; only the event wakes it.
		h.add(now(chanMsg("chat", "general", "a1", "chatter", "chat:ambient")), now(pushMsg("ci", "e1", "the build failed")))
		release(m)
		release(m)
		_, _, _, pubs := h.env.snapshot()
		if len(pubs) != 1 {
			t.Errorf("publications %+v, want the first turn's reply only", pubs)
		}
		var typed int
		for _, s := range h.env.sent() {
			if strings.HasPrefix(s, "typing start") {
				typed++
			}
		}
		if typed != 1 {
			t.Errorf("typing started %d times (%q), want once: for the first turn only", typed, h.env.sent())
		}
		if got := wokenBy(h, "ada"); len(got) != 2 || !slices.Equal(got[1], []string{"e1"}) {
			t.Errorf("turns woken by %q, want the second by the event alone", got)
		}
	})
}

// TestWakeFloodBound: a flood of waking messages, more than a turn shows
// (MaxBatch), can't move the bound: it runs from the oldest message
// read, not from the oldest the turn would show.
func TestWakeFloodBound(t *testing.T) {
	m := echoModel()
	w := WakeRules{Debounce: 1500 * time.Millisecond, MaxDelay: 5 * time.Second}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: w}}}, func(h *harness) {
		t := h.t
		h.env.channel("chat", "general", "open")
		first := time.Now()
		for i := range 400 {
			h.add(now(chanMsg("chat", "general", fmt.Sprint("q", i), fmt.Sprint("question ", i), "chat:addressed")))
			time.Sleep(20 * time.Millisecond)
		}
		synctest.Wait()
		starts := h.rec.of("ada", EventTurnStart)
		if len(starts) == 0 {
			t.Fatal("no turn in 8 s of waking messages")
		}
		if got := starts[0].At.Sub(first); got != w.MaxDelay {
			t.Errorf("the first turn started %v after the first message, want MaxDelay %v", got, w.MaxDelay)
		}
	})
}

// pageCounter counts the inbox reads from the inbox's start: an agent
// that starts on an empty inbox reads from there until a turn is
// recorded, while the router's reads move on with what it routed.
type pageCounter struct {
	*store.Memory
	pages atomic.Int64
}

func (p *pageCounter) Page(ctx context.Context, q store.InboxQuery) ([]store.Message, error) {
	if q.After == 0 && q.Server == "" {
		p.pages.Add(1)
	}
	return p.Memory.Page(ctx, q)
}

// TestWakeDebounceReadsOnce: while a debounce runs, the messages that come
// are not read at each arrival: the runner reads when its timer fires.
func TestWakeDebounceReadsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &pageCounter{Memory: store.NewMemory()}
		m := echoModel()
		opts := Options{Store: st, Agents: []Spec{{Name: "ada", Model: m, Wake: WakeRules{Debounce: 1500 * time.Millisecond, MaxDelay: 5 * time.Second}}}}
		h := setup(t, &opts)
		h.start(opts)
		defer h.rt.Close()
		h.env.channel("chat", "general", "open")
		synctest.Wait()
		before := st.pages.Load()
		for i := range 40 {
			addMessages(t, st, now(chanMsg("chat", "general", fmt.Sprint("q", i), fmt.Sprint("question ", i), "chat:addressed")))
			h.rt.Wake()
			synctest.Wait()
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(m.requests()); n != 1 {
			t.Fatalf("%d model calls, want 1", n)
		}
		// The first arrival's read, the timer's (the bound, 5 s on, in
		// 4 s of messages: at most a few), and the turn's.
		if reads := st.pages.Load() - before; reads > 8 {
			t.Errorf("%d inbox reads for 40 messages in one debounce, want a few, not one an arrival", reads)
		}
	})
}

// TestWakeAccepted: a server's accepted suggestions decide its messages
// after the agent's own rules and before the host's defaults.
func TestWakeAccepted(t *testing.T) {
	m := echoModel()
	own := []treat.Rule{{Channels: []string{"quiet"}, Treat: treat.Ignore}}
	bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: WakeRules{Rules: own}}}}, func(h *harness) {
		t := h.t
		h.env.mu.Lock()
		h.env.accepted = map[string][]treat.Rule{"chat": {{TagsAny: []string{"chat:ambient"}, Servers: []string{"chat"}, Treat: treat.Wake, From: "chat"}}}
		h.env.mu.Unlock()
		h.env.channel("chat", "general", "open")
		h.env.channel("chat", "quiet", "open")
		h.add(now(chanMsg("chat", "quiet", "q1", "ignored by the agent's own rule", "chat:ambient")))
		if n := len(m.requests()); n != 0 {
			t.Fatalf("%d model calls: the agent's own rule goes first", n)
		}
		h.add(now(chanMsg("chat", "general", "g1", "ambient, but the server's accepted rule wakes it", "chat:ambient")))
		if n := len(m.requests()); n != 1 {
			t.Fatalf("%d model calls, want 1: the accepted suggestion wakes ambient messages", n)
		}
		h.env.channel("other", "general", "open")
		h.add(now(chanMsg("other", "general", "o1", "ambient on another server", "chat:ambient")))
		if n := len(m.requests()); n != 1 {
			t.Errorf("%d model calls: another server's ambient message woke the agent", n)
		}
	})
}

// replaceEvery stands for a server replacing one coalesced subject every
// gap, n times from now on: each replacement withdraws the one before and
// carries the run's first time as its Since, as the host says of them,
// and in the host's order: the replacement is in the inbox, then the
// one before is withdrawn, then the agents are woken.
// Before replacement i, it calls also(i). It returns once the last is in.
func replaceEvery(h *harness, gap time.Duration, n int, also func(i int)) {
	var since time.Time
	for i := range n {
		also(i)
		id := fmt.Sprint("s", i)
		m := now(pushMsg("doc", id, fmt.Sprint("the subject, version ", i)))
		m.EventID = id
		if i == 0 {
			since = m.At
			h.env.coalesce("doc", id, Coalesced{Tracked: true})
		} else {
			h.env.coalesce("doc", id, Coalesced{Tracked: true, Since: since})
		}
		by := addMessages(h.t, h.st, m)[0].Seq
		if i > 0 {
			h.env.coalesce("doc", fmt.Sprint("s", i-1), Coalesced{Withdrawn: true, By: by})
		}
		h.rt.Wake()
		synctest.Wait()
		time.Sleep(gap)
	}
}

// TestWakeSubjectQuiet: a coalesced subject replaced faster than the
// debounce keeps a quiet of its own (RFC-006 §4.2's last rule): an
// ordinary waking message that comes while the subject is being replaced
// starts its turn one debounce after it came, as it would alone, whether
// the subject's bound comes after that or before it; the subject is
// shown in that turn.
func TestWakeSubjectQuiet(t *testing.T) {
	const debounce = 1500 * time.Millisecond
	const gap = 200 * time.Millisecond
	for _, tc := range []struct {
		name     string
		maxDelay time.Duration
		// want is when the first turn starts, from the question.
		want time.Duration
	}{
		// 8 s of replacements; the question 2 s in.
		{"not put off", 20 * time.Second, debounce},
		// The subject's bound, 3 s in, comes while the question's quiet
		// runs: it neither cuts that quiet short nor starts a turn of
		// its own.
		{"bound first", 3 * time.Second, debounce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := echoModel()
			w := WakeRules{Debounce: debounce, MaxDelay: tc.maxDelay}
			bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: w}}}, func(h *harness) {
				t := h.t
				h.env.channel("chat", "general", "open")
				var asked time.Time
				replaceEvery(h, gap, 40, func(i int) {
					if i == 10 {
						asked = time.Now()
						h.add(now(chanMsg("chat", "general", "q", "ada, a question", "chat:addressed")))
					}
				})
				synctest.Wait()
				starts := h.rec.of("ada", EventTurnStart)
				if len(starts) == 0 {
					t.Fatal("no turn in 8 s")
				}
				if got := starts[0].At.Sub(asked); got != tc.want {
					t.Errorf("the first turn started %v after the question, want %v", got, tc.want)
				}
				texts := userTexts(m.requests()[0].Messages)
				if !containsText(texts, "ada, a question") {
					t.Errorf("the first turn was not shown the question: %q", texts)
				}
				if !containsText(texts, "the subject, version") {
					t.Errorf("the first turn was not shown the subject: %q", texts)
				}
			})
		})
	}
}

// TestWakeUnrelatedDebounce is RFC-006's vector 44 on the controlled
// clock the corpus asks for (the corpus run, on the real host's wall
// clock, lists it as not exercised): a coalesced subject reaches its
// postponement bound while an ordinary event waits for its 200 ms quiet,
// and the ordinary event is delivered (a model request shows it) 200 ms
// after it came, as in the control run where it comes alone: between
// 200 and 201 ms, the vector's check. The subject, replaced every 30 ms
// from 300 ms before the event, is due at its 400 ms bound, 100 ms into
// the event's quiet.
func TestWakeUnrelatedDebounce(t *testing.T) {
	const quietFor = 200 * time.Millisecond
	for _, subject := range []bool{false, true} {
		t.Run(fmt.Sprint("subject ", subject), func(t *testing.T) {
			var delivered time.Time
			m := &fakeModel{respond: func(_ int, req model.Request) (model.Response, error) {
				if delivered.IsZero() && containsText(userTexts(req.Messages), "the ordinary event") {
					delivered = time.Now()
				}
				return respond(model.EndTurn, textBlock("reply")), nil
			}}
			w := WakeRules{Debounce: quietFor, MaxDelay: 2 * quietFor}
			bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: w}}}, func(h *harness) {
				t := h.t
				var came time.Time
				send := func() {
					came = time.Now()
					h.add(now(pushMsg("news", "o1", "the ordinary event")))
				}
				if subject {
					replaceEvery(h, 30*time.Millisecond, 30, func(i int) {
						if i == 10 {
							send()
						}
					})
				} else {
					send()
					time.Sleep(time.Second)
				}
				synctest.Wait()
				if delivered.IsZero() {
					t.Fatal("the ordinary event was never delivered")
				}
				if got := delivered.Sub(came); got < quietFor || got > quietFor+time.Millisecond {
					t.Errorf("the ordinary event was delivered %v after it came, want between 200ms and 201ms", got)
				}
				if subject && !containsText(userTexts(m.requests()[0].Messages), "the subject, version") {
					t.Errorf("the subject was not shown in the turn the event started: %q", userTexts(m.requests()[0].Messages))
				}
			})
		})
	}
}

// TestWakeSettles: the host withdraws a replaced occurrence before the
// router routes its replacement. A turn due in that gap waits for the
// replacement, so it reads the subject's current version rather than
// neither; and waits settleFor at most, so a replacement that is never
// routed can't hold the turn.
func TestWakeSettles(t *testing.T) {
	const debounce = 1500 * time.Millisecond
	for _, tc := range []struct {
		name string
		// route is when the replacement is routed, after the turn is due;
		// want is when the turn starts, after it is due.
		route, want time.Duration
		// shown: the turn reads the replacement.
		shown bool
	}{
		{"routed in time", 100 * time.Millisecond, 100 * time.Millisecond, true},
		{"never in time", time.Second, settleFor, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := echoModel()
			bubble(t, Options{Agents: []Spec{{Name: "ada", Model: m, Wake: WakeRules{Debounce: debounce}}}}, func(h *harness) {
				t := h.t
				h.env.channel("chat", "general", "open")
				h.add(now(chanMsg("chat", "general", "q", "ada, a question", "chat:addressed")))
				due := time.Now().Add(debounce)
				v0 := now(pushMsg("doc", "v0", "VERSION_ZERO"))
				v0.EventID = "v0"
				h.env.coalesce("doc", "v0", Coalesced{Tracked: true})
				v0.Tags = []string{"chat:ambient"} // batched: it wakes nothing
				h.add(v0)
				time.Sleep(debounce - 100*time.Millisecond)
				// The replacement is in the inbox, the one before is
				// withdrawn, and the router is not poked yet.
				v1 := now(pushMsg("doc", "v1", "VERSION_ONE"))
				v1.EventID, v1.Tags = "v1", v0.Tags
				h.env.coalesce("doc", "v1", Coalesced{Tracked: true, Since: v0.At})
				by := addMessages(t, h.st, v1)[0].Seq
				h.env.coalesce("doc", "v0", Coalesced{Withdrawn: true, By: by})
				time.Sleep(time.Until(due.Add(tc.route)))
				h.rt.Wake()
				synctest.Wait()
				time.Sleep(time.Second)
				synctest.Wait()
				starts := h.rec.of("ada", EventTurnStart)
				if len(starts) == 0 {
					t.Fatal("no turn")
				}
				if got := starts[0].At.Sub(due); got != tc.want {
					t.Errorf("the turn started %v after it was due, want %v", got, tc.want)
				}
				texts := userTexts(m.requests()[0].Messages)
				if got := containsText(texts, "VERSION_ONE"); got != tc.shown {
					t.Errorf("the turn read the replacement: %v, want %v (%q)", got, tc.shown, texts)
				}
				if containsText(texts, "VERSION_ZERO") {
					t.Errorf("the turn read the version replaced: %q", texts)
				}
			})
		})
	}
}
