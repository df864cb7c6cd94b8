// Package chanserver is a channel server for end-to-end tests: an MCPL
// server, run as a real subprocess (cmd/chanserver, over stdio), that
// registers channels and answers the host's channels/open, channels/close
// and channels/publish as its tools script them, so a test driving a real
// host decides when each open or close answers, fails, or names another
// channel.
//
// It advertises channels.register, channels.incoming, channels.lifecycle
// and channels.publish (without channels.lifecycle under
// Config.NoLifecycle, -no-lifecycle: a server that runs its channels
// itself; with channels.acknowledge and channels.typing under
// Config.Acknowledge and Config.Typing, leaves.go), accepts any policy, and registers Config.Channels as the policy
// arrives: the registration is written before the policy's answer, so the
// host has answered it by the time its connect returns.
//
// A test whose host is a subprocess (mcplhost run) reaches the tools
// through the control listener (Config.Control, -control FILE): HTTP on
// 127.0.0.1, POST /tools/{name} with the arguments as the body, answered
// with a ControlAnswer; where it listens, and the server's pid, are
// written to FILE (a ControlFile, renamed into place whole) once the host
// has answered the startup registration.
//
// It also plays an agent-facing MCPL server, for a host's end-to-end tests
// of push events, server-initiated inference, model info and context
// hooks. It advertises pushEvents, inferenceRequest (with streaming),
// inferenceLifecycle, modelInfo and contextHooks.beforeInference (observe
// and inject at system, beforeUser and afterUser), declared in the
// feature sets of FeatureSets (test.agent for push events, test.infer,
// test.hooks, test.inject), so a host can enable each apart (the channel
// capabilities stay outside any feature set, as before). Its push events
// name test.agent, its inference requests test.infer, its beforeInference
// answers test.hooks. It answers the host's
// context/beforeInference as the hook tool last scripted it (by default at
// once, with no injection), records each one's params, and records each
// inference/lifecycle notification's params; hooks_log reads them. The
// answers to push, infer and model_info are {"result": <the host's
// result>} or {"error": <the host's JSON-RPC error object>}; a call that
// got no answer at all (the connection ended) is {"error": {"message":
// "..."}}, with no code.
//
// Tools (each answers with JSON text):
//
//	register {channels}           sends channels/register; answers the host's result
//	changed {added, removed, updated}  sends channels/changed as a request
//	script {channelId, open, close, publish}  how later requests for the channel are answered:
//	                              open: ok | fail | hold | other:<id>; close: ok | fail | hold;
//	                              publish: ok | fail | refuse | hold, and for a publish naming a
//	                              thread (RFC-011; echoed by default): no-echo | wrong-echo |
//	                              refuse | posted-refuse | fail
//	                              (the log's publish entry is "publish c thread=T: text",
//	                              thread=null for the root, when threadId was sent)
//	release {channelId, method, answer}  answers the oldest held open or close (ok | fail)
//	held {channelId, method}      waits (up to 30 s) until such a request is held; answers its count
//	log {count}                   the requests received, in order: "open c", "close c", "publish c: text"
//	                              (and "acknowledge c m: intent", "typing c op" when opted into: leaves.go);
//	                              with count, once at least that many are in (up to 30 s)
//	opens {count}                 the raw params of every channels/open received, in order, as a JSON
//	                              array; with count, once at least that many are in (up to 30 s)
//	incoming {channelId, messageId, text, content, tags, threadId, metadata, author, notify}  sends
//	                              channels/incoming (content, raw, in place of a text block when
//	                              given; metadata raw); answers the host's result
//	incoming_burst {channelId, count, inflight, prefix, size, tags}  sends count channels/incoming
//	                              requests of one message each, pipelined on the one connection:
//	                              up to inflight (default 1) unanswered at once, each written only
//	                              after the one before it, so the host reads them in order; message
//	                              i (1-based) is id prefix-i (prefix default "b"), its text the id,
//	                              padded with a space and x's to size bytes when size is more
//	                              (BurstMessageID, BurstText), tags raw when given; answers a
//	                              BurstResult: {sent, accepted, notAccepted: [{messageId, why}],
//	                              failed: [...], notAcceptedCount, failedCount} (at most 100 listed
//	                              of each), once every request is answered
//	register_big {count, size, prefix}  sends count channels/register requests of one descriptor
//	                              each, one after another, each once the one before is answered:
//	                              descriptor i (1-based) is BigDescriptor: id prefix-i (prefix
//	                              default "big"), type "big", label "big i", and metadata {pad}
//	                              making its JSON exactly size bytes; answers a RegisterBigResult:
//	                              {sent, results: [the host's itemized results, in order], failed:
//	                              ["id: error", ...]}
//	send_message {channelId, text}  a send tool: records "send c: text"; answers {channelId, messageId}
//	content {content}             answers with a result whose content is the given value, as given
//	push {eventId, text, content, tags, origin}  sends push/event {featureSet: "test.agent", eventId,
//	                              timestamp (now, RFC 3339), payload: {content}, tags, origin}: origin raw
//	                              when given (origin.mcplChannelId names a channel); content is the
//	                              given value, raw, when given, else one text block of text; tags, raw,
//	                              only when given; eventId, as given when given (even ""), else "evt-N";
//	                              answers {"result": ...} or {"error": {...}}
//	infer {messages, stream, maxTokens}  sends inference/request {featureSet: "test.agent", messages,
//	                              stream, preferences: {maxTokens}} (messages raw, default one user
//	                              message "hello"; preferences only when maxTokens > 0); answers
//	                              {"result": ..., "chunks": [...]} or {"error": {...}, "chunks": [...]}:
//	                              chunks are the deltas of the inference/chunk notifications whose
//	                              requestId is the request's id, in arrival order, all of those that
//	                              arrived before the answer ([] when none)
//	model_info {}                 sends model/info; answers {"result": ...} or {"error": {...}}
//	hook {mode, injections, delayMs}  how later context/beforeInference requests are answered (each
//	                              call replaces the whole script; a request takes the script current
//	                              when it arrives): mode "answer" (the default) answers {featureSet:
//	                              "test.agent", contextInjections: injections} (raw; [] when not
//	                              given); "fail" answers JSON-RPC error -32603; "hang" never answers,
//	                              until the connection ends; "infer" sends inference/request from
//	                              inside the hook (which SPEC §10.7 forbids: a host must refuse it)
//	                              and answers with one injection {namespace: "loop", position:
//	                              "system", content: [one text block: the host's answer to it, as
//	                              push renders one]}. delayMs delays the answer (and, for infer, the
//	                              request); answers "scripted"
//	hooks_log {count, method}     the recorded inference/lifecycle and context/beforeInference
//	                              messages, in arrival order, as [{"method": ..., "params": {...}}],
//	                              only those of method when given; with count, once at least that
//	                              many (of method) are in (up to 30 s)
package chanserver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Config is a run's setup.
type Config struct {
	// Channels are registered once the host's policy arrives.
	Channels []protocol.ChannelDescriptor
	// Ontology, when not nil, is FeatureSet's tagOntology (SPEC §16.4).
	Ontology json.RawMessage
	// NoLifecycle leaves channels.lifecycle out of the advertisement: the
	// server runs its channels itself, and the host sends it no
	// channels/open or channels/close.
	NoLifecycle bool
	// Acknowledge advertises channels.acknowledge (-acknowledge): the
	// server answers channels/acknowledge, and logs it (leaves.go).
	Acknowledge bool
	// AcknowledgeDelay delays each channels/acknowledge answer
	// (-acknowledge-delay), logged as it goes (leaves.go).
	AcknowledgeDelay time.Duration
	// Typing advertises channels.typing (-typing): the server logs each
	// channels/typing (leaves.go).
	Typing bool
	// Control, if not "", is a file the server writes a ControlFile to
	// once the host has answered the startup registration (once the
	// policy arrives, without Channels): where its control listener is.
	Control string
}

// Tools lists the server's tools.
var Tools = []protocol.Tool{
	{Name: "register", Description: "Sends channels/register."},
	{Name: "changed", Description: "Sends channels/changed as a request."},
	{Name: "script", Description: "Sets how a channel's later requests are answered."},
	{Name: "release", Description: "Answers a held open or close."},
	{Name: "held", Description: "Waits until an open or close is held."},
	{Name: "log", Description: "The requests received."},
	{Name: "opens", Description: "The raw params of the channels/open requests received."},
	{Name: "incoming", Description: "Sends channels/incoming."},
	{Name: "incoming_burst", Description: "Sends many channels/incoming requests, pipelined."},
	{Name: "register_big", Description: "Sends many channels/register requests of one large descriptor each."},
	{Name: "send_message", Description: "Posts a message into a channel."},
	{Name: "content", Description: "Answers with the content it is given."},
	{Name: "push", Description: "Sends push/event."},
	{Name: "infer", Description: "Sends inference/request."},
	{Name: "model_info", Description: "Sends model/info."},
	{Name: "hook", Description: "Sets how later context/beforeInference requests are answered."},
	{Name: "hooks_log", Description: "The inference/lifecycle and context/beforeInference messages received."},
}

type server struct {
	cfg  Config
	peer *wire.Peer
	set  chan struct{}

	// registerWritten is closed once the startup registration is written.
	registerWritten chan struct{}
	writtenOnce     sync.Once
	readyOnce       sync.Once // the control file is written once

	mu      sync.Mutex
	changed *sync.Cond
	scripts map[string]map[string]string  // channel -> method -> mode
	held    map[string][]func(any, error) // "open c" -> replies
	log     []string
	opens   []json.RawMessage // each channels/open's params, as received
	sent    int

	hook     hookScript          // how context/beforeInference is answered
	hooksLog []hookEntry         // inference/lifecycle and context/beforeInference, in order
	chunks   map[string][]string // inference/chunk deltas by requestId
	pushed   int                 // push events sent without an eventId of their own

	// work counts the goroutines the server starts, so Serve returns only
	// once they are done (each ends when the connection does).
	work sync.WaitGroup

	ctl *control // the control listener; nil without Config.Control
}

// Serve serves one connection until it ends.
func Serve(s transport.Stream, cfg Config) {
	srv := &server{cfg: cfg, set: make(chan struct{}), registerWritten: make(chan struct{}), scripts: map[string]map[string]string{}, held: map[string][]func(any, error){},
		chunks: map[string][]string{}}
	srv.changed = sync.NewCond(&srv.mu)
	s = watchStream{s, srv}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if cfg.Control != "" {
		ctl, err := srv.startControl()
		if err != nil {
			log.Error("chanserver: no control listener", "error", err)
		}
		srv.ctl = ctl
	}
	srv.peer = wire.NewPeer(s, wire.Options{Name: "host", Handler: wire.HandlerFunc(srv.serve), Logger: log})
	close(srv.set)
	<-srv.peer.Done()
	if srv.ctl != nil {
		srv.ctl.stop()
	}
	srv.work.Wait()
}

// ready tells the test where the control listener is, if there is one.
func (srv *server) ready() {
	if srv.ctl == nil {
		return
	}
	if err := srv.ctl.publish(srv.cfg.Control); err != nil {
		fmt.Fprintln(os.Stderr, "chanserver: writing the control file:", err)
	}
}

func (srv *server) serve(ctx context.Context, req *wire.Request) (any, error) {
	<-srv.set
	switch req.Method {
	case protocol.MethodInitialize:
		return map[string]any{
			"protocolVersion": protocol.ProtocolVersion,
			"serverInfo":      protocol.Implementation{Name: "chanserver", Version: "1.0.0"},
			"capabilities": map[string]any{"tools": map[string]any{}, "experimental": map[string]any{"mcpl": map[string]any{
				"version": "0.5", "channels": srv.channelCaps(),
				"pushEvents":         true,
				"inferenceRequest":   map[string]bool{"streaming": true},
				"inferenceLifecycle": true,
				"modelInfo":          true,
				"contextHooks": map[string]any{"beforeInference": map[string]any{
					"observe": true, "inject": map[string]bool{"system": true, "beforeUser": true, "afterUser": true}}},
				"featureSets": featureSets(srv.cfg.Ontology),
			}}},
		}, nil
	case protocol.MethodInitialized:
		return nil, nil
	case protocol.MethodFeatureSetsUpdate:
		if len(srv.cfg.Channels) > 0 {
			srv.work.Go(func() {
				srv.peer.Call(ctx, protocol.MethodChannelsRegister, protocol.ChannelsRegisterParams{Channels: srv.cfg.Channels}, nil)
				srv.readyOnce.Do(srv.ready)
			})
			select {
			case <-srv.registerWritten:
			case <-time.After(5 * time.Second):
			}
		} else {
			srv.readyOnce.Do(srv.ready)
		}
		return protocol.PolicyReceipt{Accepted: true}, nil
	case protocol.MethodToolsList:
		return protocol.ListToolsResult{Tools: Tools}, nil
	case protocol.MethodToolsCall:
		return srv.callTool(ctx, req)
	case protocol.MethodChannelsOpen, protocol.MethodChannelsClose, protocol.MethodChannelsPublish:
		return srv.lifecycle(req)
	case methodBeforeInference:
		return srv.beforeInference(ctx, req)
	case methodLifecycle:
		srv.record(req)
		return nil, nil
	case methodChunk:
		srv.chunk(req)
		return nil, nil
	case protocol.MethodPing:
		return struct{}{}, nil
	}
	if res, ok, err := srv.leaf(req); ok {
		return res, err
	}
	if req.IsNotification() {
		return nil, nil
	}
	return nil, wire.ErrMethodNotFound
}

// watchStream tells the server when its startup registration is written.
type watchStream struct {
	transport.Stream
	srv *server
}

func (w watchStream) Write(ctx context.Context, msg []byte) error {
	if slot, ok := ctx.Value(idSlotKey{}).(*int64); ok {
		// A call that wants its request id (infer, to pick its chunks):
		// the write is on the caller's goroutine, before any answer.
		var m struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal(msg, &m) == nil {
			*slot = m.ID
		}
	}
	if written, ok := ctx.Value(writtenKey{}).(chan struct{}); ok {
		// A burst's request: the next one waits until this one is out.
		defer close(written)
	}
	err := w.Stream.Write(ctx, msg)
	if strings.Contains(string(msg), `"method":"channels/register"`) {
		w.srv.writtenOnce.Do(func() { close(w.srv.registerWritten) })
	}
	return err
}

// channelCaps is the channels advertisement.
func (srv *server) channelCaps() map[string]bool {
	caps := map[string]bool{"register": true, "incoming": true, "lifecycle": true, "publish": true}
	if srv.cfg.NoLifecycle {
		delete(caps, "lifecycle")
	}
	srv.leafCaps(caps)
	return caps
}

func short(method string) string { return strings.TrimPrefix(method, "channels/") }

// lifecycle answers channels/open, channels/close and channels/publish as
// the channel's script says.
func (srv *server) lifecycle(req *wire.Request) (any, error) {
	var p struct {
		ChannelID string            `json:"channelId"`
		Content   []json.RawMessage `json:"content"`
		ThreadID  json.RawMessage   `json:"threadId"`
	}
	json.Unmarshal(req.Params, &p)
	m := short(req.Method)
	srv.mu.Lock()
	entry := m + " " + p.ChannelID
	if m == "publish" {
		if len(p.ThreadID) > 0 {
			entry += " thread=" + strings.Trim(string(p.ThreadID), `"`)
		}
		entry += ": " + protocol.JoinText(p.Content)
	}
	srv.log = append(srv.log, entry)
	srv.keepOpen(req)
	srv.changed.Broadcast()
	mode := srv.scripts[p.ChannelID][m]
	if mode == "hold" && !req.IsNotification() {
		key := m + " " + p.ChannelID
		srv.held[key] = append(srv.held[key], req.Defer())
		srv.changed.Broadcast()
		srv.mu.Unlock()
		return nil, nil
	}
	srv.sent++
	n := srv.sent
	srv.mu.Unlock()
	if m == "publish" && len(p.ThreadID) > 0 {
		return threadAnswer(p.ThreadID, mode, n)
	}
	return answer(m, p.ChannelID, mode, n)
}

// threadAnswer answers a publish that named a place (RFC-011): posted
// there, its place echoed, unless the mode says otherwise: no-echo (no
// threadId in the result), wrong-echo (another thread), refuse (nothing
// posted), posted-refuse (delivered:false naming a posted message), fail
// (an error answer).
func threadAnswer(thread json.RawMessage, mode string, n int) (any, error) {
	id := fmt.Sprintf("m%d", n)
	switch mode {
	case "no-echo":
		return map[string]any{"delivered": true, "messageId": id}, nil
	case "wrong-echo":
		return map[string]any{"delivered": true, "messageId": id, "threadId": "elsewhere"}, nil
	case "refuse":
		return map[string]any{"delivered": false, "reason": "no such thread here"}, nil
	case "posted-refuse":
		return map[string]any{"delivered": false, "messageId": id}, nil
	case "fail":
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "publish failed, as scripted"}
	}
	return map[string]any{"delivered": true, "messageId": id, "threadId": thread}, nil
}

// answer is a request's answer in mode.
func answer(method, channel, mode string, n int) (any, error) {
	switch {
	case mode == "fail":
		return nil, &protocol.Error{Code: protocol.CodeChannelOpenFailed, Message: fmt.Sprintf("%s of %s failed, as scripted", method, channel)}
	case method == "open" && strings.HasPrefix(mode, "other:"):
		return map[string]any{"channel": map[string]string{"id": strings.TrimPrefix(mode, "other:")}}, nil
	case method == "open":
		return map[string]any{"channel": map[string]string{"id": channel}}, nil
	case method == "close":
		return map[string]bool{"closed": true}, nil
	case mode == "refuse":
		return map[string]any{"delivered": false, "reason": "the room is read-only"}, nil
	}
	return map[string]any{"delivered": true, "messageId": fmt.Sprintf("m%d", n)}, nil
}

type toolArgs struct {
	Channels  json.RawMessage `json:"channels"`
	Added     json.RawMessage `json:"added"`
	Removed   json.RawMessage `json:"removed"`
	Updated   json.RawMessage `json:"updated"`
	ChannelID string          `json:"channelId"`
	Open      string          `json:"open"`
	Close     string          `json:"close"`
	Publish   string          `json:"publish"`
	Method    string          `json:"method"`
	Answer    string          `json:"answer"`
	MessageID string          `json:"messageId"`
	Text      string          `json:"text"`
	Author    string          `json:"author"` // incoming: the author's name ("Ada" when unset)
	Notify    bool            `json:"notify"` // incoming: sent as a notification, as some connectors do
	Content   json.RawMessage `json:"content"`
	Count     int             `json:"count"`

	ThreadID   *string         `json:"threadId"` // incoming: the message's thread
	Metadata   json.RawMessage `json:"metadata"` // incoming: the message's metadata, raw
	Origin     json.RawMessage `json:"origin"`   // push: the event's origin, raw
	EventID    *string         `json:"eventId"`
	Tags       json.RawMessage `json:"tags"`
	Messages   json.RawMessage `json:"messages"`
	Stream     bool            `json:"stream"`
	MaxTokens  int             `json:"maxTokens"`
	Mode       string          `json:"mode"`
	Injections json.RawMessage `json:"injections"`
	DelayMs    int             `json:"delayMs"`
}

func (srv *server) callTool(ctx context.Context, req *wire.Request) (any, error) {
	var p protocol.CallToolParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	var a toolArgs
	json.Unmarshal(p.Arguments, &a)
	result := func(v any) (any, error) {
		b, _ := json.Marshal(v)
		return protocol.TextResult(string(b), false), nil
	}
	switch p.Name {
	case "register":
		return result(srv.send(ctx, protocol.MethodChannelsRegister, map[string]json.RawMessage{"channels": a.Channels}))
	case "changed":
		params := map[string]json.RawMessage{}
		for k, v := range map[string]json.RawMessage{"added": a.Added, "removed": a.Removed, "updated": a.Updated} {
			if len(v) > 0 {
				params[k] = v
			}
		}
		return result(srv.send(ctx, protocol.MethodChannelsChanged, params))
	case "script":
		srv.mu.Lock()
		s := srv.scripts[a.ChannelID]
		if s == nil {
			s = map[string]string{}
			srv.scripts[a.ChannelID] = s
		}
		for m, mode := range map[string]string{"open": a.Open, "close": a.Close, "publish": a.Publish} {
			if mode != "" {
				s[m] = mode
			}
		}
		srv.mu.Unlock()
		return result("scripted")
	case "release":
		key := a.Method + " " + a.ChannelID
		srv.mu.Lock()
		q := srv.held[key]
		if len(q) == 0 {
			srv.mu.Unlock()
			return protocol.TextResult("nothing held: "+key, true), nil
		}
		reply := q[0]
		srv.held[key] = q[1:]
		srv.sent++
		n := srv.sent
		srv.mu.Unlock()
		reply(answer(a.Method, a.ChannelID, a.Answer, n))
		return result("released")
	case "held":
		// Handlers run on the connection's dispatch goroutine: the wait
		// is on one of its own, so the requests it waits for can arrive.
		reply := req.Defer()
		key := a.Method + " " + a.ChannelID
		srv.work.Go(func() {
			reply(srv.waitFor(ctx, "nothing held: "+key, func() bool { return len(srv.held[key]) > 0 }, func() any {
				return len(srv.held[key])
			}))
		})
		return nil, nil
	case "log":
		// Waited for on a goroutine of its own, as held is.
		reply := req.Defer()
		srv.work.Go(func() {
			reply(srv.waitFor(ctx, "fewer than "+fmt.Sprint(a.Count)+" requests", func() bool { return len(srv.log) >= a.Count }, func() any {
				return append([]string{}, srv.log...)
			}))
		})
		return nil, nil
	case "opens":
		return srv.opensTool(ctx, req, a.Count)
	case "incoming":
		var body any = []map[string]string{{"type": "text", "text": a.Text}}
		if len(a.Content) > 0 {
			body = a.Content // as the test wrote it, malformed or not
		}
		author := cmp.Or(a.Author, "Ada")
		msg := map[string]any{"channelId": a.ChannelID, "messageId": a.MessageID, "author": map[string]string{"id": "u1", "name": author}, "content": body}
		if len(a.Tags) > 0 && string(a.Tags) != "null" {
			msg["tags"] = a.Tags
		}
		if a.ThreadID != nil {
			msg["threadId"] = *a.ThreadID
		}
		if len(a.Metadata) > 0 {
			msg["metadata"] = a.Metadata
		}
		params := map[string]any{"messages": []any{msg}}
		if a.Notify {
			if err := srv.peer.Notify(ctx, protocol.MethodChannelsIncoming, params); err != nil {
				return result(map[string]string{"failed": err.Error()})
			}
			return result(map[string]string{"notified": "channels/incoming"})
		}
		return result(srv.send(ctx, protocol.MethodChannelsIncoming, params))
	case "incoming_burst":
		var b burstArgs
		json.Unmarshal(p.Arguments, &b)
		// On a goroutine of its own, as log is: the answers to its
		// requests come meanwhile.
		reply := req.Defer()
		srv.work.Go(func() { reply(result(srv.burst(ctx, b))) })
		return nil, nil
	case "register_big":
		var b registerBigArgs
		json.Unmarshal(p.Arguments, &b)
		// On a goroutine of its own, as incoming_burst is.
		reply := req.Defer()
		srv.work.Go(func() { reply(result(srv.registerBig(ctx, b))) })
		return nil, nil
	case "content":
		return map[string]json.RawMessage{"content": a.Content}, nil
	case "send_message":
		srv.mu.Lock()
		srv.log = append(srv.log, "send "+a.ChannelID+": "+a.Text)
		srv.changed.Broadcast()
		srv.sent++
		n := srv.sent
		srv.mu.Unlock()
		return result(map[string]string{"channelId": a.ChannelID, "messageId": fmt.Sprintf("m%d", n)})
	case "push", "infer", "model_info", "hook", "hooks_log":
		return srv.agentTool(ctx, req, p.Name, a)
	}
	return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "unknown tool " + p.Name}
}

// waitFor waits, up to 30 s, until cond holds (under srv.mu), and answers
// with what's JSON; past the wait, with the error result missing.
func (srv *server) waitFor(ctx context.Context, missing string, cond func() bool, what func() any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		srv.mu.Lock()
		srv.changed.Broadcast()
		srv.mu.Unlock()
	})()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for !cond() {
		if ctx.Err() != nil {
			return protocol.TextResult(missing, true), nil
		}
		srv.changed.Wait()
	}
	b, _ := json.Marshal(what())
	return protocol.TextResult(string(b), false), nil
}

// send sends the host a request and renders its answer.
func (srv *server) send(ctx context.Context, method string, params any) any {
	var res json.RawMessage
	if err := srv.peer.Call(ctx, method, params, &res); err != nil {
		return map[string]string{"failed": err.Error()}
	}
	return map[string]json.RawMessage{"result": res}
}

// featureSets is the featureSets advertisement.
func featureSets(ontology json.RawMessage) map[string]any {
	out := map[string]any{}
	for name, uses := range FeatureSets {
		fs := map[string]any{"description": "the test server's " + name, "uses": uses}
		if name == FeatureSet && ontology != nil {
			fs["tagOntology"] = ontology
		}
		out[name] = fs
	}
	return out
}
