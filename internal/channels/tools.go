package channels

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/mcpl-go/mcpl/internal/content"
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

// Tools returns the channel tools' definitions. Every property of their
// input schemas has a description, as the agent reads it with the tool,
// and the schemas are ones both providers take as they are (the schema
// package's rules; host/toolschema_test.go checks them).
func Tools() []protocol.Tool {
	channelID := prop{"channelId", "The channel's id, as channel_list shows it.", `{"type":"string"}`}
	serverID := prop{"serverId", "The id of the channel's server, as channel_list shows it. Needed only when channels of more than one server have that id.", `{"type":"string"}`}
	block := objectSchema("One content block, sent to the channel's server as it is: a text block has type text and its text; other MCP content types (image, audio, resource_link, resource) only where the channel's server takes them.", []prop{
		{"type", "The block's type: text, or another MCP content type.", `{"type":"string"}`},
		{"text", "A text block's text.", `{"type":"string"}`},
		{"data", "An image or audio block's data, in base64.", `{"type":"string"}`},
		{"mimeType", "An image or audio block's media type.", `{"type":"string"}`},
	})
	return []protocol.Tool{
		{Name: ToolList, Description: "Lists the channels the connected servers have registered: id, type, label, direction, whether it is open, what is decided for it, and its server.",
			InputSchema: objectSchema("", nil)},
		{Name: ToolOpen, Description: "Opens a channel, so its traffic reaches you; your decision sticks across restarts. backscroll asks for up to that many recent messages.",
			InputSchema: objectSchema("", []prop{channelID, serverID,
				{"backscroll", "How many of the channel's recent messages to ask its server for as it opens, up to 500. Leave it out, or give 0, for none.", `{"type":"number","minimum":0,"maximum":500}`},
				{"beforeMessageId", "With backscroll: ask for the messages before this message, not the newest ones.", `{"type":"string"}`},
			}, "channelId")},
		{Name: ToolClose, Description: "Closes a channel, so its traffic stops reaching you; your decision sticks: neither policy nor a later send silently reopens it.",
			InputSchema: objectSchema("", []prop{channelID, serverID}, "channelId")},
		{Name: ToolDecline, Description: "Stays out of a closed channel that invited you (a message addressed you there), optionally acknowledging the message.",
			InputSchema: objectSchema("", []prop{channelID, serverID,
				{"messageId", "The id of the message that invited you.", `{"type":"string"}`},
				{"acknowledge", "Words to acknowledge the message with, sent to the channel's server, which may post them; the channel stays closed. Leave it out to decline without a word.", `{"type":"string"}`},
			}, "channelId", "messageId")},
		{Name: ToolPublish, Description: "Posts text into a channel (opening it if it is closed). threadId names a thread, or null the channel root, where the channel declares it can place posts.",
			InputSchema: objectSchema("", []prop{
				{"channelId", "The channel to post in: its id, as channel_list shows it. Nothing is sent without it, except in a conversation bound to one channel, which posts there.", `{"type":"string"}`},
				serverID,
				{"threadId", "Where in the channel to post: a thread's id, or null for the channel root. Only where channel_list shows the channel's publishTarget: exact takes either, root takes only null. Leave it out to post where the server puts posts.", `{"type":["string","null"]}`},
				{"text", "The text to post. Used when content is left out or empty.", `{"type":"string"}`},
				{"content", "Content blocks to post instead of text, sent to the channel's server as they are.", `{"type":"array","items":` + string(block) + `}`},
			})},
	}
}

// prop is one property of a tool's input schema: its name, its
// description and the rest of its schema (JSON).
type prop struct{ name, desc, def string }

// objectSchema is an object schema whose properties are props, in
// order, each with its description; desc, when not "", describes the
// object itself. The definitions are this package's: a malformed one is
// a bug, and panics.
func objectSchema(desc string, props []prop, required ...string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object",`)
	if desc != "" {
		d, _ := json.Marshal(desc)
		b.WriteString(`"description":` + string(d) + `,`)
	}
	b.WriteString(`"properties":{`)
	for i, p := range props {
		var def map[string]json.RawMessage
		if err := json.Unmarshal([]byte(p.def), &def); err != nil {
			panic("channels: the schema of " + p.name + ": " + err.Error())
		}
		def["description"], _ = json.Marshal(p.desc)
		name, _ := json.Marshal(p.name)
		v, _ := json.Marshal(def)
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	if len(required) > 0 {
		r, _ := json.Marshal(required)
		b.WriteString(`,"required":` + string(r))
	}
	b.WriteByte('}')
	return b.Bytes()
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
	// A server's strings in it (labels, ids) can't reorder or hide
	// what an agent reads.
	return protocol.TextResult(content.JSONText(b), false)
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
	// PublishTarget is the descriptor's capabilities.publish.target
	// (RFC-011): "exact" (a post lands in the thread asked, or at the
	// root), "root" (no threads), or "" (no guarantee).
	PublishTarget string `json:"publishTarget,omitempty"`
	// Private says the channel itself is private (a DM): its
	// descriptor's tags say chat:dm or chat:private, or its metadata
	// is_im, is_mpim or isDM. A reply there reaches only who is in it.
	Private bool `json:"private,omitempty"`
	// Lazy says this host registered it itself, from a push that named
	// it (lazy.go); its server never registered it.
	Lazy bool `json:"lazy,omitempty"`
	// Lifting says its registration's initial decision (the descriptor's
	// initiallyOpen, the subscription policy) is being recorded: until
	// it is, the channel reads as undecided, so a message read meanwhile
	// waits for it (internal/agent's gate). channel_list doesn't show it.
	Lifting bool `json:"-"`
	// Lifecycle says its server takes channels/open and channels/close
	// (it is granted channels.lifecycle); Registered that its server has
	// it registered now. Channel sets them; channel_list doesn't show
	// them.
	Lifecycle  bool `json:"-"`
	Registered bool `json:"-"`
	// OpenFailed or CloseFailed is, when the last channels/open or
	// channels/close of the current registration failed, the operator's
	// words for why (at most one is set; neither once a later request
	// settled), and FailedAt when; Pending is "open" or "close" while
	// such a request is out; Confirmed says the last request settled
	// (Open is then what it settled to). Snapshot and Channels set them;
	// channel_list doesn't show them: they are operator detail
	// (failure.go).
	OpenFailed  string    `json:"-"`
	CloseFailed string    `json:"-"`
	FailedAt    time.Time `json:"-"`
	Pending     string    `json:"-"`
	Confirmed   bool      `json:"-"`
}

// Channels returns the registered channels, as channel_list shows them.
func (r *Registry) Channels() []ListedChannel {
	r.viewMu.RLock()
	out := []ListedChannel{}
	for k, v := range r.views {
		if v.registered {
			l := v.listed(k.Server)
			v.serverSide(&l)
			out = append(out, l)
		}
	}
	r.viewMu.RUnlock()
	for i := range out {
		out[i].Lifecycle = r.directsLifecycle(out[i].ServerID)
		if out[i].Desired == "unknown" && r.directsLifecycle(out[i].ServerID) {
			out[i].Desired = string(store.Closed)
		}
	}
	slices.SortFunc(out, func(a, b ListedChannel) int {
		return cmp.Or(cmp.Compare(a.ServerID, b.ServerID), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// listed is a registered channel as channel_list shows it: "unknown" when
// nothing is decided (the caller says "closed" where the host directs the
// server's lifecycle: closed by default).
func (v *view) listed(server string) ListedChannel {
	desired := "unknown"
	if v.decision != nil {
		desired = string(v.decision.State)
	}
	d := v.desc
	return ListedChannel{ID: d.ID, Type: d.Type, Label: d.Label, Direction: d.Direction, Open: v.confirmed && v.open, Desired: desired, ServerID: server,
		PublishTarget: publishTarget(d.Capabilities), Private: privateDesc(d), Lazy: v.lazy, Lifting: v.lifting}
}

// privateDesc reports whether a descriptor says its channel is private:
// its tags (chat:dm, chat:private), or its metadata's is_im, is_mpim or
// isDM (what Slack and Discord connectors send).
func privateDesc(d protocol.ChannelDescriptor) bool {
	if slices.Contains(d.Tags, content.TagDM) || slices.Contains(d.Tags, content.TagPrivate) {
		return true
	}
	var md map[string]any
	if json.Unmarshal(d.Metadata, &md) != nil {
		return false
	}
	for _, k := range []string{"is_im", "is_mpim", "isDM"} {
		if b, _ := md[k].(bool); b {
			return true
		}
	}
	return false
}

func (r *Registry) toolList() protocol.CallToolResult { return ok(r.Channels()) }

// resolve finds the registered channel an agent names: by server and id,
// or by id alone when only one server has it; missing is the text for a
// channelId that names none.
func (r *Registry) resolve(a map[string]json.RawMessage, missing string) (Key, string) {
	id, present, good := str(a, "channelId")
	if !present || !good || id == "" {
		return Key{}, missing
	}
	server, _, good := str(a, "serverId")
	if !good {
		return Key{}, textBadServerID
	}
	r.viewMu.RLock()
	defer r.viewMu.RUnlock()
	if server != "" {
		if v := r.views[Key{server, id}]; v == nil || !v.registered {
			return Key{}, textChannelNotFoundOn(id, server)
		}
		return Key{server, id}, ""
	}
	var found Key
	for k, v := range r.views {
		if k.Channel != id || !v.registered {
			continue
		}
		if found != (Key{}) {
			return Key{}, textAmbiguous(id)
		}
		found = k
	}
	if found == (Key{}) {
		return Key{}, textChannelNotFound(id)
	}
	return found, ""
}

// liveChan is k's state in m while k is registered; missing, else, is the
// text for a channel that went between the caller's look and the step.
func liveChan(m *machine, k Key) (*chanState, string) {
	if c := m.live[k.Server][k.Channel]; c != nil {
		return c, ""
	}
	return nil, textChannelNotFound(k.Channel)
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
	k, why := r.resolve(a, textNeedChannelID)
	if why != "" {
		return fail(why)
	}
	hist := history(a)
	out, err := ask(ctx, r, func(m *machine, reply func(toolOutcome)) {
		c, missing := liveChan(m, k)
		if c == nil {
			reply(toolOutcome{missing: missing})
			return
		}
		m.openTool(c, hist, reply)
	})
	if err != nil {
		out.res.err = err
	}
	var le *lifecycleError
	switch {
	case out.missing != "":
		return fail(out.missing)
	case out.unrecorded && out.already:
		return fail(textAlreadyOpenUnrecorded(k.Channel))
	case out.unrecorded:
		return fail(textOpenUnrecorded(k.Channel))
	case out.already:
		return ok(map[string]string{"channelId": k.Channel, "status": "already open"})
	case errors.As(out.res.err, &le) && le.kind == kindNoGrant:
		return fail(textOpenNoLifecycle(k.Server))
	case out.res.err != nil:
		// Its registration gone too, the decision stays: the server's
		// next registration of the channel carries it out.
		return fail(textOpenFailed(r.describe(k.Server, out.res.err)))
	case !out.res.open:
		return fail(textOpenSuperseded)
	}
	res := map[string]any{"channelId": k.Channel, "status": "opened"}
	var ans struct {
		History json.RawMessage `json:"history"`
	}
	if json.Unmarshal(out.res.answer, &ans) == nil && len(ans.History) > 0 && string(ans.History) != "null" {
		res["history"] = ans.History
	}
	return ok(res)
}

func (r *Registry) toolClose(ctx context.Context, a map[string]json.RawMessage) protocol.CallToolResult {
	k, why := r.resolve(a, textNeedChannelID)
	if why != "" {
		return fail(why)
	}
	return r.closeChannel(ctx, k, SourceAgentTool, false, liveChan)
}

// MachineClose closes a channel for a module of the host (source
// SourceSubscriptionGC or SourceHousekeeping): one the registry knows,
// registered or only decided. A channel the agent opened with
// channel_open is refused unless override is set.
func (r *Registry) MachineClose(ctx context.Context, server, channel, source string, override bool) protocol.CallToolResult {
	return r.closeChannel(ctx, Key{server, channel}, source, override, func(m *machine, k Key) (*chanState, string) {
		if c := m.chans[k]; c != nil {
			return c, ""
		}
		return nil, textChannelNotFoundOn(k.Channel, k.Server)
	})
}

// closeChannel records a close of k and carries it out. The source check
// comes before the "already closed" answer, which records the decision
// too.
func (r *Registry) closeChannel(ctx context.Context, k Key, source string, override bool, find func(*machine, Key) (*chanState, string)) protocol.CallToolResult {
	out, err := ask(ctx, r, func(m *machine, reply func(toolOutcome)) {
		c, missing := find(m, k)
		if c == nil {
			reply(toolOutcome{missing: missing})
			return
		}
		m.closeTool(c, source, override, reply)
	})
	if err != nil {
		out.res.err = err
	}
	var le *lifecycleError
	switch {
	case out.missing != "":
		return fail(out.missing)
	case out.refusal == refusalSource:
		return fail(textUnknownMachineSource(source))
	case out.refusal == refusalExplicitOpen:
		b, _ := json.Marshal(map[string]string{"refusal": "explicit-open", "channelId": k.Channel})
		res := protocol.TextResult(textExplicitOpen(k.Channel, source), false)
		res.StructuredContent = b
		return res
	case out.unrecorded && out.already:
		return fail(textAlreadyClosedUnrecorded(k.Channel))
	case out.unrecorded:
		return fail(textCloseUnrecorded(k.Channel))
	case out.already:
		return ok(map[string]string{"channelId": k.Channel, "status": "already closed"})
	case errors.As(out.res.err, &le) && le.kind == kindNoGrant:
		return fail(textCloseNoLifecycle(k.Server))
	case errors.As(out.res.err, &le) && (le.kind == kindGone || le.kind == kindNoServer):
		return fail(le.text)
	case out.res.err != nil:
		return fail(textCloseFailed(r.describe(k.Server, out.res.err)))
	case out.res.open:
		return fail(textCloseSuperseded)
	}
	return ok(map[string]string{"channelId": k.Channel, "status": "closed"})
}

func (r *Registry) toolDecline(ctx context.Context, a map[string]json.RawMessage) protocol.CallToolResult {
	k, why := r.resolve(a, textNeedChannelID)
	if why != "" {
		return fail(why)
	}
	msgID, _, good := str(a, "messageId")
	if !good || msgID == "" {
		return fail("messageId must name the message that invited you. Nothing was done.")
	}
	ack, _, _ := str(a, "acknowledge")
	out, err := ask(ctx, r, func(m *machine, reply func(toolOutcome)) {
		c, missing := liveChan(m, k)
		if c == nil {
			reply(toolOutcome{missing: missing})
			return
		}
		m.declineTool(c, reply)
	})
	switch {
	case err != nil:
		return fail(textDeclineUnknown(k.Channel))
	case out.missing != "":
		return fail(out.missing)
	case out.alreadyOpen:
		return fail(textAlreadyOpenDecline(k.Channel))
	case out.unrecorded:
		return fail(textDeclineUnrecorded(k.Channel))
	}
	res := map[string]any{"channelId": k.Channel, "status": "remained closed", "acknowledged": false}
	sent := ""
	if ack != "" {
		ackRes, why := r.acknowledge(ctx, k, msgID, ack)
		res["acknowledged"] = ackRes.Acknowledged
		switch {
		case why != "":
			res["acknowledgmentError"] = why
		case ackRes.Acknowledged:
			sent = cmp.Or(ackRes.Representation, ack)
			if ackRes.Representation != "" {
				res["representation"] = ackRes.Representation
			}
		}
	}
	// The decline itself, with the acknowledgment that went out: the
	// decision above is what counts, so a failure here is only logged.
	rec := store.Record{Kind: store.KindDeclined, Server: k.Server, Channel: k.Channel, MessageID: msgID, Acknowledgment: sent}
	recorded, err := ask(context.WithoutCancel(ctx), r, func(m *machine, reply func(bool)) { m.recordDeclined(rec, reply) })
	if err != nil || !recorded {
		r.log.Error("a declined invitation could not be recorded (the channel's closed decision is)", "server", k.Server, "channel", k.Channel)
	}
	return ok(res)
}

// SeenMessage is a message an agent's turn picked up that addressed it.
type SeenMessage struct {
	Server, Channel, MessageID string
}

// SeenAll tells each message's server that an agent has a message that
// addressed it (a turn picked it up), as the server's
// channels.acknowledgeSeen asks: channels/acknowledge with intent "seen".
// Nothing is sent for a message whose server has no such setting or no
// channels.acknowledge grant. The acknowledgments go out at once, each on
// a goroutine Close waits for (its request ends with Close's drain, as a
// lifecycle request's does), and SeenAll returns once every one is
// answered or failed, or after SeenWait, or as Close begins, whichever is
// first: so the acknowledgment reaches the server before the turn's reply
// does, and a slow server holds the turn for a second at most (the
// acknowledgments left go on in the background). A failure, or an answer
// that didn't acknowledge, is logged.
func (r *Registry) SeenAll(msgs []SeenMessage) {
	var done []chan struct{}
	for _, m := range msgs {
		srv := r.server(m.Server)
		if srv == nil || srv.cfg.AcknowledgeSeen == "" || !srv.conn.Has("channels.acknowledge") {
			continue
		}
		ch := make(chan struct{})
		if !r.goBackground(func() {
			defer close(ch)
			r.seen(srv, m)
		}) {
			continue
		}
		done = append(done, ch)
	}
	if len(done) == 0 {
		return
	}
	wait := time.NewTimer(SeenWait)
	defer wait.Stop()
	for _, ch := range done {
		select {
		case <-ch:
		case <-wait.C:
			return
		case <-r.closing:
			return
		}
	}
}

// SeenWait bounds how long SeenAll waits for its acknowledgments to be
// answered, as firstStartWait bounds Typing's wait for its first start.
const SeenWait = time.Second

// seen sends one seen-acknowledgment and logs what went wrong.
func (r *Registry) seen(srv *serverState, m SeenMessage) {
	var res protocol.ChannelsAcknowledgeResult
	p := protocol.ChannelsAcknowledgeParams{ChannelID: m.Channel, MessageID: m.MessageID, Intent: protocol.AckSeen, Value: srv.cfg.AcknowledgeSeen}
	err := srv.conn.Call(r.ctx, protocol.MethodChannelsAcknowledge, p, &res, srv.cfg.Timeout)
	switch {
	case err != nil:
		r.log.Warn("channels/acknowledge (seen) failed", "server", m.Server, "channel", m.Channel, "message", m.MessageID, "error", err.Error())
	case !res.Acknowledged:
		r.log.Info("channels/acknowledge (seen) not acknowledged", "server", m.Server, "channel", m.Channel, "message", m.MessageID, "reason", res.Reason)
	}
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
		return res, content.Words(res.Reason)
	case !res.Acknowledged:
		return res, textAckNotPosted
	}
	return res, ""
}

// Channel returns one channel as channel_list shows it; ok is false when
// the registry knows nothing of it (no registration, no decision).
func (r *Registry) Channel(server, id string) (ch ListedChannel, ok bool) {
	r.viewMu.RLock()
	v := r.views[Key{server, id}]
	r.viewMu.RUnlock()
	if v == nil {
		return ListedChannel{}, false
	}
	ch = ListedChannel{ID: id, ServerID: server, Desired: "unknown", Open: v.registered && v.confirmed && v.open}
	if v.decision != nil {
		ch.Desired = string(v.decision.State)
	}
	if v.registered {
		l := v.listed(server)
		ch.Type, ch.Label, ch.Direction, ch.Registered = l.Type, l.Label, l.Direction, true
		ch.PublishTarget, ch.Private, ch.Lazy, ch.Lifting = l.PublishTarget, l.Private, l.Lazy, l.Lifting
	}
	ch.Lifecycle = r.directsLifecycle(server)
	if ch.Desired == "unknown" && v.registered && ch.Lifecycle {
		ch.Desired = string(store.Closed)
	}
	return ch, true
}
