// Package chanserver is a channel server for end-to-end tests: an MCPL
// server, run as a real subprocess (cmd/chanserver, over stdio), that
// registers channels and answers the host's channels/open, channels/close
// and channels/publish as its tools script them, so a test driving a real
// host decides when each open or close answers, fails, or names another
// channel.
//
// It advertises channels.register, channels.incoming, channels.lifecycle
// and channels.publish, accepts any policy, and registers Config.Channels
// as the policy arrives: the registration is written before the policy's
// answer, so the host has answered it by the time its connect returns.
//
// Tools (each answers with JSON text):
//
//	register {channels}           sends channels/register; answers the host's result
//	changed {added, removed, updated}  sends channels/changed as a request
//	script {channelId, open, close, publish}  how later requests for the channel are answered:
//	                              open: ok | fail | hold | other:<id>; close: ok | fail | hold;
//	                              publish: ok | fail | refuse | hold
//	release {channelId, method, answer}  answers the oldest held open or close (ok | fail)
//	held {channelId, method}      waits (up to 30 s) until such a request is held; answers its count
//	log {count}                   the requests received, in order: "open c", "close c", "publish c: text";
//	                              with count, once at least that many are in (up to 30 s)
//	incoming {channelId, messageId, text, content}  sends channels/incoming (content, raw, in place
//	                              of a text block when given); answers the host's result
//	send_message {channelId, text}  a send tool: records "send c: text"; answers {channelId, messageId}
//	content {content}             answers with a result whose content is the given value, as given
package chanserver

import (
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
}

// Tools lists the server's tools.
var Tools = []protocol.Tool{
	{Name: "register", Description: "Sends channels/register."},
	{Name: "changed", Description: "Sends channels/changed as a request."},
	{Name: "script", Description: "Sets how a channel's later requests are answered."},
	{Name: "release", Description: "Answers a held open or close."},
	{Name: "held", Description: "Waits until an open or close is held."},
	{Name: "log", Description: "The requests received."},
	{Name: "incoming", Description: "Sends channels/incoming."},
	{Name: "send_message", Description: "Posts a message into a channel."},
	{Name: "content", Description: "Answers with the content it is given."},
}

type server struct {
	cfg  Config
	peer *wire.Peer
	set  chan struct{}

	// registerWritten is closed once the startup registration is written.
	registerWritten chan struct{}
	writtenOnce     sync.Once

	mu      sync.Mutex
	changed *sync.Cond
	scripts map[string]map[string]string  // channel -> method -> mode
	held    map[string][]func(any, error) // "open c" -> replies
	log     []string
	sent    int
}

// Serve serves one connection until it ends.
func Serve(s transport.Stream, cfg Config) {
	srv := &server{cfg: cfg, set: make(chan struct{}), registerWritten: make(chan struct{}), scripts: map[string]map[string]string{}, held: map[string][]func(any, error){}}
	srv.changed = sync.NewCond(&srv.mu)
	s = watchStream{s, srv}
	srv.peer = wire.NewPeer(s, wire.Options{Name: "host", Handler: wire.HandlerFunc(srv.serve), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	close(srv.set)
	<-srv.peer.Done()
}

func (srv *server) serve(ctx context.Context, req *wire.Request) (any, error) {
	<-srv.set
	switch req.Method {
	case protocol.MethodInitialize:
		return map[string]any{
			"protocolVersion": protocol.ProtocolVersion,
			"serverInfo":      protocol.Implementation{Name: "chanserver", Version: "1.0.0"},
			"capabilities": map[string]any{"tools": map[string]any{}, "experimental": map[string]any{"mcpl": map[string]any{
				"version": "0.5", "channels": map[string]bool{"register": true, "incoming": true, "lifecycle": true, "publish": true}}}},
		}, nil
	case protocol.MethodInitialized:
		return nil, nil
	case protocol.MethodFeatureSetsUpdate:
		if len(srv.cfg.Channels) > 0 {
			go srv.peer.Call(context.Background(), protocol.MethodChannelsRegister, protocol.ChannelsRegisterParams{Channels: srv.cfg.Channels}, nil)
			select {
			case <-srv.registerWritten:
			case <-time.After(5 * time.Second):
			}
		}
		return protocol.PolicyReceipt{Accepted: true}, nil
	case protocol.MethodToolsList:
		return protocol.ListToolsResult{Tools: Tools}, nil
	case protocol.MethodToolsCall:
		return srv.callTool(ctx, req)
	case protocol.MethodChannelsOpen, protocol.MethodChannelsClose, protocol.MethodChannelsPublish:
		return srv.lifecycle(req)
	case protocol.MethodPing:
		return struct{}{}, nil
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
	err := w.Stream.Write(ctx, msg)
	if strings.Contains(string(msg), `"method":"channels/register"`) {
		w.srv.writtenOnce.Do(func() { close(w.srv.registerWritten) })
	}
	return err
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
		entry += ": " + protocol.JoinText(p.Content)
	}
	srv.log = append(srv.log, entry)
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
	return answer(m, p.ChannelID, mode, n)
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
	Content   json.RawMessage `json:"content"`
	Count     int             `json:"count"`
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
		go func() {
			reply(srv.waitFor(ctx, "nothing held: "+key, func() bool { return len(srv.held[key]) > 0 }, func() any {
				return len(srv.held[key])
			}))
		}()
		return nil, nil
	case "log":
		// Waited for on a goroutine of its own, as held is.
		reply := req.Defer()
		go func() {
			reply(srv.waitFor(ctx, "fewer than "+fmt.Sprint(a.Count)+" requests", func() bool { return len(srv.log) >= a.Count }, func() any {
				return append([]string{}, srv.log...)
			}))
		}()
		return nil, nil
	case "incoming":
		var body any = []map[string]string{{"type": "text", "text": a.Text}}
		if len(a.Content) > 0 {
			body = a.Content // as the test wrote it, malformed or not
		}
		msg := map[string]any{"channelId": a.ChannelID, "messageId": a.MessageID, "author": map[string]string{"id": "u1", "name": "Ada"}, "content": body}
		return result(srv.send(ctx, protocol.MethodChannelsIncoming, map[string]any{"messages": []any{msg}}))
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
