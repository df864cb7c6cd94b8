package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/treat"
	"github.com/mcpl-go/mcpl/store"
)

// A busy channel's traffic, as a chat connector delivers it: people
// talking among themselves (chat:ambient), messages that address the
// agent (chat:mention), bots' posts (chat:from-bot, most ambient), and
// edits of earlier messages (pushes into the channel tagged chat:edited,
// with the tags of the message they edit). The mix is made from a fixed
// seed, so every run reads the same thousand messages at the same times:
// gaps of 0.1 s to 6 s, a third of them in bursts a tenth of a second
// apart.

type mixMsg struct {
	gap time.Duration // after the message before
	m   store.Message
}

func busyMix(n int) (mix []mixMsg, counts map[string]int) {
	rng := rand.New(rand.NewPCG(25, 1000))
	counts = map[string]int{}
	for i := range n {
		var kind string
		var tags []string
		switch p := rng.IntN(100); {
		case p < 65:
			kind, tags = "ambient", []string{"chat:ambient", "chat:from-human"}
		case p < 77:
			kind, tags = "addressed", []string{"chat:mention", "chat:addressed", "chat:from-human"}
		case p < 87:
			kind, tags = "bot", []string{"chat:ambient", "chat:from-bot"}
		case p < 89:
			kind, tags = "bot-addressed", []string{"chat:mention", "chat:addressed", "chat:from-bot"}
		case p < 97:
			kind, tags = "edit", []string{"chat:edited", "chat:ambient", "chat:from-human"}
		default:
			kind, tags = "edit-addressed", []string{"chat:edited", "chat:mention", "chat:addressed", "chat:from-human"}
		}
		counts[kind]++
		gap := time.Duration(100+rng.IntN(5900)) * time.Millisecond
		if rng.IntN(3) == 0 {
			gap = 100 * time.Millisecond
		}
		m := chanMsg("chat", "general", fmt.Sprint(kind, "-", i), fmt.Sprint(kind, " message ", i), tags...)
		if kind == "edit" || kind == "edit-addressed" {
			m.Kind = store.KindPushEvent
		}
		mix = append(mix, mixMsg{gap: gap, m: m})
	}
	return mix, counts
}

// wakeAll is the treatment before wake rules: every message shown wakes
// the agent at once (bots still only as bots.go allows).
var wakeAll = WakeRules{Rules: []treat.Rule{{Treat: treat.Wake}}}

// defaultWake is the configuration's default: the host's rules, 1.5 s of
// debounce bounded at 5 s.
var defaultWake = WakeRules{Debounce: 1500 * time.Millisecond, MaxDelay: 5 * time.Second}

// TestWakeMix: over the thousand messages, the default rules make a model
// call for at most the addressed messages people wrote (fewer: debounce
// folds those close together), and none for ambient chatter, bots'
// ambient posts or edits of ambient messages; without them, every
// message people wrote costs a call.
func TestWakeMix(t *testing.T) {
	mix, counts := busyMix(1000)
	people := 1000 - counts["bot"] - counts["bot-addressed"]
	addressed := counts["addressed"] + counts["edit-addressed"]
	var got [2]int
	for i, w := range []WakeRules{wakeAll, defaultWake} {
		synctest.Test(t, func(t *testing.T) {
			m := echoModel()
			opts := Options{Agents: []Spec{{Name: "ada", Model: m, Wake: w}}}
			h := setup(t, &opts)
			h.start(opts)
			defer h.rt.Close()
			h.env.channel("chat", "general", "open")
			for _, x := range mix {
				time.Sleep(x.gap)
				h.add(now(x.m))
			}
			time.Sleep(10 * time.Second)
			synctest.Wait()
			got[i] = len(m.requests())
		})
	}
	t.Logf("model calls per 1,000 messages (%d addressed by people): %d without wake rules, %d with the defaults", addressed, got[0], got[1])
	if got[0] != people {
		t.Errorf("without wake rules: %d calls, want one per message people wrote (%d)", got[0], people)
	}
	if got[1] > addressed || got[1] == 0 {
		t.Errorf("with the defaults: %d calls, want between 1 and the %d addressed messages", got[1], addressed)
	}
}

// BenchmarkWakeMix runs the thousand messages through a runtime on an
// instant model, in real time 200 times faster than the mix's
// (debounce and its bound scaled alike), and reports the model calls per
// 1,000 messages with and without the default rules.
func BenchmarkWakeMix(b *testing.B) {
	const scale = 200
	mix, _ := busyMix(1000)
	for _, c := range []struct {
		name string
		w    WakeRules
	}{{"no-rules", wakeAll}, {"default-rules", WakeRules{Debounce: defaultWake.Debounce / scale, MaxDelay: defaultWake.MaxDelay / scale}}} {
		b.Run(c.name, func(b *testing.B) {
			calls := 0
			for b.Loop() {
				calls += runMix(b, mix, c.w, scale)
			}
			b.ReportMetric(float64(calls)/float64(b.N), "calls/1000msgs")
		})
	}
}

// runMix plays mix, its gaps divided by scale, into a fresh runtime, and
// returns the model calls it made.
func runMix(b *testing.B, mix []mixMsg, w WakeRules, scale time.Duration) int {
	st := store.NewMemory()
	env := newEnv()
	env.channel("chat", "general", "open")
	m := echoModel()
	rt, err := Start(Options{Store: st, Env: env, Agents: []Spec{{Name: "ada", Model: m, Wake: w}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	for _, x := range mix {
		time.Sleep(x.gap / scale)
		msg := x.m
		msg.At = time.Now()
		if _, err := st.AddMessages(context.Background(), []store.Message{msg}); err != nil {
			b.Fatal(err)
		}
		rt.Wake()
	}
	// What the last messages wake starts within the bound.
	time.Sleep(2*defaultWake.MaxDelay/scale + 50*time.Millisecond)
	return len(m.requests())
}
