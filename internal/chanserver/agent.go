package chanserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// The server declares its agent-facing capabilities in feature sets that
// a host can enable apart, since a feature set is enabled only when every
// capability it uses is granted: push events (FeatureSet, which its push
// events name), inference (InferFeatureSet, which its inference requests
// name: a host grants inferenceRequest only where a route serves it),
// hooks (HooksFeatureSet, which its hook answers name), and injection
// (InjectFeatureSet, granted only when host policy names it).
const (
	FeatureSet       = "test.agent"
	InferFeatureSet  = "test.infer"
	HooksFeatureSet  = "test.hooks"
	InjectFeatureSet = "test.inject"
)

// FeatureSets are the declared feature sets' uses, by name.
var FeatureSets = map[string][]string{
	FeatureSet:       {"pushEvents"},
	InferFeatureSet:  {"inferenceRequest", "inferenceRequest.streaming"},
	HooksFeatureSet:  {"inferenceLifecycle", "modelInfo", "contextHooks.beforeInference.observe"},
	InjectFeatureSet: {"contextHooks.beforeInference.inject.system", "contextHooks.beforeInference.inject.beforeUser", "contextHooks.beforeInference.inject.afterUser"},
}

// The host's methods the protocol package has no names for.
const (
	methodBeforeInference = "context/beforeInference"
	methodLifecycle       = "inference/lifecycle"
	methodChunk           = "inference/chunk"
)

// Hook modes (the hook tool's mode).
const (
	hookAnswer = "answer"
	hookFail   = "fail"
	hookHang   = "hang"
	hookInfer  = "infer"
)

// hookScript is how context/beforeInference requests are answered.
type hookScript struct {
	mode       string          // one of the hook modes; "" is hookAnswer
	injections json.RawMessage // for hookAnswer; nil is []
	delay      time.Duration
}

// hookEntry is one recorded message of the hooks log.
type hookEntry struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// idSlotKey is the context key under which a call asks watchStream for its
// request's id (the value is an *int64).
type idSlotKey struct{}

// record appends a message to the hooks log.
func (srv *server) record(req *wire.Request) {
	params := req.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	srv.mu.Lock()
	srv.hooksLog = append(srv.hooksLog, hookEntry{Method: req.Method, Params: append(json.RawMessage{}, params...)})
	srv.changed.Broadcast()
	srv.mu.Unlock()
}

// chunk records an inference/chunk notification's delta under its
// requestId.
func (srv *server) chunk(req *wire.Request) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Delta     string          `json:"delta"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	key := requestKey(p.RequestID)
	srv.mu.Lock()
	srv.chunks[key] = append(srv.chunks[key], p.Delta)
	srv.mu.Unlock()
}

// requestKey is a request id as the chunks map keys it: a number's text, or
// a string's value, so that 7 and "7" are the same request.
func requestKey(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return strings.TrimSpace(string(raw))
}

// beforeInference answers context/beforeInference as the hook script says.
func (srv *server) beforeInference(ctx context.Context, req *wire.Request) (any, error) {
	srv.record(req)
	srv.mu.Lock()
	script := srv.hook
	srv.mu.Unlock()
	if req.IsNotification() {
		return nil, nil
	}
	if script.mode == hookAnswer || script.mode == "" {
		if script.delay == 0 {
			return hookResult(script.injections), nil
		}
	}
	// Every other answer waits, on a goroutine of its own: the connection's
	// dispatch goes on meanwhile.
	reply := req.Defer()
	srv.work.Go(func() {
		if script.mode == hookHang {
			<-ctx.Done()
			reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "the connection ended"})
			return
		}
		if script.delay > 0 {
			t := time.NewTimer(script.delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "the connection ended"})
				return
			}
		}
		switch script.mode {
		case hookFail:
			reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "context/beforeInference failed, as scripted"})
		case hookInfer:
			// SPEC §10.7: a hook must not trigger inference/request. This
			// one does, so a host's refusal can be seen in the injection.
			var res json.RawMessage
			err := srv.peer.Call(ctx, protocol.MethodInferenceRequest, map[string]any{
				"featureSet": InferFeatureSet,
				"messages":   []map[string]string{{"role": "user", "content": "summarise this turn (asked from inside context/beforeInference)"}},
			}, &res)
			text, _ := json.Marshal(outcome(res, err))
			injections, _ := json.Marshal([]map[string]any{{
				"namespace": "loop", "position": "system",
				"content": []map[string]string{{"type": "text", "text": string(text)}},
			}})
			reply(hookResult(injections), nil)
		default:
			reply(hookResult(script.injections), nil)
		}
	})
	return nil, nil
}

// hookResult is a beforeInference answer carrying injections (raw; nil is
// none).
func hookResult(injections json.RawMessage) map[string]any {
	if len(injections) == 0 {
		injections = json.RawMessage("[]")
	}
	return map[string]any{"featureSet": HooksFeatureSet, "contextInjections": injections}
}

// outcome renders a call's outcome: {"result": ...}, or {"error": ...}
// with the host's error object, or a message alone when no answer came.
func outcome(res json.RawMessage, err error) map[string]any {
	if err == nil {
		if len(res) == 0 {
			res = json.RawMessage("null")
		}
		return map[string]any{"result": res}
	}
	if e, ok := errors.AsType[*protocol.Error](err); ok {
		return map[string]any{"error": e}
	}
	return map[string]any{"error": map[string]string{"message": err.Error()}}
}

// agentTool runs the tools push, infer, model_info, hook and hooks_log.
func (srv *server) agentTool(ctx context.Context, req *wire.Request, name string, a toolArgs) (any, error) {
	switch name {
	case "hook":
		mode := a.Mode
		if mode == "" {
			mode = hookAnswer
		}
		switch mode {
		case hookAnswer, hookFail, hookHang, hookInfer:
		default:
			return protocol.TextResult(fmt.Sprintf("unknown hook mode %q: answer, fail, hang or infer", a.Mode), true), nil
		}
		if len(a.Injections) > 0 && !json.Valid(a.Injections) {
			return protocol.TextResult("injections is not JSON", true), nil
		}
		srv.mu.Lock()
		srv.hook = hookScript{mode: mode, injections: append(json.RawMessage{}, a.Injections...), delay: time.Duration(a.DelayMs) * time.Millisecond}
		srv.mu.Unlock()
		return jsonResult("scripted"), nil
	case "hooks_log":
		// Waited for on a goroutine of its own, as log is.
		reply := req.Defer()
		matches := func() []hookEntry {
			out := []hookEntry{}
			for _, e := range srv.hooksLog {
				if a.Method == "" || e.Method == a.Method {
					out = append(out, e)
				}
			}
			return out
		}
		missing := fmt.Sprintf("fewer than %d hook messages", a.Count)
		if a.Method != "" {
			missing = fmt.Sprintf("fewer than %d %s messages", a.Count, a.Method)
		}
		srv.work.Go(func() {
			reply(srv.waitFor(ctx, missing, func() bool { return len(matches()) >= a.Count }, func() any { return matches() }))
		})
		return nil, nil
	}

	// The rest call the host: the answer may take a while, and the host may
	// send this server requests meanwhile (a hook, a chunk), so the call is
	// made on a goroutine of its own.
	reply := req.Defer()
	srv.work.Go(func() {
		switch name {
		case "push":
			reply(jsonResult(srv.push(ctx, a)), nil)
		case "infer":
			reply(jsonResult(srv.infer(ctx, a)), nil)
		case "model_info":
			var res json.RawMessage
			err := srv.peer.Call(ctx, protocol.MethodModelInfo, struct{}{}, &res)
			reply(jsonResult(outcome(res, err)), nil)
		}
	})
	return nil, nil
}

// push sends push/event.
func (srv *server) push(ctx context.Context, a toolArgs) map[string]any {
	var content any = []map[string]string{{"type": "text", "text": a.Text}}
	if len(a.Content) > 0 {
		content = a.Content // as the test wrote it, malformed or not
	}
	var eventID string
	if a.EventID != nil {
		eventID = *a.EventID
	} else {
		srv.mu.Lock()
		srv.pushed++
		eventID = fmt.Sprintf("evt-%d", srv.pushed)
		srv.mu.Unlock()
	}
	params := map[string]any{
		"featureSet": FeatureSet,
		"eventId":    eventID,
		"timestamp":  time.Now().UTC().Format(time.RFC3339Nano),
		"payload":    map[string]any{"content": content},
	}
	if len(a.Tags) > 0 {
		params["tags"] = a.Tags
	}
	if len(a.Origin) > 0 {
		params["origin"] = a.Origin
	}
	var res json.RawMessage
	err := srv.peer.Call(ctx, protocol.MethodPushEvent, params, &res)
	return outcome(res, err)
}

// infer sends inference/request and collects the deltas the host streamed
// for it before its answer.
func (srv *server) infer(ctx context.Context, a toolArgs) map[string]any {
	messages := a.Messages
	if len(messages) == 0 {
		messages = json.RawMessage(`[{"role":"user","content":"hello"}]`)
	}
	params := map[string]any{"featureSet": InferFeatureSet, "messages": messages, "stream": a.Stream}
	if a.MaxTokens > 0 {
		params["preferences"] = map[string]int{"maxTokens": a.MaxTokens}
	}
	var id int64
	var res json.RawMessage
	err := srv.peer.Call(context.WithValue(ctx, idSlotKey{}, &id), protocol.MethodInferenceRequest, params, &res)
	// The chunks that came before the answer are queued for dispatch
	// behind it: once they are handled, they are all in.
	srv.peer.Sync(ctx)
	key := strconv.FormatInt(id, 10)
	srv.mu.Lock()
	chunks := append([]string{}, srv.chunks[key]...)
	delete(srv.chunks, key)
	srv.mu.Unlock()
	out := outcome(res, err)
	out["chunks"] = chunks
	return out
}

// jsonResult is a tool result whose text is v as JSON.
func jsonResult(v any) protocol.CallToolResult {
	b, _ := json.Marshal(v)
	return protocol.TextResult(string(b), false)
}
