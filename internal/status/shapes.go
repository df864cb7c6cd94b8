package status

import (
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/buildinfo"
)

// The JSON the API serves (docs/status.md). Lists are never null.

// ServerView is one entry of /api/servers.
type ServerView struct {
	ID         string `json:"id"`
	ToolPrefix string `json:"toolPrefix"`
	// State is "connecting", "connected", "reconnecting",
	// "disconnected" or "failed" (host.ServerStates); Since when it was
	// entered. LastError is the latest failure seen (a connect or dial
	// that failed, a lost connection), LastErrorAt when; they stay once
	// it is connected again.
	State       string    `json:"state"`
	Since       time.Time `json:"since,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// NextAttempt is, while reconnecting, when the next redial is due.
	NextAttempt time.Time `json:"nextAttempt,omitzero"`
	Name        string    `json:"name,omitempty"` // its serverInfo
	Version     string    `json:"version,omitempty"`
	// Protocol is the MCP revision the connection speaks, while there is
	// one; Stateless says it is 2026-07-28's, where MCPL is off.
	Protocol  string `json:"protocolVersion,omitempty"`
	Stateless bool   `json:"stateless,omitempty"`
	MCPL      string `json:"mcpl,omitempty"`   // the MCPL version it advertised
	Policy    string `json:"policy,omitempty"` // how the policy exchange ended
	Reason    string `json:"reason,omitempty"` // a refusal's reason, or why it went unanswered
	// Calls are its tool calls in flight, oldest first, with the progress
	// the server reported for each.
	Calls       []CallView   `json:"calls"`
	Effective   []string     `json:"effective"` // the capabilities granted now
	Denied      []Denied     `json:"denied"`
	FeatureSets []FeatureSet `json:"featureSets"`
}

// CallView is a tool call in flight: the tool, since when, and the last
// progress the server reported (Progress and Total 0, Message "" and
// Updated absent when none came).
type CallView struct {
	Tool     string    `json:"tool"`
	Started  time.Time `json:"started"`
	Progress float64   `json:"progress,omitempty"`
	Total    float64   `json:"total,omitempty"`
	Message  string    `json:"message,omitempty"`
	Updated  time.Time `json:"updated,omitzero"`
}

// Denied is an advertised capability not granted, and why.
type Denied struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// FeatureSet is one feature set's state.
type FeatureSet struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

func servers(in []host.ServerState) []ServerView {
	out := []ServerView{}
	for _, s := range in {
		v := ServerView{ID: s.ID, ToolPrefix: s.ToolPrefix, State: serverState(s), Since: utc(s.Since), LastError: s.LastError, LastErrorAt: utc(s.LastErrorAt),
			NextAttempt: utc(s.NextAttempt), Protocol: s.ProtocolVersion, Stateless: s.Stateless,
			Policy: string(s.Policy), Reason: s.PolicyReason,
			Effective: append([]string{}, s.Grant.Effective...), Denied: []Denied{}, FeatureSets: []FeatureSet{}, Calls: []CallView{}}
		for _, c := range s.Calls {
			v.Calls = append(v.Calls, CallView{Tool: c.Tool, Started: utc(c.Started), Progress: c.Progress, Total: c.Total, Message: c.Message, Updated: utc(c.Updated)})
		}
		if s.ServerInfo != nil {
			v.Name, v.Version = s.ServerInfo.Name, s.ServerInfo.Version
		}
		if s.Advertisement != nil {
			v.MCPL = s.Advertisement.Version
		}
		for _, d := range s.Grant.Denied {
			v.Denied = append(v.Denied, Denied{Path: d.Path, Reason: string(d.Reason)})
		}
		for _, f := range s.Grant.FeatureSets {
			v.FeatureSets = append(v.FeatureSets, FeatureSet{Name: f.Name, State: string(f.State), Reason: string(f.Reason)})
		}
		out = append(out, v)
	}
	return out
}

func serverState(s host.ServerState) string {
	if s.State != "" {
		return s.State
	}
	switch {
	case s.Connecting:
		return "connecting"
	case s.Connected:
		return "connected"
	case s.Reconnecting:
		return "reconnecting"
	}
	return "disconnected"
}

// ChannelView is one entry of /api/channels: two things, never merged,
// the host's durable decision (Decision, Source, DecidedAt) and what is
// known of the channel on its server (OnServer, with the failure that
// made it "open failed" or "close failed").
type ChannelView struct {
	Server     string `json:"server"`
	ID         string `json:"id"`
	Label      string `json:"label,omitempty"`
	Type       string `json:"type,omitempty"`
	Direction  string `json:"direction,omitempty"`
	Registered bool   `json:"registered"`
	// Open: the server's last answer confirmed it open (OnServer "open").
	Open bool `json:"open"`
	// Decision is "open", "closed", or "" when none was made.
	Decision  string    `json:"decision"`
	Source    string    `json:"source,omitempty"`
	DecidedAt time.Time `json:"decidedAt,omitzero"`
	// OnServer is host.ChannelState.OnServer: "open", "closed",
	// "opening", "closing", "open failed", "close failed", "unknown" or
	// "not registered". Lifecycle says the host directs the channel's
	// lifecycle (without it the server's state is "unknown": the server
	// keeps it).
	OnServer  string `json:"onServer"`
	Lifecycle bool   `json:"lifecycle"`
	// OpenFailed or CloseFailed is the last channels/open or
	// channels/close of this registration that failed, in the operator's
	// words, until a later one settles; FailedAt when it failed. It stays
	// while a retry is out (OnServer "opening").
	OpenFailed  string    `json:"openFailed,omitempty"`
	CloseFailed string    `json:"closeFailed,omitempty"`
	FailedAt    time.Time `json:"failedAt,omitzero"`
	// Lazy: the host registered it itself, from a push naming it (its
	// server never did); Private: a private channel (a DM);
	// PublishTarget: its RFC-011 publish target ("exact", "root", or "").
	Lazy          bool   `json:"lazy,omitempty"`
	Private       bool   `json:"private,omitempty"`
	PublishTarget string `json:"publishTarget,omitempty"`
}

func channels(in []host.ChannelState) []ChannelView {
	out := []ChannelView{}
	for _, c := range in {
		out = append(out, ChannelView{Server: c.Server, ID: c.ID, Label: c.Label, Type: c.Type, Direction: c.Direction,
			Registered: c.Registered, Open: c.Open, Decision: c.Decision, Source: c.Source, DecidedAt: utc(c.DecidedAt),
			OnServer: c.OnServer(), Lifecycle: c.Lifecycle, OpenFailed: c.OpenFailed, CloseFailed: c.CloseFailed, FailedAt: utc(c.FailedAt),
			Lazy: c.Lazy, Private: c.Private, PublishTarget: c.PublishTarget})
	}
	return out
}

// AgentView is one entry of /api/agents.
type AgentView struct {
	Name      string `json:"name"`
	Model     string `json:"model"`
	Turns     int64  `json:"turns"`
	TokensIn  int64  `json:"tokensIn"`
	TokensOut int64  `json:"tokensOut"`
	InTurn    bool   `json:"inTurn"`
	// While InTurn: Turn is its number, TurnStartedAt when it started,
	// TurnMs how long it has run (by the host's clock, so the page needs
	// no clock of its own), WokenBy what woke the agent for it.
	Turn          int64       `json:"turn,omitempty"`
	TurnStartedAt time.Time   `json:"turnStartedAt,omitzero"`
	TurnMs        int64       `json:"turnMs,omitempty"`
	WokenBy       []host.Wake `json:"wokenBy,omitempty"`
	// TurnDeadlineMs is how long a turn may run before /healthz reads
	// it as stuck (host.TurnDeadline).
	TurnDeadlineMs int64 `json:"turnDeadlineMs,omitempty"`
	// Backlog is how many inbox messages it has not consumed yet, counted
	// to 1,000; BacklogMore, that there may be more.
	Backlog     int                    `json:"backlog"`
	BacklogMore bool                   `json:"backlogMore,omitempty"`
	LastEvent   time.Time              `json:"lastEvent,omitzero"`
	Recent      []host.TranscriptEvent `json:"recent"` // oldest first
}

func agents(in []host.AgentState, recent int, now time.Time) []AgentView {
	out := []AgentView{}
	for _, a := range in {
		v := AgentView{Name: a.Name, Model: a.Model, Turns: a.Turns, TokensIn: a.TokensIn, TokensOut: a.TokensOut, InTurn: a.InTurn,
			TurnDeadlineMs: a.TurnDeadline.Milliseconds(),
			LastEvent:      utc(a.LastEvent), Recent: append([]host.TranscriptEvent{}, a.Recent[max(0, len(a.Recent)-recent):]...)}
		if a.InTurn {
			v.Turn, v.TurnStartedAt, v.WokenBy = a.Turn, utc(a.TurnStartedAt), a.WokenBy
			if !a.TurnStartedAt.IsZero() {
				v.TurnMs = max(0, now.Sub(a.TurnStartedAt).Milliseconds())
			}
		}
		out = append(out, v)
	}
	return out
}

// HostView is /api/host: the build running (buildinfo), when the status
// server started (with the host, in mcplhost run) and for how long,
// whether the host is ready (/readyz) and healthy (/healthz's status).
type HostView struct {
	Version       string    `json:"version"`
	Started       time.Time `json:"started"`
	UptimeSeconds int64     `json:"uptimeSeconds"`
	Ready         bool      `json:"ready"`
	Health        string    `json:"health"`
}

// version is the build running, read once: it can't change while the
// process runs.
var version = sync.OnceValue(func() string { return buildinfo.Get().String() })

func hostView(h Host, started, now time.Time) HostView {
	return HostView{Version: version(), Started: started.UTC(), UptimeSeconds: int64(now.Sub(started).Seconds()),
		Ready: ready(h), Health: health(h, now).Status}
}

// utc is t in UTC, the zero time left zero (so omitzero leaves it out).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
