package channels

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// The channel tools an agent calls (anchor-host.md §3.7): channel_list,
// channel_open, channel_close, channel_decline and channel_publish. Their
// failures are results with isError set, whose text is what the agent
// reads; a refusal that is not an error (a machine close of an explicit
// open) is a plain result naming it.

// Tool names.
const (
	ToolList    = "channel_list"
	ToolOpen    = "channel_open"
	ToolClose   = "channel_close"
	ToolDecline = "channel_decline"
	ToolPublish = "channel_publish"
)

// IsTool reports whether name is one of the channel tools.
func IsTool(name string) bool {
	switch name {
	case ToolList, ToolOpen, ToolClose, ToolDecline, ToolPublish:
		return true
	}
	return false
}

// Tools returns the channel tools' definitions.
func Tools() []protocol.Tool {
	return []protocol.Tool{
		{Name: ToolList, Description: "Lists the channels the connected servers have registered: id, type, label, direction, whether it is open, what is decided for it, and its server.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
		{Name: ToolOpen, Description: "Opens a channel, so its traffic reaches you; your decision sticks across restarts. backscroll asks for up to that many recent messages.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"channelId":{"type":"string"},"serverId":{"type":"string"},"backscroll":{"type":"number","minimum":0,"maximum":500},"beforeMessageId":{"type":"string"}},"required":["channelId"]}`)},
		{Name: ToolClose, Description: "Closes a channel, so its traffic stops reaching you; your decision sticks: neither policy nor a later send silently reopens it.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"channelId":{"type":"string"},"serverId":{"type":"string"}},"required":["channelId"]}`)},
		{Name: ToolDecline, Description: "Stays out of a closed channel that invited you (a message addressed you there), optionally acknowledging the message.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"channelId":{"type":"string"},"serverId":{"type":"string"},"messageId":{"type":"string"},"acknowledge":{"type":"string"}},"required":["channelId","messageId"]}`)},
		{Name: ToolPublish, Description: "Posts text into a channel (opening it if it is closed). threadId names a thread, or null the channel root, where the channel declares it can place posts.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"channelId":{"type":"string"},"serverId":{"type":"string"},"threadId":{"type":["string","null"]},"text":{"type":"string"},"content":{"type":"array"}}}`)},
	}
}

// Caller is who calls a channel tool.
type Caller struct {
	// Agent names the calling agent ("" for the primary).
	Agent string
	// Tool is the send tool's name as the agent called it (with its
	// server's prefix), for the notices about it; "" names it as its
	// server does.
	Tool string
}

// CallTool runs a channel tool with JSON arguments (an object).
func (r *Registry) CallTool(ctx context.Context, name string, args json.RawMessage, caller Caller) protocol.CallToolResult {
	var a map[string]json.RawMessage
	if len(args) > 0 && json.Unmarshal(args, &a) != nil {
		return fail("The arguments must be a JSON object. Nothing was done.")
	}
	switch name {
	case ToolList:
		return r.toolList()
	case ToolOpen:
		return r.toolOpen(ctx, a)
	case ToolClose:
		return r.toolClose(ctx, a)
	case ToolDecline:
		return r.toolDecline(ctx, a)
	case ToolPublish:
		return r.toolPublish(ctx, a, caller)
	}
	return fail("No such channel tool: " + name)
}

func fail(text string) protocol.CallToolResult { return protocol.TextResult(text, true) }

func ok(v any) protocol.CallToolResult {
	b, _ := json.Marshal(v)
	return protocol.TextResult(string(b), false)
}

// str reads a string argument: ok is false when present and not a string.
func str(a map[string]json.RawMessage, key string) (s string, present, ok bool) {
	v, present := a[key]
	if !present || string(v) == "null" {
		return "", false, true
	}
	ok = json.Unmarshal(v, &s) == nil
	return s, true, ok
}

// ListedChannel is one entry of channel_list.
type ListedChannel struct {
	ID        string `json:"id"`
	Type      string `json:"type,omitempty"`
	Label     string `json:"label,omitempty"`
	Direction string `json:"direction,omitempty"`
	Open      bool   `json:"open"`
	Desired   string `json:"desired"`
	ServerID  string `json:"serverId"`
	// Lifecycle says its server takes channels/open and channels/close
	// (it is granted channels.lifecycle); Channel sets it, channel_list
	// doesn't show it.
	Lifecycle bool `json:"-"`
}

// Channels returns the registered channels, as channel_list shows them.
func (r *Registry) Channels() []ListedChannel {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []ListedChannel{}
	for k, c := range r.chans {
		if c.entry != nil {
			out = append(out, c.listed(k.Server))
		}
	}
	slices.SortFunc(out, func(a, b ListedChannel) int {
		return cmp.Or(cmp.Compare(a.ServerID, b.ServerID), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// listed is a registered channel as channel_list shows it; r.mu is held.
func (c *chanState) listed(server string) ListedChannel {
	desired := "unknown"
	if c.decision != nil {
		desired = string(c.decision.State)
	}
	d := c.entry.desc
	return ListedChannel{ID: d.ID, Type: d.Type, Label: d.Label, Direction: d.Direction, Open: c.confirmed && c.open, Desired: desired, ServerID: server}
}

func (r *Registry) toolList() protocol.CallToolResult { return ok(r.Channels()) }

// resolve finds the registered channel an agent names; missing is the
// text for a channelId that names none.
func (r *Registry) resolve(a map[string]json.RawMessage, missing string) (*chanState, string) {
	id, present, good := str(a, "channelId")
	if !present || !good || id == "" {
		return nil, missing
	}
	server, _, good := str(a, "serverId")
	if !good {
		return nil, textBadServerID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if server != "" {
		c := r.chans[Key{server, id}]
		if c == nil || c.entry == nil {
			return nil, textChannelNotFoundOn(id, server)
		}
		return c, ""
	}
	var found *chanState
	for k, c := range r.chans {
		if k.Channel != id || c.entry == nil {
			continue
		}
		if found != nil {
			return nil, textAmbiguous(id)
		}
		found = c
	}
	if found == nil {
		return nil, textChannelNotFound(id)
	}
	return found, ""
}

// history reads channel_open's backscroll request.
func history(a map[string]json.RawMessage) json.RawMessage {
	var n float64
	if v, ok := a["backscroll"]; !ok || json.Unmarshal(v, &n) != nil || math.IsNaN(n) || n < 1 {
		return nil
	}
	h := map[string]any{"limit": int(math.Min(math.Floor(n), 500))}
	if before, present, good := str(a, "beforeMessageId"); present && good && before != "" {
		h["beforeMessageId"] = before
	}
	b, _ := json.Marshal(h)
	return b
}

func (r *Registry) toolOpen(ctx context.Context, a map[string]json.RawMessage) protocol.CallToolResult {
	c, why := r.resolve(a, textNeedChannelID)
	if c == nil {
		return fail(why)
	}
	hist := history(a)
	c.decide.Lock()
	cur := r.decisionOf(c)
	r.mu.Lock()
	already := wantOpen(cur) && c.confirmed && c.open && !c.busyLocked() && hist == nil
	r.mu.Unlock()
	_, _, err := r.decideLocked(c, store.Open, SourceAgentTool)
	c.decide.Unlock()
	switch {
	case err != nil && already:
		return fail(textAlreadyOpenUnrecorded(c.key.Channel))
	case err != nil:
		return fail(textOpenUnrecorded(c.key.Channel))
	case already:
		return ok(map[string]string{"channelId": c.key.Channel, "status": "already open"})
	}
	ch := make(chan opResult, 1)
	r.mu.Lock()
	r.enqueueLocked(c, &op{gen: c.removals, history: hist, waiters: []chan opResult{ch}})
	r.mu.Unlock()
	res, werr := wait(ctx, ch)
	if werr != nil {
		res.err = werr
	}
	var le *lifecycleError
	switch {
	case errors.As(res.err, &le) && le.kind == kindNoGrant:
		return fail(textOpenNoLifecycle(c.key.Server))
	case res.err != nil:
		// Its registration gone too, the decision stays: the server's
		// next registration of the channel carries it out.
		return fail(textOpenFailed(r.describe(c.key.Server, res.err)))
	case !res.open:
		return fail(textOpenSuperseded)
	}
	out := map[string]any{"channelId": c.key.Channel, "status": "opened"}
	var ans struct {
		History json.RawMessage `json:"history"`
	}
	if json.Unmarshal(res.answer, &ans) == nil && len(ans.History) > 0 && string(ans.History) != "null" {
		out["history"] = ans.History
	}
	return ok(out)
}

func (r *Registry) toolClose(ctx context.Context, a map[string]json.RawMessage) protocol.CallToolResult {
	c, why := r.resolve(a, textNeedChannelID)
	if c == nil {
		return fail(why)
	}
	return r.closeChannel(ctx, c, SourceAgentTool, false)
}

// MachineClose closes a channel for a module of the host (source
// SourceSubscriptionGC or SourceHousekeeping). A channel the agent opened
// with channel_open is refused unless override is set.
func (r *Registry) MachineClose(ctx context.Context, server, channel, source string, override bool) protocol.CallToolResult {
	r.mu.Lock()
	c := r.chans[Key{server, channel}]
	r.mu.Unlock()
	if c == nil {
		return fail(textChannelNotFoundOn(channel, server))
	}
	return r.closeChannel(ctx, c, source, override)
}

// closeChannel records a close and carries it out. The source check comes
// before the "already closed" answer, which records the decision too.
func (r *Registry) closeChannel(ctx context.Context, c *chanState, source string, override bool) protocol.CallToolResult {
	c.decide.Lock()
	cur := r.decisionOf(c)
	switch closeRefusal(cur, source, override) {
	case refusalSource:
		c.decide.Unlock()
		return fail(textUnknownMachineSource(source))
	case refusalExplicitOpen:
		c.decide.Unlock()
		b, _ := json.Marshal(map[string]string{"refusal": "explicit-open", "channelId": c.key.Channel})
		res := protocol.TextResult(textExplicitOpen(c.key.Channel, source), false)
		res.StructuredContent = b
		return res
	}
	r.mu.Lock()
	already := !wantOpen(cur) && c.confirmed && !c.open && !c.busyLocked()
	r.mu.Unlock()
	_, _, err := r.decideLocked(c, store.Closed, source)
	c.decide.Unlock()
	switch {
	case err != nil && already:
		return fail(textAlreadyClosedUnrecorded(c.key.Channel))
	case err != nil:
		return fail(textCloseUnrecorded(c.key.Channel))
	case already:
		return ok(map[string]string{"channelId": c.key.Channel, "status": "already closed"})
	}
	res, werr := wait(ctx, r.apply(c, true))
	if werr != nil {
		res.err = werr
	}
	var le *lifecycleError
	switch {
	case errors.As(res.err, &le) && le.kind == kindNoGrant:
		return fail(textCloseNoLifecycle(c.key.Server))
	case errors.As(res.err, &le) && (le.kind == kindGone || le.kind == kindNoServer):
		return fail(le.text)
	case res.err != nil:
		return fail(textCloseFailed(r.describe(c.key.Server, res.err)))
	case res.open:
		return fail(textCloseSuperseded)
	}
	return ok(map[string]string{"channelId": c.key.Channel, "status": "closed"})
}

func (r *Registry) toolDecline(ctx context.Context, a map[string]json.RawMessage) protocol.CallToolResult {
	c, why := r.resolve(a, textNeedChannelID)
	if c == nil {
		return fail(why)
	}
	msgID, _, good := str(a, "messageId")
	if !good || msgID == "" {
		return fail("messageId must name the message that invited you. Nothing was done.")
	}
	ack, _, _ := str(a, "acknowledge")
	c.decide.Lock()
	cur := r.decisionOf(c)
	r.mu.Lock()
	isOpen := wantOpen(cur) || (c.confirmed && c.open)
	r.mu.Unlock()
	if isOpen {
		c.decide.Unlock()
		return fail(textAlreadyOpenDecline(c.key.Channel))
	}
	if writes(cur, store.Closed, SourceInvitationDeclined) {
		rec := store.Record{Kind: store.KindDecision, Server: c.key.Server, Channel: c.key.Channel, State: store.Closed, Source: SourceInvitationDeclined}
		if _, err := r.record(rec); err != nil {
			c.decide.Unlock()
			return fail(textDeclineUnrecorded(c.key.Channel))
		}
	}
	c.decide.Unlock()
	if r.directsLifecycle(c.key.Server) {
		r.apply(c, false)
	}
	out := map[string]any{"channelId": c.key.Channel, "status": "remained closed", "acknowledged": false}
	sent := ""
	if ack != "" {
		res, why := r.acknowledge(ctx, c.key, msgID, ack)
		out["acknowledged"] = res.Acknowledged
		switch {
		case why != "":
			out["acknowledgmentError"] = why
		case res.Acknowledged:
			sent = cmp.Or(res.Representation, ack)
			if res.Representation != "" {
				out["representation"] = res.Representation
			}
		}
	}
	// The decline itself, with the acknowledgment that went out: the
	// decision above is what counts, so a failure here is only logged.
	if _, err := r.record(store.Record{Kind: store.KindDeclined, Server: c.key.Server, Channel: c.key.Channel, MessageID: msgID, Acknowledgment: sent}); err != nil {
		r.log.Error("a declined invitation could not be recorded (the channel's closed decision is)", "server", c.key.Server, "channel", c.key.Channel, "error", err.Error())
	}
	return ok(out)
}

// Seen tells the channel's server that an agent has a message that
// addressed it (a turn picked it up), as the server's
// channels.acknowledgeSeen asks: channels/acknowledge with intent "seen",
// in the background. Nothing is sent without that setting or the
// channels.acknowledge grant; a failure is logged.
func (r *Registry) Seen(server, channel, messageID string) {
	srv := r.server(server)
	if srv == nil || srv.cfg.AcknowledgeSeen == "" || !srv.conn.Has("channels.acknowledge") {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		var res protocol.ChannelsAcknowledgeResult
		p := protocol.ChannelsAcknowledgeParams{ChannelID: channel, MessageID: messageID, Intent: protocol.AckSeen, Value: srv.cfg.AcknowledgeSeen}
		err := srv.conn.Call(r.ctx, protocol.MethodChannelsAcknowledge, p, &res, srv.cfg.Timeout)
		switch {
		case err != nil:
			r.log.Warn("channels/acknowledge (seen) failed", "server", server, "channel", channel, "message", messageID, "error", err.Error())
		case !res.Acknowledged:
			r.log.Info("channels/acknowledge (seen) not acknowledged", "server", server, "channel", channel, "message", messageID, "reason", res.Reason)
		}
	}()
}

// acknowledge sends channels/acknowledge; why is what the agent reads when
// it wasn't acknowledged ("" when it was): the anchor host's texts.
func (r *Registry) acknowledge(ctx context.Context, k Key, messageID, value string) (protocol.ChannelsAcknowledgeResult, string) {
	srv := r.server(k.Server)
	switch {
	case srv == nil:
		return protocol.ChannelsAcknowledgeResult{}, textServerNotFound(k.Server)
	case !srv.conn.Has("channels.acknowledge"):
		return protocol.ChannelsAcknowledgeResult{}, textNoAcknowledge(k.Server)
	}
	var res protocol.ChannelsAcknowledgeResult
	err := srv.conn.Call(ctx, protocol.MethodChannelsAcknowledge, protocol.ChannelsAcknowledgeParams{ChannelID: k.Channel, MessageID: messageID, Intent: protocol.AckSeenNotOpening, Value: value}, &res, srv.cfg.Timeout)
	switch {
	case err != nil:
		r.log.Warn("channels/acknowledge failed", "server", k.Server, "channel", k.Channel, "error", err.Error())
		return protocol.ChannelsAcknowledgeResult{}, textAckNotPosted
	case !res.Acknowledged && res.Reason != "":
		return res, res.Reason
	case !res.Acknowledged:
		return res, textAckNotPosted
	}
	return res, ""
}

// Channel returns one channel as channel_list shows it; ok is false when
// the registry knows nothing of it (no registration, no decision).
func (r *Registry) Channel(server, id string) (ch ListedChannel, ok bool) {
	r.mu.Lock()
	c := r.chans[Key{server, id}]
	if c == nil || (c.entry == nil && c.decision == nil) {
		r.mu.Unlock()
		return ListedChannel{}, false
	}
	ch = ListedChannel{ID: id, ServerID: server, Desired: "unknown", Open: c.entry != nil && c.confirmed && c.open}
	if c.decision != nil {
		ch.Desired = string(c.decision.State)
	}
	if c.entry != nil {
		d := c.entry.desc
		ch.Type, ch.Label, ch.Direction = d.Type, d.Label, d.Direction
	}
	r.mu.Unlock()
	ch.Lifecycle = r.directsLifecycle(server)
	return ch, true
}
