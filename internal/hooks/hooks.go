// Package hooks runs the host's side of MCPL's context hooks (SPEC §10):
// context/beforeInference, the request that lets a server observe an
// inference and inject context into it, and inference/lifecycle, the
// metadata-only notification of an inference's start and end.
//
// Decisions, in SPEC and RFC-010 terms:
//
//   - Who is asked. Before sends context/beforeInference to every target
//     granted contextHooks.beforeInference.observe or any
//     contextHooks.beforeInference.inject.* leaf, read from the target's
//     grant when Before decides to call it. Observation and injection are
//     granted independently (§10.1): a server with only an inject leaf is
//     still called, and is sent userMessage null. The userMessage key is
//     always present; it holds the user's text only for a target granted
//     observe, and null otherwise (and for continued generation).
//   - Fail-open (§10.6). Each call is bounded by Options.Timeout (5 s by
//     default). A timeout, an error answer, a closed connection, an answer
//     that arrives after the inference moved on and a malformed answer all
//     contribute nothing, and are logged; the inference goes on.
//   - Authorization (§10.8, §13.4). Each injection is authorized on its own,
//     by its typed position against the grant the target holds when the
//     answer arrives (Target.Grant is read again then): position "system"
//     needs contextHooks.beforeInference.inject.system, and so on. The
//     answer's featureSet and an injection's namespace take no part in the
//     decision. An injection at an ungranted or unknown position, or one
//     that is malformed (no namespace, no content, content that is neither
//     a string nor an array of content blocks each with a type, metadata
//     that is not an object), is dropped; the drops of one answer are
//     logged in one line.
//   - Order (§10.8). Injections are grouped by position in the order
//     system, beforeUser, afterUser; within a position, in the order of the
//     targets given to Before (not the order answers arrived), then in the
//     order the server listed them.
//   - Content. A plain-string content becomes one {"type":"text","text":…}
//     block (§10.3); blocks are passed on as the server wrote them (each a
//     JSON object with a string type; a text block must have a string
//     text), for whoever applies the injection to decide what it can show.
//   - Deprecation (RFC-010). Injection is deprecated in MCPL 0.5; a Runner
//     logs one warning per server, the first time that server returns a
//     non-empty set of authorized injections.
//   - Loop prevention (§10.7). InHook reports whether a
//     context/beforeInference request to a server is in flight, from just
//     before Target.Call is made until it returns, so the host can refuse
//     that server's inference/request meanwhile.
//   - Lifecycle (§10.5). Start sends phase "started" to every target
//     granted inferenceLifecycle, with model only to those granted
//     modelInfo. The first of Completed, Aborted and Failed sends the one
//     terminal phase to the targets "started" reached (a target whose
//     "started" could not be sent gets no terminal: a terminal without a
//     started is itself a defect), each re-checked for inferenceLifecycle
//     (and modelInfo) at send time. Usage goes with "completed" only. A
//     later terminal sends nothing and is logged once as the caller's
//     defect. Notifications never carry message content: their params have
//     no field that could hold it.
//
// Grants are read through Target.Grant each time they matter, never kept:
// a grant that narrows while a call is in flight narrows what is accepted.
package hooks

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/protocol"
)

// Methods this package sends.
const (
	// MethodBeforeInference is the hook request (SPEC §10.1).
	MethodBeforeInference = "context/beforeInference"
	// MethodLifecycle is the lifecycle notification (SPEC §10.5).
	MethodLifecycle = "inference/lifecycle"
)

// Capability paths this package checks.
const (
	PathObserve          = "contextHooks.beforeInference.observe"
	PathInjectSystem     = "contextHooks.beforeInference.inject.system"
	PathInjectBeforeUser = "contextHooks.beforeInference.inject.beforeUser"
	PathInjectAfterUser  = "contextHooks.beforeInference.inject.afterUser"
	PathLifecycle        = "inferenceLifecycle"
	PathModelInfo        = "modelInfo"
)

// Injection positions (SPEC §10.4), in the order Before returns them.
const (
	PositionSystem     = "system"
	PositionBeforeUser = "beforeUser"
	PositionAfterUser  = "afterUser"
)

// positions pairs each position with the leaf that authorizes it, in the
// order Before returns injections.
var positions = [...]struct{ name, path string }{
	{PositionSystem, PathInjectSystem},
	{PositionBeforeUser, PathInjectBeforeUser},
	{PositionAfterUser, PathInjectAfterUser},
}

// positionPath returns the grant leaf that authorizes an injection at pos,
// and false for a position SPEC §10.4 does not define.
func positionPath(pos string) (string, bool) {
	for _, p := range positions {
		if p.name == pos {
			return p.path, true
		}
	}
	return "", false
}

// DefaultTimeout bounds one context/beforeInference call when
// Options.Timeout is 0 (SPEC §10.6 recommends 5 seconds).
const DefaultTimeout = 5 * time.Second

// Target is one server as the hooks see it.
type Target struct {
	Server string
	// Grant returns the grant current now: read when deciding to call and
	// again when the answer arrives. Nil is the empty grant.
	Grant func() grant.Grant
	// Call sends one request to the server, decoding its result into
	// result (a pointer). It should return when ctx ends; one that does
	// not is left to finish on its own goroutine (Before does not wait for
	// it, and its answer is not used), and InHook stays true until it
	// returns. Nil: the server cannot be asked, and is skipped (logged).
	Call func(ctx context.Context, method string, params, result any) error
	// Notify sends one notification to the server. Nil: nothing is sent.
	Notify func(method string, params any) error
}

// grantNow returns the target's grant as it stands now.
func (t Target) grantNow() grant.Grant {
	if t.Grant == nil {
		return grant.Grant{}
	}
	return t.Grant()
}

// Turn is one inference of an agent.
type Turn struct {
	InferenceID, ConversationID string
	// TurnIndex is 0-based.
	TurnIndex int
	// UserMessage is the user's text this inference, nil for continued
	// generation. Only a target granted observe is sent it.
	UserMessage *string
	// Model is the model about to run, described to servers as ModelInfo.
	Model model.Info
}

// modelInfo is the turn's model as SPEC's ModelInfo: contextWindow is
// omitted when unknown (0); model.Info has no capabilities, so none are
// claimed.
func (t Turn) modelInfo() *protocol.ModelInfoResult {
	info := t.Model.Wire()
	return &info
}

// Injection is one authorized context injection.
type Injection struct {
	Server, Namespace string
	// Position is PositionSystem, PositionBeforeUser or PositionAfterUser.
	Position string
	// Content is MCP content blocks, each a JSON object with a type; a
	// plain-string content is one {"type":"text","text":…} block.
	Content []json.RawMessage
	// Metadata is the injection's metadata object, nil when it has none.
	Metadata json.RawMessage
}

// Options configure a Runner.
type Options struct {
	// Logger receives the hooks' diagnostics; nil discards them.
	Logger *slog.Logger
	// Timeout bounds each context/beforeInference call; 0 is
	// DefaultTimeout.
	Timeout time.Duration
}

// Runner runs the hooks for a host. It is safe for concurrent use; one
// Runner should serve all of a host's agents so that InHook and the
// deprecation warning see every call.
type Runner struct {
	log     *slog.Logger
	timeout time.Duration

	mu       sync.Mutex
	inFlight map[string]int  // server → context/beforeInference calls in flight
	warned   map[string]bool // servers warned that injection is deprecated
}

// New returns a Runner.
func New(opts Options) *Runner {
	r := &Runner{log: opts.Logger, timeout: opts.Timeout, inFlight: map[string]int{}, warned: map[string]bool{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	return r
}

// InHook reports whether a context/beforeInference request to server is in
// flight (SPEC §10.7 loop prevention: the host refuses an
// inference/request from that server meanwhile).
func (r *Runner) InHook(server string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight[server] > 0
}

func (r *Runner) enter(server string) {
	r.mu.Lock()
	r.inFlight[server]++
	r.mu.Unlock()
}

func (r *Runner) leave(server string) {
	r.mu.Lock()
	if r.inFlight[server]--; r.inFlight[server] <= 0 {
		delete(r.inFlight, server)
	}
	r.mu.Unlock()
}

// warnDeprecated logs, once per server, that the server injects context,
// which RFC-010 deprecates.
func (r *Runner) warnDeprecated(server string) {
	r.mu.Lock()
	first := !r.warned[server]
	r.warned[server] = true
	r.mu.Unlock()
	if first {
		r.log.Warn("context injection is deprecated: this server's authorized contextInjections are applied for the rest of MCPL 0.5, and MCPL 0.6 ignores them (RFC-010); the server should move to channels or tools",
			slog.String("server", server))
	}
}
