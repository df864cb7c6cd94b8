package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/google/jsonschema-go/jsonschema"
	"strings"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Tool is a server's tool as callers see it.
type Tool struct {
	// Name is what callers call: "<prefix>--<tool>".
	Name string
	// Server is the id of the server that provides it.
	Server string
	// Def is the server's own definition (its Name unprefixed).
	Def protocol.Tool
}

// Tools lists every registered server's tools, in server order, each
// server's in the order it listed them. Tools the policy disables are left
// out.
func (h *Host) Tools() []Tool {
	h.mu.Lock()
	var srvs []*server
	for _, id := range h.order {
		if s := h.servers[id]; s != nil {
			srvs = append(srvs, s)
		}
	}
	h.mu.Unlock()
	var out []Tool
	for _, s := range srvs {
		s.mu.Lock()
		for _, t := range s.tools {
			out = append(out, Tool{Name: s.cfg.ToolPrefix + "--" + t.Name, Server: s.cfg.ID, Def: t})
		}
		s.mu.Unlock()
	}
	return out
}

// HostTools lists the host's own tools: the channel tools (channel_list,
// channel_open, channel_close, channel_decline, channel_publish) and
// fetch_reference, which CallTool runs by those names.
func (h *Host) HostTools() []protocol.Tool { return append(channels.Tools(), fetchReferenceTool) }

// refreshNow lists a server's tools, following nextCursor, and keeps those
// the policy allows; a server whose tools host policy denies is not asked.
// It reports whether the listing stands (a failed one leaves the last in
// place). A listing that fails leaves the last one in place and is logged.
//
// A server that does not declare the tools capability is asked too,
// within undeclaredToolsWait: several real servers serve tools/list
// without declaring it. One that answers "method not found" (or nothing
// in time) has no tools, and nothing is warned; one that lists tools has
// them, and the log says it served them undeclared.
func (h *Host) refreshNow(ctx context.Context, srv *server, sess *session.Session) bool {
	if !toolsAllowed(srv.cfg) {
		h.log.Debug("tools not listed: host policy denies the server's tools", "server", srv.cfg.ID)
		return true
	}
	st := sess.State()
	declared := st.Init.Capabilities.Tools != nil
	wait := srv.cfg.TimeoutFor(protocol.MethodToolsList)
	if !declared && (wait <= 0 || wait > undeclaredToolsWait) {
		wait = undeclaredToolsWait
	}
	tools, err := sess.ListTools(ctx, wire.WithTimeout(wait))
	var stopped *session.ListingStoppedError
	switch {
	case !declared && err != nil:
		h.log.Debug("tools not listed: the server does not advertise tools, and tools/list did not list any", "server", srv.cfg.ID, "error", err.Error())
		return true
	case !declared && len(tools) > 0:
		h.log.Info("the server serves tools/list without declaring the tools capability; its tools are listed", "server", srv.cfg.ID, "listed", len(tools))
	}
	switch {
	case errors.As(err, &stopped):
		h.log.Warn("tools/list would not end; keeping what was listed", "server", srv.cfg.ID, "reason", stopped.Reason)
	case err != nil:
		h.log.Warn("listing tools failed; the last listing stands", "server", srv.cfg.ID, "error", err.Error())
		return false
	}
	allowed := tools[:0]
	for _, t := range tools {
		if srv.cfg.Tools.Allows(t.Name) {
			allowed = append(allowed, t)
		}
	}
	var outputs map[string]*jsonschema.Resolved
	if structured(st.Version) {
		outputs = outputSchemas(h.log, srv.cfg.ID, allowed)
	}
	srv.mu.Lock()
	srv.tools, srv.outputs = allowed, outputs
	srv.mu.Unlock()
	h.log.Debug("tools listed", "server", srv.cfg.ID, "listed", len(tools), "allowed", len(allowed))
	return true
}

// undeclaredToolsWait bounds the tools/list asked of a server that does
// not declare tools: one that doesn't know the method may never answer.
const undeclaredToolsWait = 5 * time.Second

// refreshLater lists a server's tools in the background, coalesced: at most
// one listing runs and one waits, however many are asked for.
func (h *Host) refreshLater(srv *server, sess *session.Session) {
	if srv.refresh.request() {
		h.refreshLoop(srv, sess)
	}
}

// refreshLoop runs listings in the background for as long as they are
// asked for. The caller holds the refresher's running mark.
func (h *Host) refreshLoop(srv *server, sess *session.Session) {
	started := h.goBackground(func() {
		for {
			h.refreshNow(h.ctx, srv, sess)
			if !srv.refresh.again() {
				return
			}
		}
	})
	if !started {
		srv.refresh.stop()
	}
}

// refresher coalesces tool refreshes.
type refresher struct {
	mu      sync.Mutex
	running bool
	waiting bool
}

// request asks for a refresh; it reports whether the caller must start
// one (none is running).
func (r *refresher) request() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		r.waiting = true
		return false
	}
	r.running = true
	return true
}

// again is called when a refresh ends: it reports whether another was
// asked for meanwhile (and so must run), else marks none running.
func (r *refresher) again() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting {
		r.waiting = false
		return true
	}
	r.running = false
	return false
}

// stop marks no refresh running or waiting: one that was to start did not
// (the host is closed).
func (r *refresher) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running, r.waiting = false, false
}

// CallTool calls a tool by the name callers see ("<prefix>--<tool>") with
// JSON arguments. It is the one path every caller takes. A refusal, a
// failed request and an error result are each a *ToolError whose text says
// what happened, whether anything ran, and what works from there.
func (h *Host) CallTool(ctx context.Context, name string, args json.RawMessage) (protocol.CallToolResult, error) {
	return h.callTool(ctx, channels.Caller{}, name, args)
}

// callTool is CallTool as who: an agent's call names it, so that what the
// channel layer does for it (a send tool's open, its notices) is the
// agent's.
func (h *Host) callTool(ctx context.Context, who channels.Caller, name string, args json.RawMessage) (protocol.CallToolResult, error) {
	switch {
	case channels.IsTool(name):
		return h.callChannelTool(ctx, who, name, args)
	case name == ToolFetchReference:
		return h.callFetchReference(ctx, args)
	}
	h.mu.Lock()
	id, tool, ok := h.resolveLocked(name)
	connecting := h.connecting[id]
	srv := h.servers[id]
	closed := h.closed
	h.mu.Unlock()
	refuse := func(text string, err error) (protocol.CallToolResult, error) {
		return protocol.CallToolResult{}, &ToolError{Text: text, Outcome: OutcomeRefused, Server: id, Err: err}
	}
	switch {
	case !ok:
		return refuse(textNoSuchTool(name), nil)
	case connecting:
		return refuse(textServerConnecting(id, name), &ServerError{ID: id, Err: ErrConnectInFlight})
	case srv == nil && closed:
		return refuse(textServerGone(id, name), ErrHostClosed)
	case srv == nil:
		return refuse(textServerGone(id, name), &ServerError{ID: id, Err: ErrNotConnected})
	case !toolsAllowed(srv.cfg) || !srv.cfg.Tools.Allows(tool):
		h.log.Info("tool call refused by host policy", "server", id, "tool", tool)
		return refuse(textToolDenied(id, name), nil)
	}
	if !json.Valid(args) && len(bytes.TrimSpace(args)) > 0 {
		return refuse(textArgsNotJSON(name), nil)
	}
	args, kind := protocol.ToolArguments(args)
	if kind != "" {
		return refuse(textArgsNotObject(name, kind), nil)
	}
	var res protocol.CallToolResult
	token, done := h.startCall(srv, tool)
	err := srv.sess.Call(ctx, protocol.MethodToolsCall, withProgressToken(protocol.CallToolParams{Name: tool, Arguments: args}, token), &res,
		wire.WithTimeout(srv.cfg.TimeoutFor(protocol.MethodToolsCall)))
	done()
	if err != nil {
		return protocol.CallToolResult{}, requestFailed(id, err)
	}
	if res.IsError {
		text := res.Text()
		if strings.TrimSpace(text) == "" {
			text = textToolErrorNoWords(id, name)
		}
		return res, &ToolError{Text: text, Outcome: OutcomeToolError, Server: id, Result: &res}
	}
	srv.mu.Lock()
	schema := srv.outputs[tool]
	srv.mu.Unlock()
	if why := checkStructured(h.log, id, tool, schema, &res); why != "" {
		h.log.Warn("a tool's structured result breaks the outputSchema it declares; the agent is told, and the result is not used",
			"server", id, "tool", tool, "problem", wire.OneLine(why, 500))
		return protocol.CallToolResult{}, &ToolError{Text: textOutputSchemaBroken(id, name), Outcome: OutcomeToolError, Server: id}
	}
	if schema != nil {
		structuredAsText(&res)
	}
	// A send tool that posted into a closed channel opens it.
	who.Tool = name
	h.channels.AfterToolCall(id, tool, args, res, who)
	return res, nil
}

// callChannelTool runs a channel tool as who (the zero Caller is the
// primary agent). A failure is a *ToolError with OutcomeToolError, its
// text the tool's.
func (h *Host) callChannelTool(ctx context.Context, who channels.Caller, name string, args json.RawMessage) (protocol.CallToolResult, error) {
	if !json.Valid(args) && len(bytes.TrimSpace(args)) > 0 {
		return protocol.CallToolResult{}, &ToolError{Text: textArgsNotJSON(name), Outcome: OutcomeRefused}
	}
	args, kind := protocol.ToolArguments(args)
	if kind != "" {
		return protocol.CallToolResult{}, &ToolError{Text: textArgsNotObject(name, kind), Outcome: OutcomeRefused}
	}
	res := h.channels.CallTool(ctx, name, args, who)
	if res.IsError {
		return res, &ToolError{Text: res.Text(), Outcome: OutcomeToolError, Result: &res}
	}
	return res, nil
}

// resolveLocked finds the server whose prefix a tool name carries: among
// the servers registered or connecting, whose prefixes never meet, so at
// most one matches; failing that, among those gone.
func (h *Host) resolveLocked(name string) (id, tool string, ok bool) {
	if id, tool, ok := match(h.prefixes, name); ok {
		return id, tool, true
	}
	return match(h.gone, name)
}

// match finds the id whose prefix name carries; where several do (gone
// prefixes may meet), the first in id order. It runs on every tool call, so
// it neither sorts nor allocates.
func match(prefixes map[string]string, name string) (id, tool string, ok bool) {
	for cand, p := range prefixes {
		n := len(p) + len("--")
		if len(name) > n && strings.HasPrefix(name, p) && name[len(p):n] == "--" && (!ok || cand < id) {
			id, tool, ok = cand, name[n:], true
		}
	}
	return id, tool, ok
}
