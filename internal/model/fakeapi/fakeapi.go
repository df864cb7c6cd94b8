// Package fakeapi is local HTTP servers that speak the wire formats of the
// model providers, for end-to-end tests: Anthropic's Messages API (what
// internal/model/anthropic calls) and OpenAI's Chat Completions API (what
// internal/model/openai calls). Each answers from a script of Replies, one
// a request, and records every request it received.
//
// Decisions:
//
//   - The servers listen on 127.0.0.1 only (net/http/httptest), and are
//     closed by the test's cleanup, which waits for requests in flight.
//   - Server.URL is the base URL to give the provider: the server's root
//     for Anthropic (the SDK posts to {base}/v1/messages), the server's
//     /v1 for OpenAI (the SDK posts to {base}/chat/completions, so to
//     /v1/chat/completions). Any other path or method is answered 404 in
//     the provider's error format and fails the test, as does a body that
//     is not JSON; neither takes a Reply.
//   - The tools' schemas of every request are checked as the hosted APIs
//     check them (internal/model/schema's rules; schema.go), always: a
//     request with a tool whose schema the provider refuses, or one the
//     schema package would have to repair (the API refuses it as it is),
//     is recorded, then answered HTTP 400 in the provider's format
//     (OpenAI: "Invalid schema for function '<name>': In context=(...),
//     ...", type invalid_request_error, param
//     tools[<i>].function.parameters, code invalid_function_parameters;
//     Anthropic: invalid_request_error, "tools.<i>.custom.input_schema:
//     ..."); it takes no Reply, is not counted as answered, and
//     SchemaRefusals lists its message. It doesn't fail the test: a host
//     that sends such a schema is what a test may be showing.
//   - Each request takes the next Reply, in the order requests arrive;
//     when they run out the answer is an empty text that ends the turn.
//     The bodies and headers of all requests (the ones that failed the
//     test included) are recorded, in arrival order.
//   - "stream": true is answered with server-sent events as the provider
//     sends them; otherwise with the whole answer as one JSON object. Text
//     is streamed word by word (each piece ends after its space), a tool
//     call's arguments in two or three pieces split at character
//     boundaries, so the providers' accumulation is exercised.
//   - Anthropic: message_start (usage.input_tokens, output_tokens 1), a
//     text block (when there is text, or nothing else), one tool_use block
//     a call (content_block_start with input {}, input_json_delta pieces,
//     content_block_stop), message_delta (stop_reason, usage.output_tokens)
//     and message_stop.
//   - OpenAI: a first chunk with the role and empty content, content
//     deltas, one tool call a tool_calls index (a first delta with its id,
//     type and name, then argument pieces), a chunk with the finish reason,
//     then, when stream_options.include_usage is set, a chunk with no
//     choices and the usage; then data: [DONE]. Stop reasons are given in
//     Anthropic's words and mapped: end_turn → stop, tool_use →
//     tool_calls, max_tokens → length, refusal → content_filter; any other
//     is sent as it is.
//   - The model that answers is the request's "model".
//   - Token counts a Reply leaves at 0 are estimated as a token per four
//     bytes, plus one: of the request body for input, of the reply's text,
//     tool names and arguments for output.
//   - A test can hold answers (Hold, ReleaseOne, Release; Held, WaitHeld):
//     a request that arrives while answers are held is recorded, then
//     waits, before it takes a Reply, until the test lets it go, or until
//     its client goes away (it then takes no Reply, is not answered, and
//     WaitAbandoned counts it). The test's cleanup lets every held request
//     go before the server closes.
//   - A test can bound the bodies taken (Limit): a request whose body is
//     over the limit is recorded, then answered HTTP 413 in the provider's
//     error format (OpenAI: type invalid_request_error, code
//     request_too_large; Anthropic: type request_too_large), as the
//     providers refuse a request too large for them; it takes no Reply,
//     is not counted as answered, and Refused lists its size.
//   - A Reply can script a failure beyond an HTTP error (faults.go):
//     RetryAfter is sent as the Retry-After header of a Status failure;
//     Body replaces the error JSON with a raw body sent as it is (JSON
//     or text/plain, by whether it parses); Reset hijacks the connection
//     and drops it (a TCP reset where it can) without an answer;
//     StallAfter sends a streamed answer's first N events, flushed, then
//     nothing until the client goes away (StallBeforeHeaders: nothing at
//     all, not even the headers). A reset or a stall takes its Reply but
//     is not counted as answered; the test's cleanup ends a stall whose
//     client is still there, so the server can close.
//   - Times lists when each request arrived (those that failed the test
//     included), for tests of a caller's backoff.
package fakeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// WaitTimeout bounds Server.Wait.
const WaitTimeout = 30 * time.Second

// Reply is one scripted answer: text, tool calls, or both (text first).
type Reply struct {
	Text  string
	Calls []Call
	// Stop is the stop reason, in Anthropic's words: "" is end_turn, or
	// tool_use when Calls is not empty; max_tokens, refusal and others
	// may be given (see the package doc for OpenAI's).
	Stop string
	// InputTokens and OutputTokens are the usage reported; 0 estimates
	// them (see the package doc).
	InputTokens, OutputTokens int
	// Status, if not 0, makes the reply an HTTP error of that status in
	// the provider's error format, with Text as its message, instead of an
	// answer.
	Status int
	// RetryAfter, with a Status, is sent as the Retry-After header ("7",
	// or an HTTP-date).
	RetryAfter string
	// Body, with a Status, is the error's body, sent as it is in place of
	// the provider's error JSON.
	Body string
	// Reset: the server drops the connection without an answer.
	Reset bool
	// StallAfter, if not 0, makes a streamed answer stall: its first
	// StallAfter events are sent and flushed, then nothing until the
	// client goes away. StallBeforeHeaders stalls before the headers.
	StallAfter int
}

// Call is a tool call of a Reply.
type Call struct {
	// ID is the call's id; "" generates one.
	ID   string
	Name string
	// Args is the arguments, JSON object text, sent as it is ("" sends
	// {}); it is not checked, so a test may send malformed arguments.
	Args string
}

// Server is a fake provider API. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL to give the provider (Options.BaseURL).
	URL string

	t       testing.TB
	srv     *httptest.Server
	path    string
	answer  func(w http.ResponseWriter, a *answer)
	failure func(w http.ResponseWriter, status int, message string)

	mu       sync.Mutex
	replies  []Reply
	bodies   []json.RawMessage
	headers  []http.Header
	taken    int
	answered int
	progress chan struct{} // closed and replaced at each answer and hold

	holding bool            // requests arriving now are held
	held    []chan struct{} // the requests held, oldest first; closed to let one go
	gone    int             // held requests whose clients went away
	limit   int             // bodies over this many bytes are refused; 0: none
	refused []int           // the sizes of the bodies refused for the limit
	times   []time.Time     // when each request arrived
	quit    chan struct{}   // closed by the cleanup: stalls end

	schemaRefusals []string // the messages of the requests refused for their tools' schemas (schema.go)
}

// answer is one request's reply, with what the wire formats need.
type answer struct {
	Reply
	n      int    // 1 for the first request
	model  string // the request's
	stream bool
	usage  bool // OpenAI's stream_options.include_usage
	in     int  // InputTokens, estimated when 0
	out    int  // OutputTokens, estimated when 0
}

// NewAnthropic starts a server speaking Anthropic's Messages API, answering
// with replies in turn. The test's cleanup closes it.
func NewAnthropic(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := newServer(t, "/v1/messages", anthropicAnswer, anthropicFailure, replies)
	s.URL = s.srv.URL
	return s
}

// NewOpenAI starts a server speaking OpenAI's Chat Completions API,
// answering with replies in turn. The test's cleanup closes it.
func NewOpenAI(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := newServer(t, "/v1/chat/completions", openaiAnswer, openaiFailure, replies)
	s.URL = s.srv.URL + "/v1"
	return s
}

func newServer(t testing.TB, path string, ans func(http.ResponseWriter, *answer), fail func(http.ResponseWriter, int, string), replies []Reply) *Server {
	s := &Server{
		t:        t,
		path:     path,
		answer:   ans,
		failure:  fail,
		replies:  append([]Reply(nil), replies...),
		progress: make(chan struct{}),
		quit:     make(chan struct{}),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve)) // 127.0.0.1
	t.Cleanup(s.srv.Close)
	// Cleanups run last first: held requests go before Close waits for
	// them.
	t.Cleanup(s.Release)
	t.Cleanup(s.endStalls)
	return s
}

// Hold makes the requests that arrive from now on wait before they are
// answered, until ReleaseOne or Release lets them go.
func (s *Server) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding = true
}

// ReleaseOne lets the oldest held request go on to its answer; later
// requests are still held. It fails the test when none is held.
func (s *Server) ReleaseOne() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) == 0 {
		s.t.Errorf("fakeapi: ReleaseOne with no request held")
		return
	}
	close(s.held[0])
	s.held = s.held[1:]
}

// Release lets every held request go on, and stops holding: later
// requests are answered at once.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding = false
	for _, c := range s.held {
		close(c)
	}
	s.held = nil
}

// Held returns how many requests are held now.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// WaitHeld returns once at least n requests are held at once, and fails
// the test (t.Fatalf) if that has not happened within WaitTimeout. Like
// t.Fatalf, it must be called from the test's goroutine.
func (s *Server) WaitHeld(n int) {
	s.t.Helper()
	s.waitUntil(fmt.Sprintf("%d requests held", n), func() bool { return len(s.held) >= n })
}

// WaitAbandoned returns once at least n held requests have been given up
// because their clients went away (which the server learns a moment after
// the client does), and fails the test if that has not happened within
// WaitTimeout.
func (s *Server) WaitAbandoned(n int) {
	s.t.Helper()
	s.waitUntil(fmt.Sprintf("%d held requests abandoned", n), func() bool { return s.gone >= n })
}

// Limit makes the server refuse, with HTTP 413, every request whose body
// is over n bytes (0: no limit).
func (s *Server) Limit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = n
}

// Refused returns the sizes of the bodies refused for the limit, in
// order.
func (s *Server) Refused() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.refused...)
}

// waitUntil waits until cond holds (under s.mu), failing the test after
// WaitTimeout.
func (s *Server) waitUntil(what string, cond func() bool) {
	s.t.Helper()
	timer := time.NewTimer(WaitTimeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(), s.progress
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			s.t.Fatalf("fakeapi: no %s after %v", what, WaitTimeout)
			return
		}
	}
}

// changedLocked wakes the waits.
func (s *Server) changedLocked() {
	close(s.progress)
	s.progress = make(chan struct{})
}

// Add appends replies to the script.
func (s *Server) Add(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Requests returns the bodies of the requests received, in order.
func (s *Server) Requests() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]json.RawMessage, len(s.bodies))
	for i, b := range s.bodies {
		out[i] = bytes.Clone(b)
	}
	return out
}

// Headers returns the headers of the requests received, in order.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]http.Header, len(s.headers))
	for i, h := range s.headers {
		out[i] = h.Clone()
	}
	return out
}

// Answered returns how many requests have been answered in full from the
// script (an HTTP error Reply included; a request refused for its path,
// method or body not).
func (s *Server) Answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answered
}

// Wait returns once n requests have been answered in full, as Answered
// counts them (at once, if they have), and fails the test (t.Fatalf) if that has not happened
// within WaitTimeout. Like t.Fatalf, it must be called from the test's
// goroutine.
func (s *Server) Wait(n int) {
	s.t.Helper()
	timer := time.NewTimer(WaitTimeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		got, ch := s.answered, s.progress
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			s.t.Fatalf("fakeapi: %d requests answered after %v, want %d", got, WaitTimeout, n)
			return
		}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	s.mu.Lock()
	s.times = append(s.times, time.Now())
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	if err != nil {
		s.t.Errorf("fakeapi: reading the body of %s %s: %v", r.Method, r.URL.Path, err)
		s.failure(w, http.StatusBadRequest, "the body could not be read")
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != s.path {
		s.t.Errorf("fakeapi: got %s %s, want POST %s", r.Method, r.URL.Path, s.path)
		s.failure(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
		return
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.t.Errorf("fakeapi: the body of request %s is not JSON: %v", s.path, err)
		s.failure(w, http.StatusBadRequest, "the body is not JSON")
		return
	}
	if s.refuseSchemas(w, body) { // schema.go
		return
	}

	s.mu.Lock()
	if s.limit > 0 && len(body) > s.limit {
		s.refused = append(s.refused, len(body))
		limit := s.limit
		s.changedLocked()
		s.mu.Unlock()
		s.failure(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request too large: its body is %d bytes, over this server's limit of %d bytes.", len(body), limit))
		return
	}
	if s.holding {
		release := make(chan struct{})
		s.held = append(s.held, release)
		s.changedLocked()
		s.mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
			// The client went away: nothing to answer.
			s.mu.Lock()
			if i := slices.Index(s.held, release); i >= 0 {
				s.held = slices.Delete(s.held, i, i+1)
			}
			s.gone++
			s.changedLocked()
			s.mu.Unlock()
			return
		}
		if r.Context().Err() != nil {
			return
		}
		s.mu.Lock()
	}
	var rep Reply
	if s.taken < len(s.replies) {
		rep = s.replies[s.taken]
	}
	s.taken++
	a := &answer{Reply: rep, n: s.taken, model: req.Model, stream: req.Stream, usage: req.StreamOptions.IncludeUsage}
	s.mu.Unlock()

	a.in, a.out = rep.InputTokens, rep.OutputTokens
	if a.in == 0 {
		a.in = len(body)/4 + 1
	}
	if a.out == 0 {
		size := len(rep.Text)
		for _, c := range rep.Calls {
			size += len(c.Name) + len(c.Args)
		}
		a.out = size/4 + 1
	}
	if a.model == "" {
		a.model = "fake-model"
	}
	if s.fault(w, r, a) { // a reset or a stall: not answered
		return
	}
	if rep.Status != 0 {
		msg := rep.Text
		if msg == "" {
			msg = fmt.Sprintf("scripted failure (HTTP %d)", rep.Status)
		}
		s.fail(w, rep, msg)
	} else {
		s.answer(w, a)
	}

	s.mu.Lock()
	s.answered++
	s.changedLocked()
	s.mu.Unlock()
}

// args is a call's arguments, {} when empty.
func (c Call) args() string {
	if c.Args == "" {
		return "{}"
	}
	return c.Args
}

// argsJSON is a call's arguments as a JSON value for a whole answer: as
// they are when JSON, else as a string.
func (c Call) argsJSON() json.RawMessage {
	if a := c.args(); json.Valid([]byte(a)) {
		return json.RawMessage(a)
	}
	b, _ := json.Marshal(c.Args)
	return b
}

// words splits text after each space: "a b c" is "a ", "b ", "c".
func words(text string) []string {
	var out []string
	for _, w := range strings.SplitAfter(text, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// pieces splits s into three pieces (two or one when it is that short) at
// character boundaries.
func pieces(s string) []string {
	n := utf8.RuneCountInString(s)
	k := min(n, 3)
	if k <= 1 {
		return []string{s}
	}
	out := make([]string, 0, k)
	for i := range k {
		size := n/k + btoi(i < n%k)
		j := 0
		for range size {
			_, w := utf8.DecodeRuneInString(s[j:])
			j += w
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sse starts an event stream.
func sse(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// event writes one server-sent event (no event: line when name is "") and
// flushes it.
func event(w http.ResponseWriter, name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err) // the data are this package's maps
	}
	if name != "" {
		fmt.Fprintf(w, "event: %s\n", name)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type obj = map[string]any

// anthropicAnswer answers as the Messages API does.
func anthropicAnswer(w http.ResponseWriter, a *answer) {
	stop := a.Stop
	if stop == "" {
		stop = "end_turn"
		if len(a.Calls) > 0 {
			stop = "tool_use"
		}
	}
	id := fmt.Sprintf("msg_fake_%d", a.n)
	callID := func(i int, c Call) string {
		if c.ID != "" {
			return c.ID
		}
		return fmt.Sprintf("toolu_fake_%d_%d", a.n, i+1)
	}
	withText := a.Text != "" || len(a.Calls) == 0

	if !a.stream {
		content := []any{}
		if withText {
			content = append(content, obj{"type": "text", "text": a.Text})
		}
		for i, c := range a.Calls {
			content = append(content, obj{"type": "tool_use", "id": callID(i, c), "name": c.Name, "input": c.argsJSON()})
		}
		writeJSON(w, http.StatusOK, obj{
			"id": id, "type": "message", "role": "assistant", "model": a.model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": obj{"input_tokens": a.in, "output_tokens": a.out},
		})
		return
	}

	sse(w)
	event(w, "message_start", obj{"type": "message_start", "message": obj{
		"id": id, "type": "message", "role": "assistant", "model": a.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": a.in, "output_tokens": 1},
	}})
	index := 0
	if withText {
		event(w, "content_block_start", obj{"type": "content_block_start", "index": index, "content_block": obj{"type": "text", "text": ""}})
		event(w, "ping", obj{"type": "ping"})
		for _, d := range words(a.Text) {
			event(w, "content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": obj{"type": "text_delta", "text": d}})
		}
		event(w, "content_block_stop", obj{"type": "content_block_stop", "index": index})
		index++
	}
	for i, c := range a.Calls {
		event(w, "content_block_start", obj{"type": "content_block_start", "index": index,
			"content_block": obj{"type": "tool_use", "id": callID(i, c), "name": c.Name, "input": obj{}}})
		for _, p := range pieces(c.args()) {
			event(w, "content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": obj{"type": "input_json_delta", "partial_json": p}})
		}
		event(w, "content_block_stop", obj{"type": "content_block_stop", "index": index})
		index++
	}
	event(w, "message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": stop, "stop_sequence": nil},
		"usage": obj{"output_tokens": a.out}})
	event(w, "message_stop", obj{"type": "message_stop"})
}

// anthropicFailure answers with the Messages API's error JSON.
func anthropicFailure(w http.ResponseWriter, status int, message string) {
	typ := "api_error"
	switch status {
	case http.StatusBadRequest:
		typ = "invalid_request_error"
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusPaymentRequired:
		typ = "billing_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case http.StatusGatewayTimeout:
		typ = "timeout_error"
	case 529:
		typ = "overloaded_error"
	}
	writeJSON(w, status, obj{"type": "error", "error": obj{"type": typ, "message": message}, "request_id": "req_fake"})
}

// openaiFinish is a stop reason in Chat Completions' words.
func openaiFinish(stop string, calls bool) string {
	switch stop {
	case "":
		if calls {
			return "tool_calls"
		}
		return "stop"
	case "end_turn":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	case "refusal":
		return "content_filter"
	}
	return stop
}

// openaiAnswer answers as the Chat Completions API does.
func openaiAnswer(w http.ResponseWriter, a *answer) {
	finish := openaiFinish(a.Stop, len(a.Calls) > 0)
	id := fmt.Sprintf("chatcmpl-fake-%d", a.n)
	created := time.Now().Unix()
	callID := func(i int, c Call) string {
		if c.ID != "" {
			return c.ID
		}
		return fmt.Sprintf("call_fake_%d_%d", a.n, i+1)
	}
	usage := obj{"prompt_tokens": a.in, "completion_tokens": a.out, "total_tokens": a.in + a.out}

	if !a.stream {
		msg := obj{"role": "assistant", "content": nil, "refusal": nil}
		if a.Text != "" || len(a.Calls) == 0 {
			msg["content"] = a.Text
		}
		if len(a.Calls) > 0 {
			var calls []any
			for i, c := range a.Calls {
				calls = append(calls, obj{"id": callID(i, c), "type": "function", "function": obj{"name": c.Name, "arguments": c.args()}})
			}
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, obj{
			"id": id, "object": "chat.completion", "created": created, "model": a.model,
			"choices": []any{obj{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   usage,
		})
		return
	}

	chunk := func(delta obj, finish any) obj {
		return obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": a.model,
			"choices": []any{obj{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	sse(w)
	event(w, "", chunk(obj{"role": "assistant", "content": ""}, nil))
	for _, d := range words(a.Text) {
		event(w, "", chunk(obj{"content": d}, nil))
	}
	for i, c := range a.Calls {
		event(w, "", chunk(obj{"tool_calls": []any{obj{"index": i, "id": callID(i, c), "type": "function",
			"function": obj{"name": c.Name, "arguments": ""}}}}, nil))
		for _, p := range pieces(c.args()) {
			event(w, "", chunk(obj{"tool_calls": []any{obj{"index": i, "function": obj{"arguments": p}}}}, nil))
		}
	}
	event(w, "", chunk(obj{}, finish))
	if a.usage {
		event(w, "", obj{"id": id, "object": "chat.completion.chunk", "created": created, "model": a.model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// openaiFailure answers with the Chat Completions API's error JSON.
func openaiFailure(w http.ResponseWriter, status int, message string) {
	typ, code := "server_error", any(nil)
	switch {
	case status == http.StatusUnauthorized:
		typ, code = "invalid_request_error", "invalid_api_key"
	case status == http.StatusNotFound:
		typ, code = "invalid_request_error", "not_found"
	case status == http.StatusRequestEntityTooLarge:
		typ, code = "invalid_request_error", "request_too_large"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 400 && status < 500:
		typ = "invalid_request_error"
	}
	writeJSON(w, status, obj{"error": obj{"message": message, "type": typ, "param": nil, "code": code}})
}
