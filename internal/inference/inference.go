// Package inference answers a server's inference/request (SPEC §11) and
// model/info (SPEC §12) with the host's models.
//
// Decisions, with the answers a server gets:
//
//   - Loop prevention (SPEC §10.7). When the caller says the request
//     arrived while a context/beforeInference request to that server was
//     in flight (Serve's inHook, read as it arrived), it is refused with -32600 Invalid Request: a context
//     hook may not ask for inference. This is checked first, whatever the
//     params.
//   - Grant. The request needs inferenceRequest in the grant current at
//     receipt (session admission checks it too; Serve does not rely on
//     that), else -32002 with data {capability: "inferenceRequest"}.
//     featureSet is required, and must be declared and enabled in the
//     grant: a missing one is -32001 with data {featureSet: ""}, an
//     undeclared one -32003, a disabled one -32001 naming why, both with
//     data {featureSet}, in push/event's words (internal/session). stream
//     true needs inferenceRequest.streaming, else -32002 with data
//     {capability: "inferenceRequest.streaming"}.
//   - Params (-32602 Invalid params, the message saying what and where).
//     messages is a non-empty array of {role: "user"|"assistant", content:
//     string | content blocks}; a string is one text block; a text block
//     is taken, an inline image block (data and mimeType) becomes a model
//     image block, and any other block (an image by uri, audio, resource)
//     is refused naming messages[i].content[j]. preferences.maxTokens, if
//     given, is a positive integer of at most MaxMaxTokens; without it the
//     model is asked for DefaultMaxTokens. Other preference keys are
//     advisory and ignored (temperature too: model.Request has no field
//     for it).
//   - Routing. Options.Route names the model for (server, featureSet). No
//     route is CodeNoRoute (-32000, JSON-RPC's implementation-defined
//     server-error range) with data {featureSet}: not -32002, since the
//     capability is granted, nor -32001, since the feature set is
//     enabled; what is missing is the host operator's inference route
//     (config key "inference").
//   - Answer (SPEC §11.3). {content: the response's text blocks joined,
//     model: the response's model (else the model's Info().ID),
//     finishReason, usage: the provider's token counts as reported, never
//     made up}. finishReason is "max_tokens" for model.MaxTokens,
//     "stop_sequence" passed through if a model reports it, and "end_turn"
//     otherwise (model.EndTurn, and model.StopToolUse, which cannot
//     usefully happen since no tools are offered: the text so far is the
//     answer). A refusal (model.Refused) is not dressed up as an answer:
//     it is -32603 saying the model declined, data {retryable: false}.
//   - Streaming (SPEC §11.4). With stream true each text delta is sent as
//     inference/chunk {requestId: the request's JSON-RPC id as sent,
//     index: 0, 1, 2…, delta} through notify, in order, before Serve
//     returns; a delta the model hands over after Generate returned is
//     dropped and logged. A chunk that fails to send is logged (once per
//     request) and the request goes on: the full answer follows anyway.
//   - Failures. A model failure (*model.Error) is -32603 whose message
//     carries the error's Text (which holds no secrets) and data
//     {retryable}. ctx ending first is -32603 saying the host stopped
//     waiting, data {retryable: true}. Any other error is -32603 that
//     points to the host's log, where the error is.
//   - Audit (SPEC §11.5). Each served request is logged with server,
//     feature set, agent, result model and usage; refusals and failures
//     are logged too.
//
// ModelInfo answers model/info; with no model it answers -32601 saying
// this host has no model to describe (SPEC §12: never silence).
package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/protocol"
)

// MethodChunk is the streaming notification (SPEC §11.4).
const MethodChunk = "inference/chunk"

// Capability paths this package checks.
const (
	PathRequest   = "inferenceRequest"
	PathStreaming = "inferenceRequest.streaming"
)

// CodeNoRoute answers an inference/request no inference route serves.
const CodeNoRoute = -32000

// DefaultMaxTokens is the output budget when preferences.maxTokens is not
// given.
const DefaultMaxTokens = 1024

// Options configure a Server.
type Options struct {
	// Logger receives the audit and diagnostics; nil discards them.
	Logger *slog.Logger
	// Route names the model serving (server, featureSet), with the agent
	// it belongs to, for the audit; ok false when no route matches. Nil
	// routes nothing.
	Route func(server, featureSet string) (m model.Model, agent string, ok bool)
}

// Server answers inference/request. It is safe for concurrent use.
type Server struct {
	log   *slog.Logger
	route func(server, featureSet string) (model.Model, string, bool)
}

// New returns a Server.
func New(opts Options) *Server {
	s := &Server{log: opts.Logger, route: opts.Route}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Result is inference/request's answer (SPEC §11.3).
type Result struct {
	Content      string `json:"content"`
	Model        string `json:"model"`
	FinishReason string `json:"finishReason"`
	Usage        Usage  `json:"usage"`
}

// Usage is the tokens the model reported using.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// chunkParams is inference/chunk's params (SPEC §11.4).
type chunkParams struct {
	RequestID json.RawMessage `json:"requestId"`
	Index     int             `json:"index"`
	Delta     string          `json:"delta"`
}

// Serve answers one inference/request from server: id is the JSON-RPC
// request id (raw JSON, the requestId of chunks), notify sends a
// notification to that server. g, the grant, and inHook, whether a
// context/beforeInference request to the server was in flight, are read
// by the caller as the request arrived: the hook's answer may come
// between its arrival and the goroutine that serves it, and a request
// sent from inside the hook is refused all the same. Serve blocks until
// the model answers or ctx ends (the caller runs it off its dispatch
// goroutine). The answer is a Result or a *protocol.Error; see the package
// doc.
func (s *Server) Serve(ctx context.Context, server string, g grant.Grant, inHook bool, id json.RawMessage, params json.RawMessage, notify func(method string, params any) error) (any, error) {
	if inHook {
		return nil, s.refuse(server, "", protocol.NewError(protocol.CodeInvalidRequest,
			"inference/request refused: a context hook may not ask for inference (SPEC §10.7), and a context/beforeInference request to this server is in flight; ask outside the hook's response path, after answering it", nil))
	}
	if !g.Has(PathRequest) {
		return nil, s.refuse(server, "", protocol.NewError(protocol.CodeCapabilityDenied,
			fmt.Sprintf("inference/request rejected: capability %q is not in the effective grant", PathRequest), map[string]string{"capability": PathRequest}))
	}
	req, e := parse(params, g)
	if e != nil {
		return nil, s.refuse(server, req.featureSet, e)
	}
	var m model.Model
	var agent string
	ok := false
	if s.route != nil {
		m, agent, ok = s.route(server, req.featureSet)
	}
	if !ok || m == nil {
		return nil, s.refuse(server, req.featureSet, protocol.NewError(CodeNoRoute,
			fmt.Sprintf("inference/request refused: no model serves inference for server %q, feature set %q on this host: none of its inference routes (config key \"inference\") matches", server, req.featureSet),
			map[string]string{"featureSet": req.featureSet}))
	}
	log := s.log.With(slog.String("server", server), slog.String("feature_set", req.featureSet), slog.String("agent", agent))
	if req.conversationID != "" {
		log = log.With(slog.String("conversation_id", req.conversationID))
	}
	mreq := model.Request{Messages: req.messages, MaxTokens: req.maxTokens}
	var st *stream
	if req.stream {
		st = &stream{id: requestID(id), notify: notify, log: log}
		mreq.OnText = st.send
	}
	resp, err := m.Generate(ctx, mreq)
	chunks := st.close()
	if err != nil {
		return nil, s.failed(ctx, log, err)
	}
	if resp.Stop == model.Refused {
		e := protocol.NewError(protocol.CodeInternalError,
			"inference/request failed: the model declined to answer (a refusal); asking again with the same messages is unlikely to help",
			map[string]any{"retryable": false, "reason": "refusal"})
		log.Warn("inference/request refused by the model", slog.String("model", resp.Model))
		return nil, e
	}
	res := Result{
		Content:      resp.Text(),
		Model:        resp.Model,
		FinishReason: finishReason(resp.Stop),
		Usage:        Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens},
	}
	if res.Model == "" {
		res.Model = m.Info().ID
	}
	log.Info("inference/request served", slog.String("model", res.Model),
		slog.Int("input_tokens", res.Usage.InputTokens), slog.Int("output_tokens", res.Usage.OutputTokens),
		slog.String("finish_reason", res.FinishReason), slog.Bool("stream", req.stream), slog.Int("chunks", chunks))
	return res, nil
}

// finishReason maps a model's stop reason to SPEC §11.3's (see the
// package doc).
func finishReason(stop model.StopReason) string {
	switch stop {
	case model.MaxTokens:
		return "max_tokens"
	case "stop_sequence":
		return "stop_sequence"
	}
	return "end_turn"
}

// refuse logs a refused request and returns its error.
func (s *Server) refuse(server, featureSet string, e *protocol.Error) *protocol.Error {
	s.log.Info("inference/request refused", slog.String("server", server), slog.String("feature_set", featureSet),
		slog.Int64("code", e.Code), slog.String("reason", e.Message))
	return e
}

// failed maps a model's failure to the error answered (see the package
// doc), and logs it.
func (s *Server) failed(ctx context.Context, log *slog.Logger, err error) *protocol.Error {
	var me *model.Error
	switch {
	case ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		log.Info("inference/request abandoned: the host stopped waiting for the model", slog.String("error", err.Error()))
		return protocol.NewError(protocol.CodeInternalError,
			"inference/request abandoned: the host stopped waiting for the model (the request was cancelled, or the host is shutting down)",
			map[string]bool{"retryable": true})
	case errors.As(err, &me):
		log.Warn("inference/request failed: the model failed", slog.String("error", me.Text), slog.Bool("retryable", me.Retryable))
		return protocol.NewError(protocol.CodeInternalError, "inference/request failed: the model failed: "+me.Text,
			map[string]bool{"retryable": me.Retryable})
	}
	log.Error("inference/request failed: the model failed", slog.String("error", err.Error()))
	return protocol.NewError(protocol.CodeInternalError, "inference/request failed: the model failed; the host's log says why",
		map[string]bool{"retryable": false})
}

// requestID returns id as chunks carry it: null when there is none.
func requestID(id json.RawMessage) json.RawMessage {
	if id = bytes.TrimSpace(id); len(id) == 0 {
		return nil
	}
	return id
}

// stream sends a request's text deltas as inference/chunk, in order, until
// it is closed.
type stream struct {
	id     json.RawMessage
	notify func(method string, params any) error
	log    *slog.Logger

	mu     sync.Mutex
	next   int  // the next chunk's index
	failed bool // a chunk failed to send (logged once)
	closed bool
}

// send is the model's OnText: it sends delta as the next chunk.
func (st *stream) send(delta string) {
	if delta == "" {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		st.log.Warn("inference/chunk not sent: the model handed over text after it answered")
		return
	}
	p := chunkParams{RequestID: st.id, Index: st.next, Delta: delta}
	st.next++
	var err error
	if st.notify == nil {
		err = errors.New("no way to notify the server")
	} else {
		err = st.notify(MethodChunk, p)
	}
	if err != nil && !st.failed {
		st.failed = true
		st.log.Warn("inference/chunk not sent; the request goes on and its answer holds the whole text (later failures are not logged)",
			slog.Int("index", p.Index), slog.String("error", err.Error()))
	}
}

// close stops the stream and returns how many chunks it made. A nil
// stream made none.
func (st *stream) close() int {
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	return st.next
}

// ModelInfo answers model/info with m's Info (SPEC §12.2): {id, vendor,
// contextWindow (omitted when 0, unknown)}; model.Info has no
// capabilities, so none are claimed. With no model it answers -32601
// saying so, never silence.
func ModelInfo(m model.Model) (any, error) {
	if m == nil {
		return nil, protocol.NewError(protocol.CodeMethodNotFound,
			"model/info unavailable: this host has no model to describe to this server (no agent's model serves it)", nil)
	}
	return m.Info().Wire(), nil
}
