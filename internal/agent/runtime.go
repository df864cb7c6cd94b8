package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/store"
)

// The runtime runs the agents over the host's durable inbox. One
// dispatcher reads the inbox in order and hands each message to the agents
// it is for; each agent (and each fork) has a goroutine of its own that
// runs its turns one at a time and records each turn, with the inbox
// position it consumed up to, in one store.Record call. A message is
// consumed only once the turn that saw it is recorded: a crash before then
// replays it at the next start.
//
// Who reads what:
//   - conversations: shared: every agent reads every channel message and
//     every push event, each in a conversation of its own;
//   - conversations: per-channel: a channel's messages go to its fork (made
//     when its first message the fork would be shown arrives), push events
//     to the agents;
//   - an agent is shown a channel message when its channel is selected open
//     (its decision is open) or the message addresses it (chat:addressed);
//     an addressed message from a channel that isn't open comes with an
//     invitation; other messages are consumed unseen. Every message shown
//     wakes the agent; a push event always does.
//
// An agent that starts with no cursor in the store starts at the inbox's
// end: it doesn't read what arrived before it existed. A fork starts at the
// message that made it, its cursor recorded then; at a later start every
// fork with a cursor is made again at once, so that it goes on consuming
// its channel's traffic, shown or not, from where it stopped.

// Spec is one configured agent.
type Spec struct {
	Name   string
	Model  model.Model
	System string
	// Allowed reports whether the agent may use a tool; nil allows all.
	Allowed   func(tool string) bool
	MaxTokens int
}

// ToolAnswer is a tool call's outcome as the agent reads it.
type ToolAnswer struct {
	Content []model.Block
	IsError bool
	// Outcome is "ok", or the failure's outcome (refused, not-sent, ...).
	Outcome string
}

// Env is what agents act on: the host.
type Env interface {
	// Tools lists every tool an agent could be offered.
	Tools() []model.Tool
	// CallTool runs a tool as agent.
	CallTool(ctx context.Context, agent, name string, args json.RawMessage) ToolAnswer
	// Posts reports whether a call of the tool posts into a channel
	// itself (channel_publish, a send tool), so that the same response's
	// prose is not also posted, and the server a send tool posts on (""
	// for channel_publish, which names its server in its arguments).
	Posts(tool string) (server string, posts bool)
	// Channel describes a channel; ok is false for one the host doesn't
	// know.
	Channel(server, id string) (channels.ListedChannel, bool)
	// Publish posts an agent's speech into a channel, opening it first
	// when it is closed.
	Publish(ctx context.Context, agent, server, channel, text string) channels.PublishOutcome
	// View renders blocks a server sent, as an agent sees them.
	View(server, provenance string, blocks []json.RawMessage) []content.Part
	// Typing tells a channel's server that the agent is typing there,
	// until stop is called; ok is false when nothing was sent (no grant,
	// a channel that isn't open).
	Typing(server, channel string) (stop func(), ok bool)
	// Seen tells a channel's server that the agent has a message that
	// addressed it, where the server's configuration asks for that.
	Seen(server, channel, messageID string)
	// Stream is where the agent's speech into a channel streams as the
	// model generates it; nil for nowhere (the server didn't declare
	// streaming).
	Stream(server, channel string) Stream
}

// Stream receives the speech an agent is generating for a channel
// (channels/outgoing/chunk and complete): advisory, as the speech is
// still published, and its outcome is what the agent is told.
type Stream interface {
	Chunk(inferenceID, conversationID string, index int, delta string)
	Complete(inferenceID, conversationID, text string)
}

// Inference is one model call of an agent, as context hooks see it.
type Inference struct {
	ID           string
	Conversation string
	TurnIndex    int
	// UserMessage is the text the turn was woken with, on its first
	// model call; nil on the calls that continue it.
	UserMessage *string
	Model       model.Info
}

// Lifecycle ends an inference: exactly one of its methods is called.
type Lifecycle interface {
	Completed(model.Usage)
	Aborted()
	Failed()
}

// Hooks are the servers' context hooks (SPEC §10).
type Hooks interface {
	// Before runs context/beforeInference and returns the injections, by
	// position.
	Before(ctx context.Context, inf Inference) (system, beforeUser, afterUser []model.Block)
	// Start announces the inference (inference/lifecycle started).
	Start(inf Inference) Lifecycle
}

// Options configure a Runtime.
type Options struct {
	Store store.Store
	Env   Env
	// Hooks is nil when no server takes hooks.
	Hooks Hooks
	// Agents are the agents; the first is the primary.
	Agents []Spec
	// PerChannel gives each channel a fork of the primary.
	PerChannel bool
	// MaxRounds bounds the model calls that ask for tools in one turn
	// (0: DefaultMaxRounds).
	MaxRounds int
	// Transcript receives every turn's events; nil writes none.
	Transcript *Transcript
	// Hold, if set, holds the first read of the inbox until it is closed
	// (the host's first connects have settled), so that messages left
	// from before a restart are not shown before their servers are back
	// to register their channels.
	Hold   <-chan struct{}
	Logger *slog.Logger
}

// Bounds of a turn.
const (
	DefaultMaxRounds = 16
	// MaxBatch bounds the messages one turn is shown; more wait for the
	// next.
	MaxBatch = 100
	// MaxHistory bounds the messages of a conversation sent to the model:
	// older ones stay in the store.
	MaxHistory = 200
)

// TranscriptConversation is the store conversation the transcript's
// events are kept in.
const TranscriptConversation = "transcript"

// Runtime runs the agents.
type Runtime struct {
	opts Options
	log  *slog.Logger

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	wake     chan struct{}
	stopping chan struct{} // closed by Stop: no turn starts any more

	mu      sync.Mutex
	agents  []*runner           // the configured agents, primary first
	byName  map[string]*runner  // agents and forks
	forks   map[forkKey]*runner // per-channel forks
	cursors map[string]int64    // as loaded: a fork made later starts here
	read    int64               // the dispatcher's inbox position
	closed  bool
}

type forkKey struct{ server, channel string }

// Start loads the agents' histories and cursors and starts them.
func Start(opts Options) (*Runtime, error) {
	if len(opts.Agents) == 0 {
		return nil, errors.New("agent: no agents")
	}
	if opts.MaxRounds <= 0 {
		opts.MaxRounds = DefaultMaxRounds
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	rt := &Runtime{opts: opts, log: log, wake: make(chan struct{}, 1), stopping: make(chan struct{}), byName: map[string]*runner{}, forks: map[forkKey]*runner{}}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	ctx := rt.ctx
	cursors, err := opts.Store.Cursors(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: reading the inbox cursors: %w", err)
	}
	rt.cursors = cursors
	// The inbox's end is read only for an agent new to the store: a
	// restart doesn't scan the inbox.
	end := int64(-1)
	start := int64(math.MaxInt64)
	fresh := map[string]int64{}
	for _, s := range opts.Agents {
		c, ok := cursors[cursorName(s.Name)]
		if !ok {
			if end < 0 {
				if end, err = inboxEnd(ctx, opts.Store); err != nil {
					return nil, err
				}
			}
			c = end
			fresh[cursorName(s.Name)] = end
		}
		r, err := rt.newRunner(ctx, s, s.Name, forkKey{}, c)
		if err != nil {
			return nil, err
		}
		rt.agents = append(rt.agents, r)
		rt.byName[s.Name] = r
		start = min(start, c)
	}
	if opts.PerChannel {
		forks, err := rt.loadForks(ctx, cursors)
		if err != nil {
			return nil, err
		}
		for _, f := range forks {
			start = min(start, f.cursor)
		}
	}
	if len(fresh) > 0 {
		if _, err := opts.Store.Record(ctx, nil, fresh); err != nil {
			return nil, fmt.Errorf("agent: recording the agents' starting place: %w", err)
		}
	}
	rt.read = start
	for _, r := range rt.byName {
		rt.run(r)
	}
	rt.wg.Add(1)
	go rt.dispatch()
	rt.Wake()
	return rt, nil
}

// inboxEnd is the Seq of the inbox's newest message (0 for none).
func inboxEnd(ctx context.Context, st store.Store) (int64, error) {
	var end int64
	err := st.Messages(ctx, 0, func(m store.Message) error {
		end = m.Seq
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("agent: reading the inbox: %w", err)
	}
	return end, nil
}

func cursorName(conversation string) string { return "agent/" + conversation }

// forkName names the fork of primary for a channel:
// "<primary>@<server>/<channel>". Neither an agent's name nor a server's
// id can hold "@" or "/", so the name reads back (loadForks).
func forkName(primary string, k forkKey) string {
	return primary + "@" + k.server + "/" + k.channel
}

// loadForks makes again the primary's forks that have a cursor.
func (rt *Runtime) loadForks(ctx context.Context, cursors map[string]int64) ([]*runner, error) {
	primary := rt.agents[0]
	prefix := cursorName(primary.name + "@")
	var out []*runner
	for name, c := range cursors {
		rest, ok := strings.CutPrefix(name, prefix)
		server, channel, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 {
			continue
		}
		k := forkKey{server, channel}
		p := primary.spec
		p.Name = forkName(primary.name, k)
		f, err := rt.newRunner(ctx, p, p.Name, k, c)
		if err != nil {
			return nil, err
		}
		rt.byName[p.Name], rt.forks[k] = f, f
		out = append(out, f)
	}
	return out, nil
}

// Wake tells the runtime the inbox has new messages.
func (rt *Runtime) Wake() {
	select {
	case rt.wake <- struct{}{}:
	default:
	}
}

// Notice routes a channel notice to the agents that should read it. It
// never wakes them: each reads it before its next model call, or at the
// start of its next turn.
func (rt *Runtime) Notice(n channels.Notice) {
	for _, d := range Route(n, rt.Readers(), rt.agents[0].name) {
		rt.mu.Lock()
		r := rt.byName[d.To]
		rt.mu.Unlock()
		if r != nil {
			r.notice(d.Text)
		}
	}
}

// Readers returns the agents (and forks) as the notice rules see them.
func (rt *Runtime) Readers() map[string]Reader {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := map[string]Reader{}
	for name, r := range rt.byName {
		out[name] = r.reader()
	}
	return out
}

// Close stops the agents: a turn in flight is cut short (its model call
// aborted) and recorded as it stands. It waits for them.
func (rt *Runtime) Close() { rt.Stop(0) }

// Stop stops the agents in order: no turn starts any more, the turns in
// flight have up to grace to end by themselves, then what is left is cut
// short (its model call aborted) and recorded as Close says. Messages no
// turn took stay in the inbox for the next start. It waits for the
// agents.
func (rt *Runtime) Stop(grace time.Duration) {
	rt.mu.Lock()
	if !rt.closed {
		rt.closed = true
		close(rt.stopping)
	}
	rt.mu.Unlock()
	done := make(chan struct{})
	go func() {
		rt.wg.Wait()
		close(done)
	}()
	if grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	rt.cancel()
	<-done
}

// dispatchPage bounds the inbox messages the dispatcher reads at once.
const dispatchPage = 256

var errPageFull = errors.New("page full")

// dispatch reads the inbox in order and hands each message to the agents
// it is for. It reads a page, then routes it: routing may read and write
// the store (a fork's history, its cursor), which it doesn't do inside
// the store's iteration.
func (rt *Runtime) dispatch() {
	defer rt.wg.Done()
	if rt.opts.Hold != nil {
		select {
		case <-rt.opts.Hold:
		case <-rt.ctx.Done():
			return
		case <-rt.stopping:
			return
		}
	}
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-rt.stopping:
			return
		case <-rt.wake:
		}
		for rt.ctx.Err() == nil {
			var page []store.Message
			err := rt.opts.Store.Messages(rt.ctx, rt.read, func(m store.Message) error {
				page = append(page, m)
				if len(page) == dispatchPage {
					return errPageFull
				}
				return nil
			})
			for _, m := range page {
				rt.route(m)
				rt.read = m.Seq
			}
			if err != nil && !errors.Is(err, errPageFull) && rt.ctx.Err() == nil {
				rt.log.Error("agents could not read the inbox; they read it again at the next message", "error", err.Error())
			}
			if err == nil || !errors.Is(err, errPageFull) {
				break
			}
		}
	}
}

// route hands m to the agents it is for. Only the dispatcher calls it,
// so only it makes forks.
func (rt *Runtime) route(m store.Message) {
	if m.Kind != store.KindPushEvent && rt.opts.PerChannel {
		// Per-channel: the channel's fork reads it. The fork is made
		// first, its starting place recorded, so that the agents passing
		// it can't leave it behind at the next start.
		k := forkKey{m.Server, m.Channel}
		rt.mu.Lock()
		f := rt.forks[k]
		rt.mu.Unlock()
		if f == nil && rt.visible(m) {
			f = rt.fork(k, m)
		}
		if f != nil {
			f.enqueue(m)
		}
	}
	// The agents read it, or, per-channel, pass it (it is not theirs).
	for _, r := range rt.agents {
		r.enqueue(m)
	}
}

// fork makes the fork of channel k, whose first message is m, and starts
// it; nil when it can't be made (the error is logged, and the message is
// not shown).
func (rt *Runtime) fork(k forkKey, m store.Message) *runner {
	name := forkName(rt.agents[0].name, k)
	c, ok := rt.cursors[cursorName(name)]
	if !ok {
		c = m.Seq - 1
		if _, err := rt.opts.Store.Record(rt.ctx, nil, map[string]int64{cursorName(name): c}); err != nil {
			rt.log.Error("a conversation fork could not record its starting place, so it was not made; its channel's message is not shown", "fork", name, "error", err.Error())
			return nil
		}
		rt.cursors[cursorName(name)] = c
	}
	p := rt.agents[0].spec
	p.Name = name
	f, err := rt.newRunner(rt.ctx, p, name, k, c)
	if err != nil {
		rt.log.Error("a conversation fork could not start; its channel's message is not shown", "fork", name, "error", err.Error())
		return nil
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.byName[name], rt.forks[k] = f, f
	if rt.closed {
		f.finish() // never run: what it is told is recorded at once
	} else {
		rt.run(f)
	}
	return f
}

// visible reports whether a channel message would be shown.
func (rt *Runtime) visible(m store.Message) bool {
	ch, known := rt.opts.Env.Channel(m.Server, m.Channel)
	shown, _ := shows(m, ch, known)
	return shown
}

// shows reports whether an agent is shown a channel message, and whether
// its channel is open to it: selected open, or, on a server that runs its
// channels itself (no channels.lifecycle), not decided closed. A message
// from a channel that isn't open is shown when it addresses the agent.
func shows(m store.Message, ch channels.ListedChannel, known bool) (shown, open bool) {
	open = known && (ch.Desired == string(store.Open) || (!ch.Lifecycle && ch.Desired != string(store.Closed)))
	return open || addressed(m.Tags), open
}

func addressed(tags []string) bool { return slices.Contains(tags, content.TagAddressed) }

// run starts r's goroutine.
func (rt *Runtime) run(r *runner) {
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		r.loop(rt.ctx)
	}()
}

// isStopping reports whether Stop has begun.
func (rt *Runtime) isStopping() bool {
	select {
	case <-rt.stopping:
		return true
	default:
		return false
	}
}
