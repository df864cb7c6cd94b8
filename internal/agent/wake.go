package agent

import (
	"time"

	"github.com/mcpl-go/mcpl/internal/treat"
	"github.com/mcpl-go/mcpl/store"
)

// What wakes an agent (docs/agents.md, "What wakes an agent"). Every
// message an agent is shown has a treatment, decided by the agent's rules
// and then the host's (treat.Defaults), first match wins, over the
// message's closure-expanded tags, its server, its channel and its source:
//
//   - wake: it wakes the agent, once its debounce has passed (below); a
//     bot's message wakes it only as bots.go allows, and the agent's own
//     post echoed back (chat:from-self) never does;
//   - batch: it goes into the conversation between turns, with no model
//     call, so the next turn something else wakes reads it;
//   - ignore: consumed unseen, and counted.
//
// Debounce: a turn starts once no waking message has come for Debounce,
// or MaxDelay after the oldest waking message read came (one the budget
// leaves out of the turn included),
// whichever is first; so a burst costs one turn, and a steady stream
// can't put a waking message off for more than MaxDelay (RFC-006 §4.2's
// no-starvation rule holds for debounce too). A coalesced subject that was
// replaced (RFC-006) keeps a quiet of its own, from the first occurrence
// its run displaced to its latest: a replacement corrects an occurrence
// still pending and is not another one (§4.2), so a subject replaced
// faster than Debounce neither puts off the turn another message waits
// for nor is put off by them past its own bound, unless the agent's own
// quiet is running when the bound comes: then the turn waits for that
// quiet to end, and reads everything (§4.2's last rule: coalescing
// neither shortens nor extends an unrelated debounce; runner.due). Every
// other waking message shares the agent's one quiet. Messages that come while a
// turn runs wait for it: when it ends, one turn reads them all (once its
// own debounce has passed). The times are the host's receipt times of the
// messages (store.Message.At), so a restart doesn't delay what already
// waited.
//
// Wake decides nothing about admission: a message is in the inbox
// because its server was allowed to send it (SPEC §16.6), and a
// treatment only says what the agent does with it.

// WakeRules are an agent's treatment rules and debounce.
type WakeRules struct {
	// Rules are the agent's own treatment rules, before treat.Defaults.
	Rules []treat.Rule
	// Debounce is the quiet a turn waits for after a waking message; 0
	// for none (a turn starts at once).
	Debounce time.Duration
	// MaxDelay bounds how long after the oldest waking message a turn
	// starts, however many come; 0 means 4 × Debounce.
	MaxDelay time.Duration
}

// maxDelay is the bound on how long debounce puts a turn off.
func (w WakeRules) maxDelay() time.Duration {
	if w.MaxDelay > 0 {
		return w.MaxDelay
	}
	return 4 * w.Debounce
}

// treatment decides what r does with m: by the agent's rules, then its
// server's accepted suggestions, then the host's defaults.
func (r *runner) treatment(m store.Message) treat.Decision {
	ev := treat.Event{Server: m.Server, Channel: m.Channel, FeatureSet: m.FeatureSet, Tags: m.Tags, Source: treat.SourcePush}
	if m.Channel != "" {
		ev.Source = treat.SourceChannel
	}
	d := treat.Decide(r.spec.Wake.Rules, ev)
	if d.Default {
		// The agent's own rules say nothing: what its server suggested
		// and its configuration accepted, before the host's defaults.
		if acc := r.rt.opts.Env.Accepted(m.Server); len(acc) > 0 {
			if s := treat.Decide(acc, ev); !s.Default {
				return s
			}
		}
	}
	return d
}

// due is when a turn over sel may start: the zero time when it may start
// now, or nothing in it wakes r. Each quiet's bound runs from the oldest
// waking message it read, whether the turn would show it or leave it out,
// so that a flood, whose oldest messages the budget leaves out, can't
// move it.
//
// While the agent's own quiet runs, it alone decides: a replaced
// subject's quiet that comes due first doesn't start the turn, which
// would show the messages waiting for the agent's quiet before it ends
// (RFC-006 §4.2: coalescing shortens no unrelated debounce, vector 44).
// The subject is shown in the turn the agent's quiet starts, so its
// delivery is put off past its own bound by at most what is left of that
// quiet, itself bounded by MaxDelay: still a finite bound. With no
// waking message of the agent's own, the first subject's quiet due
// starts the turn.
func (r *runner) due(sel *selection) time.Time {
	w := r.spec.Wake
	if w.Debounce <= 0 || len(sel.quiets) == 0 {
		return time.Time{}
	}
	var due time.Time
	if q := sel.quiets[""]; q != nil {
		due = q.due(w)
	} else {
		for _, q := range sel.quiets {
			due = earliest(due, q.due(w))
		}
	}
	if !due.After(time.Now()) {
		return time.Time{}
	}
	return due
}

// A quiet is one debounce: when the oldest and the newest waking message
// in it came.
type quiet struct{ first, last time.Time }

// due is when q ends: a debounce after its newest message, or its bound
// after its oldest, whichever is first.
func (q *quiet) due(w WakeRules) time.Time {
	d := q.last.Add(w.Debounce)
	if bound := q.first.Add(w.maxDelay()); bound.Before(d) {
		return bound
	}
	return d
}

// stream names the quiet m joins: a replaced coalesced subject's own (its
// current occurrence's, which no other message read has), else the
// agent's one, "".
func stream(m store.Message, co Coalesced) string {
	if co.Since.IsZero() {
		return ""
	}
	return m.Server + "\x00" + occurrence(m)
}

// woke notes when a message read that wakes the runner came, in the quiet
// named (zero when unknown: it doesn't hold the turn back).
func (s *selection) woke(stream string, at time.Time) {
	if at.IsZero() {
		return
	}
	q := s.quiets[stream]
	if q == nil {
		s.quiets[stream] = &quiet{first: at, last: at}
		return
	}
	if at.Before(q.first) {
		q.first = at
	}
	if at.After(q.last) {
		q.last = at
	}
}

// Carried is what a turn carried besides what woke it: the waking
// messages that came while the turn before ran (held), the messages shown
// that wake nothing by themselves (batched), and those its rules ignore
// (ignored).
type Carried struct {
	Held    int `json:"held"`
	Batched int `json:"batched"`
	Ignored int `json:"ignored"`
}

// Treated counts the messages of one server an agent's read treated one
// way: the transcript's "treated" event, which the metrics count.
type Treated struct {
	Server string          `json:"server"`
	Treat  treat.Treatment `json:"treat"`
	N      int             `json:"n"`
}

// count adds one message of server treated as tr.
func (s *selection) count(server string, tr treat.Treatment) {
	for i := range s.treated {
		if s.treated[i].Server == server && s.treated[i].Treat == tr {
			s.treated[i].N++
			return
		}
	}
	s.treated = append(s.treated, Treated{Server: server, Treat: tr, N: 1})
}

// carried is what a turn over sel carried, for its turn_start.
func (r *runner) carried(sel *selection) Carried {
	var c Carried
	for _, it := range sel.items {
		switch {
		case !r.wakes(it):
			c.Batched++
		case !it.at.IsZero() && !r.turnStart.IsZero() && !it.at.Before(r.turnStart) && it.at.Before(r.turnEnd):
			c.Held++
		}
	}
	for _, t := range sel.treated {
		if t.Treat == treat.Ignore {
			c.Ignored += t.N
		}
	}
	return c
}
