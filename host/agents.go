package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/lograte"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/model/provider"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/treat"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// The agents (config agents): Start starts them before it connects the
// servers, so that no inbound message or notice finds them missing. Their
// loop is internal/agent; this file is how they act on the host.

// agentSet is the agents a Start started, and what the servers are
// granted because of them.
type agentSet struct {
	rt     *agent.Runtime
	models map[string]model.Model // by agent name
	cfg    *config.Config
}

// startAgents makes each agent's model and starts the runtime. A model
// that can't be made (a script file missing, say) fails it whole.
func (h *Host) startAgents(cfg *config.Config) (*agentSet, error) {
	if len(cfg.Agents) == 0 {
		return nil, nil
	}
	set := &agentSet{models: map[string]model.Model{}, cfg: cfg}
	var specs []agent.Spec
	for _, a := range cfg.Agents {
		a = a.WithDefaults()
		m, err := provider.New(a.Model, a.MaxTokens, h.lookup)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		set.models[a.Name] = m
		specs = append(specs, agent.Spec{Name: a.Name, Model: m, Provider: a.Model.Provider, System: a.System, Allowed: a.AllowedTools.Allows, MaxTokens: a.MaxTokens, Wake: wakeRules(a.Wake),
			Retry:       agent.RetryPolicy{Attempts: a.Model.Retry.Attempts, MaxElapsed: a.Model.Retry.MaxElapsed},
			Temperature: a.Model.Temperature, TopP: a.Model.TopP})
	}
	rt, err := agent.Start(agent.Options{
		Store:      h.store,
		Env:        agentEnv{h},
		Hooks:      h.agentHooks(),
		Agents:     specs,
		PerChannel: cfg.Conversations == config.ConversationsPerChannel,
		Transcript: h.transcript,
		Logger:     h.log,
	})
	if err != nil {
		return nil, err
	}
	set.rt = rt
	return set, nil
}

// running returns the agents, or nil.
func (h *Host) running() *agentSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agents
}

// agentEnv is the host as agents act on it.
type agentEnv struct{ h *Host }

func (e agentEnv) Tools() []model.Tool {
	var out []model.Tool
	for _, t := range e.h.HostTools() {
		out = append(out, model.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	for _, t := range e.h.Tools() {
		out = append(out, model.Tool{Name: t.Name, Description: t.Def.Description, InputSchema: t.Def.InputSchema})
	}
	return out
}

func (e agentEnv) CallTool(ctx context.Context, who, name string, args json.RawMessage) agent.ToolAnswer {
	res, err := e.h.callTool(ctx, channels.Caller{Agent: who}, name, args)
	if err != nil {
		var te *ToolError
		if errors.As(err, &te) {
			return agent.ToolAnswer{Content: []model.Block{{Type: model.Text, Text: te.Text}}, IsError: true, Outcome: string(te.Outcome)}
		}
		return agent.ToolAnswer{Content: []model.Block{{Type: model.Text, Text: err.Error()}}, IsError: true, Outcome: string(OutcomeRefused)}
	}
	h := e.h
	h.mu.Lock()
	id, _, _ := h.resolveLocked(name)
	h.mu.Unlock()
	return agent.ToolAnswer{Content: agent.Parts(e.View(id, content.ProvenanceToolResult, res.Content)), Outcome: "ok"}
}

func (e agentEnv) Posts(name string) (string, bool) {
	if name == channels.ToolPublish {
		return "", true
	}
	h := e.h
	h.mu.Lock()
	defer h.mu.Unlock()
	id, tool, ok := h.resolveLocked(name)
	srv := h.servers[id]
	return id, ok && srv != nil && slices.Contains(srv.cfg.Channels.SendTools, tool)
}

func (e agentEnv) Channel(server, id string) (channels.ListedChannel, bool) {
	return e.h.channels.Channel(server, id)
}

func (e agentEnv) Connected(server string) time.Time { return e.h.connectedSince(server) }

func (e agentEnv) Publish(ctx context.Context, who, server, channel string, thread *string, text string) channels.PublishOutcome {
	b, _ := json.Marshal(protocol.TextContent{Type: "text", Text: text})
	return e.h.channels.Publish(ctx, server, channel, thread, []json.RawMessage{b}, channels.Caller{Agent: who})
}

func (e agentEnv) Bots(server, channel string) agent.BotRule {
	e.h.mu.Lock()
	srv := e.h.servers[server]
	e.h.mu.Unlock()
	if srv == nil {
		return agent.BotRule{}
	}
	b := srv.cfg.Channels.Bots
	return agent.BotRule{Wake: b.Wake || slices.Contains(b.Channels, channel), Bound: b.MaxReplies}
}

func (e agentEnv) Seen(msgs []agent.Wake) {
	if len(msgs) == 0 {
		return
	}
	seen := make([]channels.SeenMessage, len(msgs))
	for i, m := range msgs {
		seen[i] = channels.SeenMessage{Server: m.Server, Channel: m.Channel, MessageID: m.MessageID}
	}
	e.h.channels.SeenAll(seen)
}

func (e agentEnv) Typing(server, channel string) (func(), bool) {
	return e.h.channels.Typing(server, channel)
}

func (e agentEnv) Stream(server, channel string, thread *string) agent.Stream {
	if s := e.h.channels.Stream(server, channel, thread); s != nil {
		return s
	}
	return nil
}

func (e agentEnv) View(server, provenance string, raw []json.RawMessage) []content.Part {
	lane := content.Lane{Server: server, Provenance: provenance, Refs: e.h.refs}
	return lane.View(raw)
}

// acceptPushEvent keeps a push event in the inbox, durably, before the
// server hears it was accepted, and wakes the agents. One whose content
// shows nothing is refused as sent. A coalesced one (RFC-006) goes
// through the coalescer (coalesce.go).
func (h *Host) acceptPushEvent(ctx context.Context, ev session.PushEvent) (protocol.PushEventResult, error) {
	set := h.running()
	if set == nil {
		return protocol.PushEventResult{Reason: "this host runs no agents to deliver events to"}, nil
	}
	m := store.Message{Server: ev.Server, MessageID: ev.Params.EventID, Kind: store.KindPushEvent, FeatureSet: ev.Params.FeatureSet,
		Tags: content.Close(ev.Params.Tags), Body: ev.Raw, At: h.now().UTC()}
	if c := ev.Params.Coalesce; len(c) > 0 && string(c) != "null" {
		// RFC-006: the coalescer validates it (a retraction may carry no
		// content), places it and decides.
		return h.coalescer.admit(ctx, ev, m)
	}
	if !content.Shows(ev.Params.Payload.Content) {
		return protocol.PushEventResult{}, errEmptyEvent
	}
	h.placePush(ctx, &m, ev.Params.Origin)
	// Through the inbox's one writer, in receipt order with the server's
	// channel messages; its commit wakes the agents. The answer waits
	// for it, here on the connection's dispatch.
	if _, err := h.keep(ctx, ev.Server, ev.Params.EventID, m); err != nil {
		return protocol.PushEventResult{}, err
	}
	return protocol.PushEventResult{Accepted: true}, nil
}

// logEventNotStored is a push event the store failed to keep.
var logEventNotStored = lograte.Kind{
	Msg:     "a push event could not be stored, so it was not accepted; its server was told to send it again later",
	Summary: "%s more push events could not be stored%s in %s, and were refused",
	Level:   slog.LevelError,
	KeyAttr: "server",
}

// errEmptyEvent refuses a push event whose content shows nothing.
var errEmptyEvent = protocol.NewError(protocol.CodeInvalidParams, "Invalid params: the event's content shows nothing an agent could read ("+content.ReasonEmptyContent+")",
	map[string]string{"reason": content.ReasonEmptyContent})

func (e agentEnv) Accepted(server string) []treat.Rule { return e.h.suggested.of(server) }

func (e agentEnv) Coalesced(server, eventID string) agent.Coalesced {
	return e.h.coalescer.Coalesced(server, eventID)
}

func (e agentEnv) Assemble(ctx context.Context, server string, ids []string) []agent.Assembled {
	return e.h.coalescer.Assemble(ctx, server, ids)
}

// wakeRules is an agent's wake configuration as the agent layer takes it.
func wakeRules(w config.Wake) agent.WakeRules {
	out := agent.WakeRules{Debounce: max(w.Debounce, 0), MaxDelay: w.MaxDelay}
	for _, r := range w.Rules {
		out.Rules = append(out.Rules, treat.Rule{TagsAny: r.TagsAny, TagsAll: r.TagsAll, TagsNone: r.TagsNone,
			Servers: r.Servers, Channels: r.Channels, FeatureSets: r.FeatureSets, Source: r.Source, Treat: treat.Treatment(r.Treat)})
	}
	return out
}

// WakeLines describes what wakes an agent configured with w, for
// `mcplhost check`: its debounce, then its rules and the host's defaults,
// in the order they are tried.
func WakeLines(w config.Wake) []string {
	r := wakeRules(w.WithDefaults())
	var out []string
	if r.Debounce > 0 {
		out = append(out, fmt.Sprintf("debounce %s, a turn at most %s after the first message that wakes it", r.Debounce, r.MaxDelay))
	} else {
		out = append(out, "no debounce: a message that wakes the agent starts a turn at once")
	}
	for i, rule := range r.Rules {
		out = append(out, fmt.Sprintf("rule %d: %s", i+1, rule))
	}
	for i, rule := range treat.Defaults {
		out = append(out, fmt.Sprintf("default %d: %s", i+1, rule))
	}
	return out
}
