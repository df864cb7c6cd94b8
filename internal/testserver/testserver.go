// Package testserver is a scriptable, misbehaving MCP server for tests. The
// program in cmd/testserver runs it as a real subprocess over stdio, or as a
// WebSocket server on 127.0.0.1. Each test picks its misbehaviour: by flags
// for the whole run (Config), or per request by calling one of its tools.
//
// Tools:
//
//	echo {text}                 answers with the text
//	fail {message, code}        answers with a JSON-RPC error (message may be empty)
//	tool_error {text}           answers with an isError tool result
//	exit {code, signal}         exits (or kills itself with a signal) with the call pending
//	hang {}                     never answers
//	sleep {ms, text}            answers after ms milliseconds
//	noise {lines}               writes each line raw to its output, then answers
//	oversize {bytes}            sends a message of about that many bytes, then answers
//	ask_host {method, id}       sends the host a request with that raw id (colliding with the host's ids); answers "asked"
//	count {}                    answers with the number of requests it has received
//	send {method, params, notify}  sends the host a request (or notification) and
//	                            answers with what came back, as JSON: {"result":...} or
//	                            {"error":{"code","message","data"}}
//	policy {}                   answers with the host's initialize params, the policy
//	                            messages it received and the answers to its -early
//	                            requests (once all are in), as JSON
//
// As an MCPL server (Config.MCPL set) it answers featureSets/update as
// Config.Policy says, and channels/list with one channel, #general.
//
// Whole-run misbehaviour (Config, and the program's flags): exit when a
// given method arrives (ExitOn), never answer given methods (Ignore) or
// any it does not know (IgnoreUnknown), write every message pretty-printed
// over several lines (Pretty, for WebSocket), crash after N requests,
// print banners, page tools/list, send privileged requests before the
// policy (Early), hold initialize on a FIFO. A request left unanswered is
// answered (with an error no one reads) only once the connection has
// ended, so the server's end is never held up by it.
package testserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Config is a run's misbehaviour.
type Config struct {
	// Name is the serverInfo name (default "testserver").
	Name string
	// MCPL, if not empty, is the raw experimental.mcpl advertisement.
	MCPL json.RawMessage
	// CrashAfter, if > 0, exits with status 3 on receiving that many
	// requests, leaving the last one unanswered.
	CrashAfter int
	// Banner lines are written raw before anything else.
	Banner []string
	// PageSize, if > 0, pages tools/list with nextCursor.
	PageSize int
	// NoServerInfo omits serverInfo and protocolVersion from initialize.
	NoServerInfo bool
	// NoTools advertises no tools capability and knows no tools methods.
	NoTools bool
	// UndeclaredTools serves its tools but advertises no tools
	// capability, as several real servers do.
	UndeclaredTools bool
	// Policy is how featureSets/update is answered: "accept" (the
	// default), "degrade", "refuse" (fallback mcp-only), "refuse-close",
	// "method-not-found", "error" (an error with words), or "ignore"
	// (never answered).
	Policy string
	// Early lists methods the server sends the host as requests as soon as
	// notifications/initialized arrives, before the policy exchange; each
	// answer is kept for the "policy" tool to report.
	Early []string
	// ExitOn exits the process with the given status when the method
	// arrives (after a line to stderr), before answering it.
	ExitOn map[string]int
	// Ignore lists methods never answered; IgnoreUnknown leaves every
	// method it does not know unanswered too (where it would answer
	// method-not-found).
	Ignore        []string
	IgnoreUnknown bool
	// Pretty writes each message indented over several lines (legal JSON;
	// for WebSocket, where a frame is a message).
	Pretty bool
	// HoldInitialize, if set, is a FIFO the server opens for reading
	// before it answers initialize: the answer waits until a test opens it
	// for writing.
	HoldInitialize string
	// Modern, "only" or "dual", serves MCP 2026-07-28 (modern.go): only
	// that revision, or it and 2025-11-25 through initialize.
	Modern string
	// ListenFailFirst refuses the first subscriptions/listen.
	ListenFailFirst bool
	// ProtocolVersion is the revision answered to initialize ("" answers
	// protocol.ProtocolVersion; "echo" answers the one asked for).
	ProtocolVersion string
	// Exit is how the process leaves (os.Exit in the program); tests in
	// process may replace it.
	Exit func(code int)
}

// Tools lists the test server's tools in tools/list order.
var Tools = []protocol.Tool{
	{Name: "echo", Description: "Answers with the text it is given."},
	{Name: "fail", Description: "Answers with a JSON-RPC error."},
	{Name: "tool_error", Description: "Answers with an isError result."},
	{Name: "exit", Description: "Exits with the call pending."},
	{Name: "hang", Description: "Never answers."},
	{Name: "sleep", Description: "Answers after a delay."},
	{Name: "noise", Description: "Writes raw lines, then answers."},
	{Name: "oversize", Description: "Sends an oversize message, then answers."},
	{Name: "ask_host", Description: "Sends the host a request with a chosen id."},
	{Name: "count", Description: "Answers with the number of requests received."},
	{Name: "send", Description: "Sends the host a request or notification; answers with what came back."},
	{Name: "policy", Description: "Answers with the policy messages received and early answers."},
}

// Server is one connection's worth of test server.
type Server struct {
	cfg      Config
	s        transport.Stream
	peer     *wire.Peer
	peerSet  chan struct{} // closed once peer is set
	requests atomic.Int64
	modern   modernState

	mu       sync.Mutex
	init     json.RawMessage // the host's initialize params
	policies []policySeen
	early    []json.RawMessage
	earlyWG  sync.WaitGroup // the early requests still waiting for answers
	unsent   map[string]int // early requests not yet written, by method
	sentAll  chan struct{}  // closed once every early request is written
}

type policySeen struct {
	AsRequest bool            `json:"asRequest"`
	Params    json.RawMessage `json:"params"`
}

// Serve runs the test server on s until the connection ends.
func Serve(s transport.Stream, cfg Config) {
	if cfg.Name == "" {
		cfg.Name = "testserver"
	}
	if cfg.Exit == nil {
		cfg.Exit = os.Exit
	}
	if cfg.Pretty {
		s = prettyStream{s}
	}
	srv := &Server{cfg: cfg, peerSet: make(chan struct{}), unsent: map[string]int{}, sentAll: make(chan struct{})}
	for _, m := range cfg.Early {
		srv.unsent[m]++
	}
	if len(cfg.Early) == 0 {
		close(srv.sentAll)
	}
	s = earlyStream{s, srv}
	srv.s = s
	for _, line := range cfg.Banner {
		s.Write(context.Background(), []byte(line))
	}
	srv.peer = wire.NewPeer(s, wire.Options{
		Name:    "host",
		Handler: wire.HandlerFunc(srv.serve),
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	close(srv.peerSet)
	<-srv.peer.Done()
}

func (srv *Server) serve(ctx context.Context, req *wire.Request) (any, error) {
	<-srv.peerSet // the handler may use srv.peer, which NewPeer's return sets
	if code, ok := srv.cfg.ExitOn[req.Method]; ok {
		fmt.Fprintf(os.Stderr, "testserver: %s arrived\ntestserver: exiting with status %d, as asked\n", req.Method, code)
		srv.cfg.Exit(code)
		req.Defer()
		return nil, nil
	}
	if slices.Contains(srv.cfg.Ignore, req.Method) {
		return neverAnswer(ctx, req)
	}
	if !req.IsNotification() {
		n := srv.requests.Add(1)
		if srv.cfg.CrashAfter > 0 && n >= int64(srv.cfg.CrashAfter) {
			fmt.Fprintf(os.Stderr, "testserver: crashing after %d requests\n", n)
			srv.cfg.Exit(3)
		}
	}
	if res, done, err := srv.modernServe(ctx, req); done {
		return res, err
	}
	switch req.Method {
	case protocol.MethodInitialize:
		srv.mu.Lock()
		srv.init = append(json.RawMessage(nil), req.Params...)
		srv.mu.Unlock()
		if srv.cfg.HoldInitialize != "" {
			if f, err := os.Open(srv.cfg.HoldInitialize); err == nil {
				f.Close()
			}
		}
		res := map[string]any{"capabilities": srv.capabilities()}
		if !srv.cfg.NoServerInfo {
			res["protocolVersion"] = cmp.Or(srv.cfg.ProtocolVersion, protocol.ProtocolVersion)
			if srv.cfg.ProtocolVersion == "echo" {
				var p protocol.InitializeParams
				_ = json.Unmarshal(req.Params, &p)
				res["protocolVersion"] = p.ProtocolVersion
			}
			res["serverInfo"] = protocol.Implementation{Name: srv.cfg.Name, Version: "1.0.0"}
		}
		return res, nil
	case protocol.MethodInitialized:
		for _, m := range srv.cfg.Early {
			srv.earlyWG.Add(1)
			go func() {
				defer srv.earlyWG.Done()
				ans := srv.send(context.Background(), m, json.RawMessage(`{"channels":[{"id":"general","label":"#general"}]}`), false)
				srv.mu.Lock()
				srv.early = append(srv.early, ans)
				srv.mu.Unlock()
			}()
		}
		return nil, nil
	case protocol.MethodFeatureSetsUpdate:
		// The early requests go out before the policy's answer, as from a
		// server that sends them right after initialized: the host has
		// them before it has the answer.
		select {
		case <-srv.sentAll:
		case <-ctx.Done():
		}
		return srv.policy(ctx, req)
	case protocol.MethodChannelsList:
		if len(srv.cfg.MCPL) > 0 {
			return protocol.ChannelsListResult{Channels: []protocol.ChannelDescriptor{{ID: "general", Label: "#general"}}}, nil
		}
	case protocol.MethodToolsList:
		if srv.cfg.NoTools {
			break
		}
		return srv.listTools(req.Params)
	case protocol.MethodToolsCall:
		return srv.callTool(ctx, req)
	}
	if srv.cfg.IgnoreUnknown {
		return neverAnswer(ctx, req)
	}
	return nil, wire.ErrMethodNotFound
}

// neverAnswer leaves req unanswered while the connection lives: it answers
// (an error no one reads) only once ctx, the connection's, has ended, so
// that the server's end is not held up waiting for it.
func neverAnswer(ctx context.Context, req *wire.Request) (any, error) {
	reply := req.Defer()
	context.AfterFunc(ctx, func() { reply(nil, &protocol.Error{Code: -32000, Message: "never answered"}) })
	return nil, nil
}

// earlyStream tells the server when each of its early requests has been
// written.
type earlyStream struct {
	transport.Stream
	srv *Server
}

func (e earlyStream) Write(ctx context.Context, msg []byte) error {
	err := e.Stream.Write(ctx, msg)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err == nil && json.Unmarshal(msg, &m) == nil && m.ID != nil {
		e.srv.mu.Lock()
		if n := e.srv.unsent[m.Method]; n > 0 {
			e.srv.unsent[m.Method] = n - 1
			if allZero(e.srv.unsent) {
				select {
				case <-e.srv.sentAll:
				default:
					close(e.srv.sentAll)
				}
			}
		}
		e.srv.mu.Unlock()
	}
	return err
}

func allZero(m map[string]int) bool {
	for _, n := range m {
		if n > 0 {
			return false
		}
	}
	return true
}

// prettyStream writes each message indented, over several lines.
type prettyStream struct{ transport.Stream }

func (p prettyStream) Write(ctx context.Context, msg []byte) error {
	var b bytes.Buffer
	if json.Indent(&b, msg, "", "  ") != nil {
		return p.Stream.Write(ctx, msg)
	}
	b.WriteByte('\n')
	return p.Stream.Write(ctx, b.Bytes())
}

func (srv *Server) capabilities() map[string]any {
	caps := map[string]any{}
	if !srv.cfg.NoTools && !srv.cfg.UndeclaredTools {
		caps["tools"] = map[string]any{}
	}
	if len(srv.cfg.MCPL) > 0 {
		caps["experimental"] = map[string]json.RawMessage{"mcpl": srv.cfg.MCPL}
	}
	return caps
}

// policy answers featureSets/update as configured.
func (srv *Server) policy(ctx context.Context, req *wire.Request) (any, error) {
	srv.mu.Lock()
	srv.policies = append(srv.policies, policySeen{AsRequest: !req.IsNotification(), Params: req.Params})
	srv.mu.Unlock()
	switch srv.cfg.Policy {
	case "", "accept":
		return protocol.PolicyReceipt{Accepted: true}, nil
	case "degrade":
		return protocol.PolicyReceipt{Accepted: true, Mode: "degraded", UnavailableFeatures: []protocol.UnavailableFeature{
			{FeatureSet: "memory.extraction", MissingCapabilities: []string{"inferenceLifecycle"}, Effect: "disabled"}}}, nil
	case "refuse":
		return protocol.PolicyReceipt{Accepted: false, Fallback: protocol.FallbackMCPOnly, Reason: "this server needs inject.system"}, nil
	case "refuse-close":
		return protocol.PolicyReceipt{Accepted: false, Fallback: protocol.FallbackClose, Reason: "this server will not run without channels.publish"}, nil
	case "method-not-found":
		if req.IsNotification() {
			return nil, nil
		}
		return nil, wire.ErrMethodNotFound
	case "error":
		return nil, &protocol.Error{Code: -32000, Message: "policy store unavailable"}
	case "ignore":
		return neverAnswer(ctx, req)
	}
	return nil, &protocol.Error{Code: -32000, Message: "testserver: unknown -policy " + srv.cfg.Policy}
}

// send sends the host a request or notification and renders what came back.
func (srv *Server) send(ctx context.Context, method string, params json.RawMessage, notify bool) json.RawMessage {
	if notify {
		err := srv.peer.Notify(ctx, method, params)
		b, _ := json.Marshal(map[string]any{"sent": err == nil})
		return b
	}
	var res json.RawMessage
	err := srv.peer.Call(ctx, method, params, &res)
	var ce *wire.CallError
	switch {
	case err == nil:
		b, _ := json.Marshal(map[string]any{"result": res})
		return b
	case errors.As(err, &ce) && ce.Outcome == wire.ErrorResponse:
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": ce.Answer.Code, "message": ce.Answer.Message, "data": ce.Answer.Data}})
		return b
	default:
		b, _ := json.Marshal(map[string]any{"failed": err.Error()})
		return b
	}
}

func (srv *Server) listTools(params json.RawMessage) (any, error) {
	var p protocol.ListToolsParams
	json.Unmarshal(params, &p)
	start := 0
	if p.Cursor != "" {
		fmt.Sscanf(p.Cursor, "page-%d", &start)
	}
	if srv.cfg.PageSize <= 0 {
		return protocol.ListToolsResult{Tools: Tools}, nil
	}
	end := min(start+srv.cfg.PageSize, len(Tools))
	res := protocol.ListToolsResult{Tools: Tools[start:end]}
	if end < len(Tools) {
		res.NextCursor = fmt.Sprintf("page-%d", end)
	}
	return res, nil
}

type toolArgs struct {
	Text    string          `json:"text"`
	Message string          `json:"message"`
	Code    int64           `json:"code"`
	Signal  string          `json:"signal"`
	MS      int             `json:"ms"`
	Lines   []string        `json:"lines"`
	Bytes   int             `json:"bytes"`
	Method  string          `json:"method"`
	ID      int64           `json:"id"`
	Params  json.RawMessage `json:"params"`
	Notify  bool            `json:"notify"`
}

func (srv *Server) callTool(ctx context.Context, req *wire.Request) (any, error) {
	var p protocol.CallToolParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "bad tools/call params"}
	}
	var a toolArgs
	if len(p.Arguments) > 0 {
		if err := json.Unmarshal(p.Arguments, &a); err != nil {
			return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "bad arguments: " + err.Error()}
		}
	}
	switch p.Name {
	case "echo":
		return protocol.TextResult(a.Text, false), nil
	case "fail":
		code := a.Code
		if code == 0 {
			code = -32000
		}
		return nil, &protocol.Error{Code: code, Message: a.Message}
	case "tool_error":
		return protocol.TextResult(a.Text, true), nil
	case "exit":
		if a.Signal != "" {
			sig := map[string]syscall.Signal{"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM}[strings.TrimPrefix(a.Signal, "SIG")]
			if sig != 0 {
				syscall.Kill(os.Getpid(), sig)
				select {} // wait for the signal to land
			}
		}
		fmt.Fprintf(os.Stderr, "testserver: exiting with status %d as asked\n", a.Code)
		srv.cfg.Exit(int(a.Code))
		return nil, nil
	case "hang":
		return neverAnswer(ctx, req)
	case "sleep":
		reply := req.Defer()
		go func() {
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
				reply(protocol.TextResult(a.Text, false), nil)
			case <-ctx.Done():
			}
		}()
		return nil, nil
	case "noise":
		for _, line := range a.Lines {
			srv.s.Write(ctx, []byte(line))
		}
		return protocol.TextResult("after noise", false), nil
	case "oversize":
		pad := strings.Repeat("x", max(a.Bytes, 0))
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]string{"pad": pad}})
		srv.s.Write(ctx, msg)
		return protocol.TextResult("after oversize", false), nil
	case "ask_host":
		reply := req.Defer()
		go func() {
			raw := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, a.ID, a.Method)
			// The answer comes back on the peer as a response to an id we
			// never issued; the test reads it from the host side instead.
			if err := srv.s.Write(ctx, []byte(raw)); err != nil {
				reply(nil, err)
				return
			}
			reply(protocol.TextResult("asked", false), nil)
		}()
		return nil, nil
	case "count":
		return protocol.TextResult(fmt.Sprint(srv.requests.Load()), false), nil
	case "send":
		reply := req.Defer()
		go func() {
			reply(protocol.TextResult(string(srv.send(ctx, a.Method, a.Params, a.Notify)), false), nil)
		}()
		return nil, nil
	case "policy":
		reply := req.Defer()
		go func() {
			srv.earlyWG.Wait() // report the early answers once they are in
			srv.mu.Lock()
			b, _ := json.Marshal(map[string]any{"initialize": srv.init, "policies": srv.policies, "early": srv.early})
			srv.mu.Unlock()
			reply(protocol.TextResult(string(b), false), nil)
		}()
		return nil, nil
	}
	return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "unknown tool: " + p.Name}
}

// CannedAnswers answers every request line with the same tools/call
// result, echoing the request's numeric id, without parsing JSON: a server
// that costs next to nothing, so a benchmark against it measures the host's
// side of a round trip.
func CannedAnswers(r io.Reader, w io.Writer) error {
	s := transport.NewLineStream(r, w, nil, 0)
	const key = `"id":`
	for {
		msg, err := s.Read()
		if err != nil {
			return err
		}
		i := strings.Index(string(msg), key)
		if i < 0 {
			continue
		}
		j := i + len(key)
		k := j
		for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
			k++
		}
		out := `{"jsonrpc":"2.0","id":` + string(msg[j:k]) + `,"result":{"content":[{"type":"text","text":"the quick brown fox jumps over the lazy dog"}]}}`
		if err := s.Write(context.Background(), []byte(out)); err != nil {
			return err
		}
	}
}

// RawEcho copies each line from r to w unchanged: the floor for benchmarks.
func RawEcho(r io.Reader, w io.Writer) error {
	s := transport.NewLineStream(r, w, nil, 0)
	for {
		msg, err := s.Read()
		if err != nil {
			return err
		}
		if err := s.Write(context.Background(), msg); err != nil {
			return err
		}
	}
}
