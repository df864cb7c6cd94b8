package host

import (
	"context"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/metrics"
)

// What the host shows of itself while it runs: its channels and agents as
// snapshots (for a status page), and, given a Prometheus registerer, its
// metrics (internal/metrics; docs/status.md lists them).

// TranscriptEvent is one event of an agent's transcript
// (docs/transcript.md).
type TranscriptEvent = agent.Event

// Wake is one thing that woke an agent for a turn.
type Wake = agent.Wake

// RecentEvents is how many of each agent's latest transcript events
// Agents keeps.
const RecentEvents = 100

// ChannelState is a snapshot of one channel: as its server registered it
// (while it does), and the decision this host keeps for it (which
// outlives a registration, and the server's connection).
type ChannelState struct {
	Server, ID string
	// Registered: its server has it registered now; Label, Type and
	// Direction are then as registered.
	Registered             bool
	Label, Type, Direction string
	// Lazy: this host registered it itself, from a push that named it
	// (its server never did); Private: it is a private channel (a DM);
	// PublishTarget its RFC-011 capabilities.publish.target.
	Lazy, Private bool
	PublishTarget string
	// Open: the server confirmed it open, and it is open now.
	Open bool
	// Decision is "open" or "closed", or "" when nothing was decided;
	// Source says who decided it (docs/channels.md) and DecidedAt when.
	Decision  string
	Source    string
	DecidedAt time.Time
	// What is known of the channel on its server, apart from the
	// decision (OnServer words it). Lifecycle: this host directs its
	// lifecycle (channels.lifecycle is granted), so the server's answers
	// say whether it is open; without it the server keeps that to
	// itself. Confirmed: the last channels/open or channels/close of
	// this registration settled (Open is what it settled to). Pending is
	// "open" or "close" while such a request is out. OpenFailed or
	// CloseFailed is the last such request's failure, in the operator's
	// words, until a later one settles; FailedAt when it failed.
	Lifecycle               bool
	Confirmed               bool
	Pending                 string
	OpenFailed, CloseFailed string
	FailedAt                time.Time
}

// What OnServer says of a channel on its server.
const (
	OnServerOpen          = "open"
	OnServerClosed        = "closed"
	OnServerOpening       = "opening"
	OnServerClosing       = "closing"
	OnServerOpenFailed    = "open failed"
	OnServerCloseFailed   = "close failed"
	OnServerUnknown       = "unknown"
	OnServerNotRegistered = "not registered"
)

// OnServer is the channel's state on its server as this host knows it,
// never merged with its decision: "not registered" while its server has
// no registration of it; "unknown" when the host does not direct its
// lifecycle, or no request of this registration has settled, none is
// out and none failed; "opening" or "closing" while a request is out;
// "open failed" or "close failed" when the last one failed (OpenFailed,
// CloseFailed say why); else "open" or "closed", as the server's last
// answer confirmed it.
func (c ChannelState) OnServer() string {
	switch {
	case !c.Registered:
		return OnServerNotRegistered
	case !c.Lifecycle:
		return OnServerUnknown
	case c.Pending == "open":
		return OnServerOpening
	case c.Pending == "close":
		return OnServerClosing
	case c.OpenFailed != "":
		return OnServerOpenFailed
	case c.CloseFailed != "":
		return OnServerCloseFailed
	case !c.Confirmed:
		return OnServerUnknown
	case c.Open:
		return OnServerOpen
	}
	return OnServerClosed
}

// Channels returns every channel registered now or decided on, by server
// and id.
func (h *Host) Channels() []ChannelState {
	snaps := h.channels.Snapshot()
	out := make([]ChannelState, len(snaps))
	for i, sn := range snaps {
		c := ChannelState{Server: sn.Server, ID: sn.Channel}
		if l := sn.Listed; l != nil {
			c.Registered, c.Label, c.Type, c.Direction, c.Open = true, l.Label, l.Type, l.Direction, l.Open
			c.Lifecycle, c.Confirmed, c.Pending = l.Lifecycle, l.Confirmed, l.Pending
			c.Lazy, c.Private, c.PublishTarget = l.Lazy, l.Private, l.PublishTarget
			c.OpenFailed, c.CloseFailed, c.FailedAt = l.OpenFailed, l.CloseFailed, l.FailedAt
		}
		if d := sn.Decision; d != nil {
			c.Decision, c.Source, c.DecidedAt = string(d.State), d.Source, d.At
		}
		out[i] = c
	}
	return out
}

// AgentState is a snapshot of one agent.
type AgentState struct {
	Name string
	// Model is its provider and model ("anthropic claude-…", "scripted").
	Model string
	// Turns counts the turns that ended since the host started;
	// TokensIn and TokensOut its model's tokens.
	Turns               int64
	TokensIn, TokensOut int64
	// InTurn: a turn has started and not ended. Then Turn is its
	// number, TurnStartedAt when it started (its turn_start event) and
	// WokenBy what woke the agent for it.
	InTurn        bool
	Turn          int64
	TurnStartedAt time.Time
	WokenBy       []agent.Wake
	// TurnDeadline is how long a turn may run before the host reads as
	// unhealthy (TurnDeadline the function says how it is chosen).
	TurnDeadline time.Duration
	// LastEvent is when its latest transcript event happened.
	LastEvent time.Time
	// Recent are its latest transcript events, oldest first (at most
	// RecentEvents).
	Recent []TranscriptEvent
}

// Agents returns every configured agent, in configuration order, with
// what it has done since the host started. None before Start.
func (h *Host) Agents() []AgentState {
	set := h.running()
	if set == nil {
		return nil
	}
	var out []AgentState
	for _, a := range set.cfg.Agents {
		st := AgentState{Name: a.Name, Model: a.Model.Provider}
		if a.Model.Model != "" {
			st.Model += " " + a.Model.Model
		}
		st.TurnDeadline = TurnDeadline(a.Model)
		h.activity.fill(&st)
		out = append(out, st)
	}
	return out
}

// Backlog is how many inbox messages agent has not consumed yet
// (agent.Runtime.Backlog: counted to agent.MaxBacklog; more, that there
// may be more); 0 when it doesn't run or the store can't say within ctx.
// It reads the store, so it is asked apart from Agents, which /healthz
// reads at every probe: only the status page's agents want it.
func (h *Host) Backlog(ctx context.Context, agent string) (n int, more bool) {
	set := h.running()
	if set == nil {
		return 0, false
	}
	n, more, ok, err := set.rt.Backlog(ctx, agent)
	if !ok || err != nil {
		return 0, false
	}
	return n, more
}

// MinTurnDeadline is the least TurnDeadline gives.
const MinTurnDeadline = 15 * time.Minute

// TurnDeadline is how long one of m's agent's turns may run before the
// status server's /healthz reads it as stuck: the longest its model may
// legitimately take over one call, every attempt at its requestTimeout
// (requestTimeout × retry.attempts, the defaults 10m × 4 = 40m), and no
// less than MinTurnDeadline. A turn makes more than one model call, and
// tool calls between them, so this does not bound a turn; but a turn past
// it has at least spent a whole call's retries' worth of time, which a
// healthy agent does not, and an operator should look. A deadline from
// the config rather than a fixed one keeps an agent on a slow model, given
// a long requestTimeout on purpose, from reading unhealthy.
func TurnDeadline(m config.ModelConfig) time.Duration {
	timeout, attempts := m.RequestTimeout, m.Retry.Attempts
	if timeout <= 0 {
		timeout = config.DefaultModelRequestTimeout
	}
	if attempts <= 0 {
		attempts = config.DefaultRetryAttempts
	}
	return max(MinTurnDeadline, timeout*time.Duration(attempts))
}

// activity keeps what each agent did, from its transcript events.
type activity struct {
	metrics *metrics.Metrics

	mu     sync.Mutex
	agents map[string]*agentActivity
}

type agentActivity struct {
	turns, in, out int64
	inTurn         bool
	turn           int64
	turnStarted    time.Time
	wokenBy        []agent.Wake
	recent         []TranscriptEvent // a ring of RecentEvents, from next
	next           int
}

// record takes one transcript event (agent.Transcript's tap).
func (a *activity) record(ev agent.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.agents == nil {
		a.agents = map[string]*agentActivity{}
	}
	g := a.agents[ev.Agent]
	if g == nil {
		g = &agentActivity{}
		a.agents[ev.Agent] = g
	}
	switch ev.Event {
	case agent.EventTurnStart:
		g.inTurn, g.turn, g.turnStarted, g.wokenBy = true, ev.Turn, ev.At, ev.WokenBy
	case agent.EventTurnEnd:
		g.turns++
		g.inTurn, g.turn, g.turnStarted, g.wokenBy = false, 0, time.Time{}, nil
		a.metrics.Turn(ev.Agent, ev.Reason)
	case agent.EventTreated:
		for _, c := range ev.Treated {
			a.metrics.Treated(ev.Agent, c.Server, string(c.Treat), c.N)
		}
	case agent.EventModel:
		var tok metrics.Tokens
		if u := ev.Usage; u != nil {
			g.in += int64(u.In)
			g.out += int64(u.Out)
			tok = metrics.Tokens{In: u.In, Out: u.Out, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
		}
		a.metrics.ModelCall(ev.Agent, ev.Provider, true, false, attemptTime(ev), tok)
	case agent.EventModelRetry, agent.EventModelFailed:
		a.metrics.ModelCall(ev.Agent, ev.Provider, false, ev.Event == agent.EventModelRetry, attemptTime(ev), metrics.Tokens{})
	}
	if len(g.recent) < RecentEvents {
		g.recent = append(g.recent, ev)
		return
	}
	g.recent[g.next] = ev
	g.next = (g.next + 1) % RecentEvents
}

// attemptTime is how long a model event's attempt took.
func attemptTime(ev agent.Event) time.Duration {
	if ev.Attempt == nil {
		return 0
	}
	return time.Duration(ev.Attempt.Ms) * time.Millisecond
}

// fill copies an agent's activity into st.
func (a *activity) fill(st *AgentState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.agents[st.Name]
	if g == nil {
		return
	}
	st.Turns, st.TokensIn, st.TokensOut, st.InTurn = g.turns, g.in, g.out, g.inTurn
	st.Turn, st.TurnStartedAt, st.WokenBy = g.turn, g.turnStarted, append([]agent.Wake(nil), g.wokenBy...)
	st.Recent = append(append(make([]TranscriptEvent, 0, len(g.recent)), g.recent[g.next:]...), g.recent[:g.next]...)
	st.LastEvent = st.Recent[len(st.Recent)-1].At // the newest; a recorded agent has one
}

// metricsSnapshot is what a metrics scrape reads: every server Servers
// lists, so that one that failed or whose connection ended for good still
// reads mcpl_server_connected 0 (and its state) rather than vanishing.
func (h *Host) metricsSnapshot() metrics.Snapshot {
	type entry struct {
		id         string
		srv        *server
		connecting bool
		rec        *serverRecord
	}
	h.mu.Lock()
	var es []entry
	for _, id := range h.listed {
		es = append(es, entry{id, h.servers[id], h.connecting[id], h.recordCopyLocked(id)})
	}
	h.mu.Unlock()
	snap := metrics.Snapshot{Servers: make([]metrics.Server, len(es))}
	byID := make(map[string]*metrics.Server, len(es))
	for i, e := range es {
		s := metrics.Server{ID: e.id, State: stateName(e.srv, e.connecting, e.rec)}
		if e.rec != nil {
			s.LastErrorAt, s.Reconnects = e.rec.lastErrorAt, e.rec.reconnects
		}
		if e.srv != nil {
			s.Connected, s.Queued, s.Reconnects = e.srv.sess.Connected(), e.srv.sess.Queued(), e.srv.sess.Reconnects()
		}
		snap.Servers[i] = s
		byID[e.id] = &snap.Servers[i]
	}
	for _, l := range h.channels.Channels() {
		if s := byID[l.ServerID]; s != nil {
			s.Channels++
			if l.Open {
				s.Open++
			}
		}
	}
	return snap
}
