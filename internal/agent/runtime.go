package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

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
// message that made it.

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
	// Silences reports whether a call of the tool posts into a channel
	// itself (channel_publish, a send tool), so that the same response's
	// prose is not also posted.
	Silences(tool string) bool
	// Channel describes a channel; ok is false for one the host doesn't
	// know.
	Channel(server, id string) (channels.ListedChannel, bool)
	// Publish posts an agent's speech into a channel, opening it first
	// when it is closed.
	Publish(ctx context.Context, agent, server, channel, text string) channels.PublishOutcome
	// View renders blocks a server sent, as an agent sees them.
	View(server, provenance string, blocks []json.RawMessage) []content.Part
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
	Logger     *slog.Logger
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

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

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
	rt := &Runtime{opts: opts, log: log, wake: make(chan struct{}, 1), byName: map[string]*runner{}, forks: map[forkKey]*runner{}}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	ctx := rt.ctx
	cursors, err := opts.Store.Cursors(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: reading the inbox cursors: %w", err)
	}
	rt.cursors = cursors
	end, err := inboxEnd(ctx, opts.Store)
	if err != nil {
		return nil, err
	}
	start := end
	fresh := map[string]int64{}
	for _, s := range opts.Agents {
		c, ok := cursors[cursorName(s.Name)]
		if !ok {
			c = end
			fresh[cursorName(s.Name)] = end
		}
		r, err := rt.newRunner(ctx, s, s.Name, forkKey{}, c)
		if err != nil {
			return nil, err
		}
		rt.agents = append(rt.agents, r)
		start = min(start, c)
	}
	for name, c := range cursors {
		if isForkCursor(name) {
			start = min(start, c)
		}
	}
	if len(fresh) > 0 {
		if _, err := opts.Store.Record(ctx, nil, fresh); err != nil {
			return nil, fmt.Errorf("agent: recording the agents' starting place: %w", err)
		}
	}
	rt.read = start
	for _, r := range rt.agents {
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

const forkMark = "@"

// isForkCursor reports whether a cursor is a fork's: agent names can't
// hold forkMark.
func isForkCursor(name string) bool {
	return strings.HasPrefix(name, "agent/") && strings.Contains(name, forkMark)
}

// forkName names the fork of primary for a channel.
func forkName(primary string, k forkKey) string {
	return primary + forkMark + k.server + "/" + k.channel
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
func (rt *Runtime) Close() {
	rt.mu.Lock()
	rt.closed = true
	rt.mu.Unlock()
	rt.cancel()
	rt.wg.Wait()
}

// dispatch reads the inbox in order and hands each message to the agents
// it is for.
func (rt *Runtime) dispatch() {
	defer rt.wg.Done()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-rt.wake:
		}
		err := rt.opts.Store.Messages(rt.ctx, rt.read, func(m store.Message) error {
			rt.route(m)
			rt.read = m.Seq
			return nil
		})
		if err != nil && rt.ctx.Err() == nil {
			rt.log.Error("agents could not read the inbox; they read it again at the next message", "error", err.Error())
		}
	}
}

// route hands m to the agents it is for.
func (rt *Runtime) route(m store.Message) {
	// Read before the lock: the registry is never called under it.
	vis := m.Kind != store.KindPushEvent && rt.opts.PerChannel && rt.visible(m)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if m.Kind == store.KindPushEvent || !rt.opts.PerChannel {
		for _, r := range rt.agents {
			r.enqueue(m)
		}
		return
	}
	// Per-channel: the channel's fork reads it, the agents pass it (it
	// is not theirs). The fork is made first, its starting place
	// recorded, so that the agents passing it can't leave it behind at
	// the next start.
	k := forkKey{m.Server, m.Channel}
	f := rt.forks[k]
	if f == nil && vis {
		f = rt.fork(k, m)
	}
	if f != nil {
		f.enqueue(m)
	}
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
	rt.forks[k] = f
	if !rt.closed {
		rt.run(f)
	}
	return f
}

// visible reports whether a channel message would be shown: its channel
// is selected open, or it addresses the agent.
func (rt *Runtime) visible(m store.Message) bool {
	if addressed(m.Tags) {
		return true
	}
	ch, ok := rt.opts.Env.Channel(m.Server, m.Channel)
	return ok && ch.Desired == string(store.Open)
}

func addressed(tags []string) bool {
	for _, t := range tags {
		if t == "chat:addressed" {
			return true
		}
	}
	return false
}

// run starts r's goroutine.
func (rt *Runtime) run(r *runner) {
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		r.loop(rt.ctx)
	}()
}
