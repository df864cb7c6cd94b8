package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

// show decides whether the agent sees m, judged by v, and how.
func (r *runner) show(m store.Message, v verdict) (item, bool) {
	if m.Channel == "" {
		// An event without a channel: the agents', never a fork's.
		if r.fork {
			return item{}, false
		}
		return r.renderPush(m), true
	}
	if r.rt.opts.PerChannel && !r.fork {
		return item{}, false // its fork's
	}
	shown, open := v.shows(m)
	if !shown {
		return item{}, false
	}
	return r.renderMessage(m, v, open), true
}

// turn is one turn of a runner, from what woke it to its record.
type turn struct {
	r     *runner
	ctx   context.Context
	index int64      // 1-based
	sel   *selection // what it read: the positions consumed once recorded

	msgs    []model.Message // this turn's messages, recorded at its end
	pending []model.Block   // notices and outcomes not yet in msgs
	events  []Event         // the transcript's, kept in the store too
	locus   *forkKey        // where speech goes; nil: nowhere
	thread  string          // the thread in locus it answers ("" the root)
	// streamed: the last model call's prose went out as a stream.
	streamed bool
	// attempt is the last model call's successful attempt (retry.go).
	attempt Attempt
	// posted is what a model call that failed had streamed to the locus
	// (as published); "" for nothing.
	posted string
	// acted: a tool was called or prose was posted, so the turn has had
	// an effect and is recorded even when cut short.
	acted atomic.Bool
}

func (r *runner) newTurn(ctx context.Context, sel *selection) *turn {
	return &turn{r: r, ctx: ctx, index: r.turns + 1, sel: sel}
}

func (t *turn) event(ev Event) {
	ev.Agent, ev.Turn = t.r.name, t.index
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	t.events = append(t.events, ev)
	t.r.rt.opts.Transcript.Write(ev)
}

// addNotices queues notices for the agent's next message.
func (t *turn) addNotices(texts []string) {
	for _, s := range texts {
		t.pending = append(t.pending, model.Block{Type: model.Text, Text: s})
		t.event(Event{Event: EventNotice, Text: s})
	}
}

// note queues a host-made text (a speech outcome, a limit) like a notice.
func (t *turn) note(s string) { t.addNotices([]string{s}) }

// flushNotices puts what is pending into the conversation as a user
// message of its own (merged with the user message before it, if the
// conversation ends with one).
func (t *turn) flushNotices() {
	if len(t.pending) == 0 {
		return
	}
	t.appendUser(t.pending...)
	t.pending = nil
}

// appendUser adds blocks to the turn's newest user message, or starts one.
func (t *turn) appendUser(blocks ...model.Block) {
	if n := len(t.msgs); n > 0 && t.msgs[n-1].Role == model.User {
		t.msgs[n-1].Content = append(t.msgs[n-1].Content, blocks...)
		return
	}
	t.msgs = append(t.msgs, model.Message{Role: model.User, Content: blocks})
}

// run runs the turn: the items and notices become the agent's message,
// then model calls and tool rounds until the model ends its turn.
func (t *turn) run(sel *selection, notices []string) {
	items := sel.items
	var wakes []Wake
	var pick *item // what the turn answers: its locus, and the thread there
	addressedLoci := t.lociAddressed(items)
	for i := range items {
		it := &items[i]
		if !t.r.wakes(*it) {
			// Batched: read with the turn; it neither woke it nor says
			// where its prose goes (so no typing where it won't speak).
			continue
		}
		wakes = append(wakes, it.wake)
		if it.locus != nil && (pick == nil || it.addressed || !addressedLoci) {
			pick = it
		}
	}
	if pick != nil {
		t.locus, t.thread = pick.locus, pick.thread
		if p := pick.privately; p != nil && (!t.r.fork || p.forkKey == t.r.home) {
			// A private message on a shared channel: answered where its
			// server offers to answer it privately (privacy.go); a fork
			// only in its own channel.
			t.locus, t.thread = &p.forkKey, p.thread
		}
	}
	if t.r.fork {
		// A fork answers in its channel only: every item it reads is
		// from there.
		home := t.r.home
		t.locus = &home
	}
	carried := t.r.carried(sel)
	t.r.turnStart = time.Now()
	t.event(Event{Event: EventTurnStart, WokenBy: wakes, Carried: &carried})
	t.treated(sel)
	var seen []Wake
	for _, it := range items {
		if it.addressed && it.locus != nil {
			seen = append(seen, it.wake)
		}
	}
	t.r.rt.opts.Env.Seen(seen)
	t.addNotices(notices)
	t.addNotices(t.r.countBots(items))
	t.flushNotices()
	userText := t.showItems(sel, t.locus)
	stopTyping := t.typing()
	reason := t.think(&userText)
	stopTyping()
	t.r.turnEnd = time.Now()
	t.event(Event{Event: EventTurnEnd, Reason: reason})
	if reason == "aborted" && !t.acted.Load() {
		// Cut short before it did anything: not recorded, so its
		// messages are shown again at the next start, and its notices
		// go back to be recorded with the runner's others.
		t.r.mu.Lock()
		t.r.notices = append(slices.Clone(notices), t.r.notices...)
		t.r.mu.Unlock()
		return
	}
	t.record(reason)
}

// showItems puts what the turn is shown of sel into its user message (a
// turn's prose going to locus), and returns its text.
func (t *turn) showItems(sel *selection, locus *forkKey) string {
	var shown []model.Block
	if line := sel.leftOut(); line != "" {
		shown = append(shown, model.Block{Type: model.Text, Text: line})
	}
	for _, it := range sel.items {
		shown = append(shown, it.shown(locus)...)
	}
	if len(shown) == 0 {
		return ""
	}
	t.appendUser(shown...)
	userText := blocksText(shown)
	t.event(Event{Event: EventShown, Text: userText})
	return userText
}

// typing tells the locus's server that the agent is working toward speech
// there; the func returned ends it, and is called as the turn ends, by
// whatever path.
func (t *turn) typing() (stop func()) {
	if t.locus == nil {
		return func() {}
	}
	l := *t.locus
	end, ok := t.r.rt.opts.Env.Typing(l.server, l.channel)
	if !ok {
		return func() {}
	}
	t.event(Event{Event: EventTyping, Outcome: "start", Server: l.server, Channel: l.channel})
	return func() {
		end()
		t.event(Event{Event: EventTyping, Outcome: "stop", Server: l.server, Channel: l.channel})
	}
}

// treated writes what the read behind the turn treated how, when it read
// anything (wake.go).
func (t *turn) treated(sel *selection) {
	if sel != nil && len(sel.treated) > 0 {
		t.event(Event{Event: EventTreated, Treated: sel.treated})
	}
}

// lociAddressed reports whether any item with a locus addresses the agent:
// then the locus is the newest addressed one's channel.
func (t *turn) lociAddressed(items []item) bool {
	for _, it := range items {
		if it.locus != nil && it.addressed && t.r.wakes(it) {
			return true
		}
	}
	return false
}

// think calls the model until it ends its turn, running the tools it asks
// for; it returns why the turn ended.
func (t *turn) think(userText *string) string {
	r := t.r
	tools := r.tools()
	for round := 0; ; round++ {
		if round > 0 && t.ctx.Err() != nil {
			return "aborted"
		}
		resp, err := t.infer(tools, userText)
		userText = nil
		if err != nil {
			if t.ctx.Err() != nil {
				return "aborted"
			}
			r.rt.log.Error("an agent's model call failed", "agent", r.name, "error", errorText(err))
			t.note(textModelFailed(err, t.where(), t.posted))
			t.flushNotices()
			return "error"
		}
		if len(resp.Content) > 0 {
			t.msgs = append(t.msgs, model.Message{Role: model.Assistant, Content: resp.Content})
		}
		calls := resp.Calls()
		var results []model.Block
		if len(calls) > 0 {
			results = t.callTools(calls)
			t.appendUser(results...)
		}
		// The prose goes after the calls: a post by one of them stands
		// for it.
		if text := strings.TrimSpace(resp.Text()); text != "" {
			// Prose already streamed to its channel is posted whatever
			// the calls did: a stream carries only what is delivered
			// (SPEC §14.3).
			if tool := t.postedBy(calls, results); tool != "" && !t.streamed {
				t.event(Event{Event: EventSpeech, Outcome: "withheld", Tool: tool, Text: text})
				t.note(textWithheld(tool))
			} else {
				t.speak(text)
			}
		}
		switch {
		case len(calls) == 0 && resp.Stop == model.MaxTokens:
			t.flushNotices()
			return "max_tokens"
		case len(calls) == 0 && resp.Stop == model.Refused:
			t.flushNotices()
			return "refused"
		case len(calls) == 0:
			t.flushNotices()
			return "end_turn"
		}
		if round+1 >= r.rt.opts.MaxRounds {
			t.note(textMaxRounds(r.rt.opts.MaxRounds))
			t.flushNotices()
			return "max_rounds"
		}
		// A safe point: the tool results are in, so notices that came
		// meanwhile go in after them.
		t.addNotices(r.takeNotices())
		t.flushNotices()
	}
}

// postedBy names the first of calls that posted into a channel itself
// (channel_publish, a send tool) and succeeded; "" for none.
func (t *turn) postedBy(calls []model.ToolCall, results []model.Block) string {
	for i, c := range calls {
		if _, posts := t.r.rt.opts.Env.Posts(c.Name); posts && !results[i].Result.IsError {
			return c.Name
		}
	}
	return ""
}

// infer makes one model call, with the hooks around it.
func (t *turn) infer(tools []model.Tool, userText *string) (model.Response, error) {
	r := t.r
	info := r.spec.Model.Info()
	inf := Inference{ID: newInferenceID(), Conversation: r.name, TurnIndex: int(t.index - 1), UserMessage: userText, Model: info}
	system := r.spec.System
	var before, after []model.Block
	var life Lifecycle
	h := r.rt.opts.Hooks
	if h != nil {
		var sys []model.Block
		sys, before, after = h.Before(t.ctx, inf)
		system = joinSystem(system, sys)
	}
	// The injections count against the window like the rest.
	msgs := inject(r.context(t.msgs, system, tools, blocksTokens(before)+blocksTokens(after)), before, after)
	if h != nil {
		life = h.Start(inf)
	}
	req := model.Request{System: system, Messages: msgs, Tools: tools, MaxTokens: r.spec.MaxTokens, Temperature: r.spec.Temperature, TopP: r.spec.TopP}
	s := t.stream(inf)
	streamed := func() bool { return false }
	if s != nil {
		req.OnText = s.delta
		streamed = s.began // text went out: no retry (retry.go)
	}
	resp, err := t.generate(req, streamed)
	t.streamed, t.posted = false, ""
	if s != nil {
		t.streamed = s.complete()
		if err != nil && t.streamed {
			t.posted = s.published()
		}
	}
	if life != nil {
		switch {
		case err == nil:
			life.Completed(resp.Usage)
		case t.ctx.Err() != nil:
			life.Aborted()
		default:
			life.Failed()
		}
	}
	if err != nil {
		return resp, err
	}
	u := resp.Usage
	attempt := t.attempt
	ev := Event{Event: EventModel, Stop: string(resp.Stop), Text: resp.Text(), Usage: &UsageLine{In: u.InputTokens, Out: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens}, Model: resp.Model, Provider: r.spec.Provider, Attempt: &attempt}
	for _, c := range resp.Calls() {
		ev.Calls = append(ev.Calls, CallLine{ID: c.ID, Name: c.Name, Args: c.Args})
	}
	t.event(ev)
	return resp, nil
}

// speak posts the agent's prose to the turn's locus and tells it how that
// went.
func (t *turn) speak(text string) {
	r := t.r
	if t.locus == nil {
		t.event(Event{Event: EventSpeech, Outcome: channels.Failed, Text: text})
		t.note(textNoLocus(r.reader().allowed(channels.ToolPublish) && !r.fork))
		return
	}
	t.acted.Store(true)
	out := r.rt.opts.Env.Publish(t.ctx, r.name, t.locus.server, t.locus.channel, t.target(), text)
	t.event(Event{Event: EventSpeech, Server: t.locus.server, Channel: t.locus.channel, Outcome: out.Status, Text: text})
	t.note(textSpeechOutcome(out))
}

// target is the thread the turn's prose asks for in its locus (RFC-011):
// the thread of what it answers ("" the root, sent as null) on a channel
// that places posts exactly; nil (no threadId sent) on a root channel or
// one that declares nothing.
func (t *turn) target() *string {
	ch, _ := t.r.rt.opts.Env.Channel(t.locus.server, t.locus.channel)
	if ch.PublishTarget != "exact" {
		return nil
	}
	thread := t.thread
	return &thread
}

// record writes the turn (its messages, transcript events and the
// consumed position) in one call; a turn cut short by shutdown is
// recorded too, as it stands.
func (t *turn) record(reason string) {
	r := t.r
	entries := make([]store.Entry, 0, len(t.msgs)+len(t.events))
	index := r.turns
	if reason != "" {
		index = t.index
	}
	for _, m := range t.msgs {
		entries = append(entries, entryOf(r.name, index, m))
	}
	for _, ev := range t.events {
		entries = append(entries, transcriptEntry(ev))
	}
	cursors := map[string]int64{}
	if t.sel != nil {
		for server, pos := range t.sel.consumed {
			if pos <= r.cursor(server) {
				continue
			}
			if r.fork {
				cursors[cursorName(r.name)] = pos
			} else {
				cursors[serverCursorName(r.name, server)] = pos
			}
		}
		if t.sel.base > r.base {
			cursors[cursorName(r.name)] = t.sel.base
		}
	}
	if len(entries) == 0 && len(cursors) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), storeWait)
	defer cancel()
	if _, err := r.rt.opts.Store.Record(ctx, entries, cursors); err != nil {
		// The messages stay unconsumed in the store: the next start shows
		// them again. In memory the turn stands, so this run goes on.
		r.rt.log.Error("an agent's turn could not be recorded; its messages are shown again after a restart", "agent", r.name, "error", err.Error())
	}
	for _, m := range t.msgs {
		r.remember(m)
	}
	if t.sel != nil {
		for server, pos := range t.sel.consumed {
			if pos <= r.cursor(server) {
				continue
			}
			if r.fork {
				r.base = pos
				r.mu.Lock()
				r.at = pos
				r.mu.Unlock()
			} else {
				r.cursors[server] = pos
			}
		}
		if t.sel.base > r.base {
			r.base = t.sel.base
		}
	}
	r.turns = index
}

func newInferenceID() string {
	var b [8]byte
	rand.Read(b[:])
	return "inf_" + hex.EncodeToString(b[:])
}

// errorText is what an agent reads of a failed model call.
func errorText(err error) string {
	var me *model.Error
	if errors.As(err, &me) {
		return me.Text
	}
	return err.Error()
}

// streaming is one inference's speech streamed to its locus's server.
type streaming struct {
	t     *turn
	inf   Inference
	to    Stream
	where forkKey

	mu    sync.Mutex
	index int
	text  strings.Builder
	done  bool
}

// stream returns the inference's stream, or nil when its speech streams
// nowhere: no locus (fail closed: nothing streams while the destination
// is undecided), or a server that didn't declare streaming.
func (t *turn) stream(inf Inference) *streaming {
	if t.locus == nil {
		return nil
	}
	to := t.r.rt.opts.Env.Stream(t.locus.server, t.locus.channel, t.target())
	if to == nil {
		return nil
	}
	return &streaming{t: t, inf: inf, to: to, where: *t.locus}
}

// delta streams a piece of text; one that comes after the call ended is
// dropped, and so is the white space before the first words (the speech
// published is trimmed).
func (s *streaming) delta(d string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.index == 0 {
		d = strings.TrimLeftFunc(d, unicode.IsSpace)
	}
	if s.done || d == "" {
		return
	}
	s.to.Chunk(s.inf.ID, s.inf.Conversation, s.index, d)
	s.index++
	s.text.WriteString(d)
}

// began reports whether any chunk went out.
func (s *streaming) began() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index > 0
}

// published is the text streamed, as it is published (trimmed).
func (s *streaming) published() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.TrimSpace(s.text.String())
}

// where names the turn's locus for the agent; "" when it has none.
func (t *turn) where() string {
	if t.locus == nil {
		return ""
	}
	ch, _ := t.r.rt.opts.Env.Channel(t.locus.server, t.locus.channel)
	return ref(channels.ChannelRef{ID: t.locus.channel, Label: ch.Label})
}

// complete closes the stream, if any chunk went out, with its full text
// as it is published (trimmed): on every exit of the model call. It
// reports whether any chunk went out.
func (s *streaming) complete() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	if s.index == 0 {
		return false
	}
	text := strings.TrimSpace(s.text.String())
	s.to.Complete(s.inf.ID, s.inf.Conversation, text)
	s.t.event(Event{Event: EventStreamed, Server: s.where.server, Channel: s.where.channel, Text: text})
	return true
}
