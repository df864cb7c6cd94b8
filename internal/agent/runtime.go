package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/treat"
	"github.com/mcpl-go/mcpl/store"
)

// The runtime runs the agents over the host's durable inbox, which is
// their only queue. One router reads the inbox in order, once, and routes
// wake-ups: it tells the agents (or, per channel, the channel's fork,
// which it makes when the first message the fork would be shown arrives)
// that a server's messages are there up to a position. Each agent and
// each fork has a goroutine of its own that, when idle, pulls what is
// there for it from the inbox by its own cursors, a page at a time, and
// runs a turn over it, recording the turn with the positions it consumed
// up to in one store.Record call. A message is consumed only once the
// turn that saw it is recorded, or once it is recorded as consumed
// unseen: a crash before then shows it again at the next start. What a
// runner holds in memory is bounded by the page and by what one turn
// shows (budget.go), whatever arrives.
//
// Who reads what:
//   - conversations: shared: every agent reads every channel message and
//     every push event, each in a conversation of its own;
//   - conversations: per-channel: a channel's messages go to its fork, push
//     events to the agents;
//   - an agent is shown a channel message when its channel is selected open
//     (its decision is open) or the message addresses it (chat:addressed);
//     an addressed message from a channel that isn't open comes with an
//     invitation; other messages are consumed unseen. What a message
//     shown does, wake the agent, join its next turn or be ignored, is
//     its treatment, and a turn waits out its debounce (wake.go).
//
// Each server's messages are read apart, by a cursor of their own
// ("agent/<name>/<server>"): a message whose channel is not registered
// when it is read (after a restart, before its server has registered its
// channels again) waits, holding back that server's later messages and
// no other server's, until its server registers it, or has been connected
// for RegistrationWait, or, not connected, GoneWait has passed since the
// start; then it is judged as from a channel that is gone (render.go).
//
// An agent that starts with no cursor in the store starts at the inbox's
// end: it doesn't read what arrived before it existed. A fork starts at
// the message that made it, its cursor recorded before the router routes
// past it; at a later start every fork with a cursor is made again at
// once. A fork idle for ForkIdle ends (retire): its goroutine and
// history go, its cursor is dropped, and its channel's next message the
// fork would be shown makes a new one, which goes on with the recorded
// conversation.

// Spec is one configured agent.
type Spec struct {
	Name  string
	Model model.Model
	// Provider names the model's provider (anthropic, openai, scripted),
	// for the transcript and the metrics.
	Provider string
	System   string
	// Allowed reports whether the agent may use a tool; nil allows all.
	Allowed   func(tool string) bool
	MaxTokens int
	// Wake is what wakes the agent, and its debounce (wake.go).
	Wake WakeRules
	// Retry is how its model calls are tried again (retry.go).
	Retry RetryPolicy
	// Temperature and TopP are sent with each model call when set.
	Temperature, TopP *float64
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
	// Channel describes a channel; ok is false for one the host knows
	// nothing of (neither registered nor decided).
	Channel(server, id string) (channels.ListedChannel, bool)
	// Connected reports since when server's current connection has been
	// up; the zero time when it is not connected.
	Connected(server string) time.Time
	// Publish posts an agent's speech into a channel, opening it first
	// when it is closed.
	// thread nil asks for no place; pointing at "" the channel root
	// (RFC-011).
	Publish(ctx context.Context, agent, server, channel string, thread *string, text string) channels.PublishOutcome
	// Bots is whether bots' messages may wake an agent in a channel (""
	// for a server's events without a channel), and how often in a row.
	Bots(server, channel string) BotRule
	// Accepted are the treatment rules a server suggested that its
	// configuration accepts (SPEC §16.5), tried after an agent's own.
	Accepted(server string) []treat.Rule
	// Coalesced says what becomes of server's push event eventID, read
	// from the inbox, that its server may have coalesced (RFC-006,
	// coalesced.go); the zero value for an ordinary event.
	Coalesced(server, eventID string) Coalesced
	// Assemble is called as a request (or a record between turns) is
	// assembled with server's coalesced events ids: it says what each
	// shows, rendering deferred batches first, and consumes those shown.
	// It returns one Assembled for each id, in order.
	Assemble(ctx context.Context, server string, ids []string) []Assembled
	// View renders blocks a server sent, as an agent sees them.
	View(server, provenance string, blocks []json.RawMessage) []content.Part
	// Typing tells a channel's server that the agent is typing there,
	// until stop is called; ok is false when nothing was sent (no grant,
	// a channel that isn't open).
	Typing(server, channel string) (stop func(), ok bool)
	// Seen tells each message's server that the agent has a message that
	// addressed it, where the server's configuration asks for that; it
	// returns once they are answered, or after a bound, so that the
	// acknowledgments go before the turn's reply.
	Seen(msgs []Wake)
	// Stream is where the agent's speech into a channel streams as the
	// model generates it; nil for nowhere (the server didn't declare
	// streaming).
	// thread is the place its final publish asks for (RFC-011 §6).
	Stream(server, channel string, thread *string) Stream
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
	// jitter is the retries' random part (retry.go): a duration in [0,
	// d]; nil is random. Tests make it fixed.
	jitter func(d time.Duration) time.Duration
	// ForkIdle is how long a fork may sit idle before it ends (0:
	// DefaultForkIdle).
	ForkIdle time.Duration
	// Transcript receives every turn's events; nil writes none.
	Transcript *Transcript
	Logger     *slog.Logger
}

// Bounds of a turn, and of what waits.
const (
	DefaultMaxRounds = 16
	// MaxBatch bounds the messages one turn is shown; of more, the newest
	// are shown and the rest are counted as left out (budget.go).
	MaxBatch = 100
	// MaxHistory bounds the messages of a conversation sent to the model:
	// older ones stay in the store.
	MaxHistory = 200
	// DefaultForkIdle is how long a fork may sit idle before it ends.
	DefaultForkIdle = 30 * time.Minute
	// RegistrationWait is how long, after its server connects, a message
	// whose channel is not registered waits for the registration.
	RegistrationWait = 10 * time.Second
	// GoneWait is how long after the start a message of a server that is
	// not connected waits for it to come back and register the channel.
	GoneWait = 60 * time.Second
)

// TranscriptConversation is the store conversation the transcript's
// events are kept in.
const TranscriptConversation = "transcript"

// Runtime runs the agents.
type Runtime struct {
	opts  Options
	log   *slog.Logger
	start time.Time

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // runners and the router
	stopping chan struct{}  // closed by Stop: no turn starts any more
	router   *router
	late     *lateNotices

	mu     sync.Mutex
	agents []*runner           // the configured agents, primary first
	byName map[string]*runner  // agents and forks
	forks  map[forkKey]*runner // per-channel forks
	// ended are the forks that retired, as notices read them, until a new
	// fork of the channel is made (at most maxEnded of them).
	ended  map[string]Reader
	closed bool

	unfit unfitWarnings // the tools left out for their schemas, warned of once (fit.go)
}

type forkKey struct{ server, channel string }

// maxEnded bounds the retired forks the notice rules remember.
const maxEnded = 4096

// Start loads the agents' histories and cursors and starts them.
func Start(opts Options) (*Runtime, error) {
	if len(opts.Agents) == 0 {
		return nil, errors.New("agent: no agents")
	}
	if opts.MaxRounds <= 0 {
		opts.MaxRounds = DefaultMaxRounds
	}
	if opts.ForkIdle <= 0 {
		opts.ForkIdle = DefaultForkIdle
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.jitter == nil {
		opts.jitter = randomJitter
	}
	rt := &Runtime{opts: opts, log: log, start: time.Now(), stopping: make(chan struct{}),
		byName: map[string]*runner{}, forks: map[forkKey]*runner{}, ended: map[string]Reader{}}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	ctx := rt.ctx
	cursors, err := opts.Store.Cursors(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: reading the inbox cursors: %w", err)
	}
	// The inbox's end is read only for an agent new to the store.
	end := int64(-1)
	fresh := map[string]int64{}
	for _, s := range opts.Agents {
		base, ok := cursors[cursorName(s.Name)]
		if !ok {
			if end < 0 {
				if end, err = opts.Store.InboxEnd(ctx); err != nil {
					return nil, fmt.Errorf("agent: reading the inbox: %w", err)
				}
			}
			base = end
			fresh[cursorName(s.Name)] = end
		}
		r, err := rt.newRunner(ctx, s, s.Name, forkKey{}, base, serverCursors(cursors, s.Name))
		if err != nil {
			return nil, err
		}
		rt.agents = append(rt.agents, r)
		rt.byName[s.Name] = r
	}
	if opts.PerChannel {
		if err := rt.loadForks(ctx, cursors); err != nil {
			return nil, err
		}
	}
	if len(fresh) > 0 {
		if _, err := opts.Store.Record(ctx, nil, fresh); err != nil {
			return nil, fmt.Errorf("agent: recording the agents' starting place: %w", err)
		}
	}
	rt.late = newLateNotices()
	rt.router = newRouter(rt, cursors)
	for _, r := range rt.byName {
		rt.run(r)
		r.poke() // each reads what it left before the start
	}
	rt.wg.Add(1)
	go rt.router.run()
	rt.Wake()
	return rt, nil
}

// Cursor names: "agent/<name>" is an agent's base (where it started, or
// where it had read to before cursors were kept by server), and
// "agent/<name>/<server>" its cursor in server's messages; a fork's is
// "agent/<fork>"; the router's, per channel, "route/<server>".
func cursorName(conversation string) string { return "agent/" + conversation }

func serverCursorName(agent, server string) string { return "agent/" + agent + "/" + server }

const routePrefix = "route/"

func routeCursorName(server string) string { return routePrefix + server }

// cutRoute is the server of a router's cursor name; ok is false for any
// other name.
func cutRoute(name string) (server string, ok bool) {
	server, ok = strings.CutPrefix(name, routePrefix)
	return server, ok && server != ""
}

// serverCursors reads agent's cursors by server.
func serverCursors(cursors map[string]int64, agent string) map[string]int64 {
	out := map[string]int64{}
	prefix := "agent/" + agent + "/"
	for name, pos := range cursors {
		if server, ok := strings.CutPrefix(name, prefix); ok && !strings.Contains(server, "/") {
			out[server] = pos
		}
	}
	return out
}

// forkName names the fork of primary for a channel:
// "<primary>@<server>/<channel>". Neither an agent's name nor a server's
// id can hold "@" or "/", so the name reads back (loadForks).
func forkName(primary string, k forkKey) string {
	return primary + "@" + k.server + "/" + k.channel
}

// loadForks makes again the primary's forks that have a cursor.
func (rt *Runtime) loadForks(ctx context.Context, cursors map[string]int64) error {
	primary := rt.agents[0]
	prefix := cursorName(primary.name + "@")
	for name, c := range cursors {
		rest, ok := strings.CutPrefix(name, prefix)
		server, channel, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 {
			continue
		}
		k := forkKey{server, channel}
		p := primary.spec
		p.Name = forkName(primary.name, k)
		f, err := rt.newRunner(ctx, p, p.Name, k, c, nil)
		if err != nil {
			return err
		}
		rt.byName[p.Name], rt.forks[k] = f, f
	}
	return nil
}

// Wake tells the runtime the inbox has new messages, or that a channel's
// registration or a server's connection changed what a waiting message
// waits on.
func (rt *Runtime) Wake() { rt.router.poke() }

// Notice routes a channel notice to the agents that should read it. It
// never wakes them and never blocks: each reads it before its next model
// call, or at the start of its next turn; one for an agent whose loop has
// ended is queued and recorded for its next start.
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

// Readers returns the agents (and forks, the ended ones too) as the
// notice rules see them.
func (rt *Runtime) Readers() map[string]Reader {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make(map[string]Reader, len(rt.byName)+len(rt.ended))
	for name, rd := range rt.ended {
		out[name] = rd
	}
	for name, r := range rt.byName {
		out[name] = r.reader()
	}
	return out
}

// Close stops the agents (a turn in flight is cut short, its model call
// aborted, and recorded as it stands), waits for them, and records the
// notices that came for them after their loops ended.
func (rt *Runtime) Close() {
	rt.Stop(0)
	rt.late.close()
}

// Stop stops the agents in order: no turn starts any more, the turns in
// flight have up to grace to end by themselves, then what is left is cut
// short (its model call aborted) and recorded as Close says. Messages no
// turn took stay in the inbox for the next start. It waits for the
// agents. Notices that come after it are recorded for the next start;
// Close waits for those records.
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

// shows reports whether an agent is shown a channel message, and whether
// its channel is open to it: selected open, or, on a server that runs its
// channels itself (no channels.lifecycle), not decided closed. A message
// from a channel that isn't open is shown when it addresses the agent.
func shows(m store.Message, ch channels.ListedChannel, known bool) (shown, open bool) {
	open = known && (ch.Desired == string(store.Open) || (!ch.Lifecycle && ch.Desired != string(store.Closed)))
	return open || addressed(m.Tags), open
}

func addressed(tags []string) bool { return slices.Contains(tags, content.TagAddressed) }
