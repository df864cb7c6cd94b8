package chanserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

var quietLog = slog.New(slog.DiscardHandler)

// fakeHost is the host side of an in-process connection to the server: it
// answers push/event, inference/request (streaming two chunks, and one
// stray chunk for another request, when asked to stream) and model/info,
// each with an error instead when its refuse flag is set, and records
// what it was sent.
type fakeHost struct {
	peer *wire.Peer

	mu          sync.Mutex
	refuse      map[string]bool // by method
	params      map[string][]json.RawMessage
	inferenceID int
}

// start serves the server on an in-memory pipe and returns the host's end.
// The cleanup closes the connection and waits for Serve to return.
func start(t *testing.T, cfg chanserver.Config) *fakeHost {
	t.Helper()
	h := &fakeHost{refuse: map[string]bool{}, params: map[string][]json.RawMessage{}}
	serverEnd, hostEnd := transport.Pipe(0)
	served := make(chan struct{})
	go func() {
		chanserver.Serve(serverEnd, cfg)
		close(served)
	}()
	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodPushEvent, h.answer(func(*wire.Request) any {
		h.inferenceID++
		return protocol.PushEventResult{Accepted: true, InferenceID: fmt.Sprintf("inf_%d", h.inferenceID)}
	}))
	mux.HandleFunc(protocol.MethodModelInfo, h.answer(func(*wire.Request) any {
		return protocol.ModelInfoResult{ID: "test-model", Vendor: "test", ContextWindow: 1000}
	}))
	mux.HandleFunc(protocol.MethodInferenceRequest, h.answer(func(req *wire.Request) any {
		var p struct {
			Stream bool `json:"stream"`
		}
		json.Unmarshal(req.Params, &p)
		if p.Stream {
			ctx := context.Background()
			h.peer.Notify(ctx, "inference/chunk", map[string]any{"requestId": req.ID(), "index": 0, "delta": "Hel"})
			h.peer.Notify(ctx, "inference/chunk", map[string]any{"requestId": 999, "index": 0, "delta": "stray"})
			h.peer.Notify(ctx, "inference/chunk", map[string]any{"requestId": req.ID(), "index": 1, "delta": "lo"})
		}
		return map[string]any{"content": "Hello", "model": "test-model", "finishReason": "end_turn"}
	}))
	h.peer = wire.NewPeer(hostEnd, wire.Options{Name: "chanserver", Handler: mux, Logger: quietLog})
	t.Cleanup(func() {
		h.peer.Close()
		select {
		case <-served:
		case <-time.After(waitFor):
			t.Error("Serve did not return after the connection closed")
		}
	})
	return h
}

// answer records a request's params and answers it with the result of
// answer, or with error -32001 when the method is refused.
func (h *fakeHost) answer(answer func(*wire.Request) any) func(context.Context, *wire.Request) (any, error) {
	return func(_ context.Context, req *wire.Request) (any, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.params[req.Method] = append(h.params[req.Method], req.Params)
		if h.refuse[req.Method] {
			return nil, protocol.NewError(protocol.CodeFeatureSetNotEnabled, "Feature set not enabled", map[string]string{"featureSet": chanserver.FeatureSet})
		}
		return answer(req), nil
	}
}

func (h *fakeHost) setRefuse(method string, refuse bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refuse[method] = refuse
}

// sent returns the params of the requests of method the host received.
func (h *fakeHost) sent(method string) []json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.params[method])
}

// call calls a tool and returns its text, failing the test on an error
// result.
func (h *fakeHost) call(t *testing.T, name, args string) string {
	t.Helper()
	text, err := h.tryCall(name, args)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// tryCall calls a tool and returns its text, or an error for a failed call
// or an error result.
func (h *fakeHost) tryCall(name, args string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var res protocol.CallToolResult
	if err := h.peer.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: name, Arguments: json.RawMessage(args)}, &res); err != nil {
		return "", fmt.Errorf("%s %s: %w", name, args, err)
	}
	if res.IsError {
		return "", fmt.Errorf("%s %s: error result %q", name, args, res.Text())
	}
	return res.Text(), nil
}

// hook sends context/beforeInference and returns its raw answer or error.
func (h *fakeHost) hook(ctx context.Context, turn int) (json.RawMessage, error) {
	var res json.RawMessage
	err := h.peer.Call(ctx, "context/beforeInference", map[string]any{
		"inferenceId": fmt.Sprintf("inf_%d", turn), "conversationId": "conv_1", "turnIndex": turn, "userMessage": "hi",
	}, &res)
	return res, err
}

// jsonEq fails the test unless got and want are the same JSON.
func jsonEq(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: want %q is not JSON: %v", what, want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s:\ngot  %s\nwant %s", what, gb, wb)
	}
}

// TestAdvertisement checks initialize: the channel capabilities as before,
// and its feature sets, whose uses are every agent
// capability, each of them advertised.
func TestAdvertisement(t *testing.T) {
	h := start(t, chanserver.Config{})
	var init protocol.InitializeResult
	if err := h.peer.Call(t.Context(), protocol.MethodInitialize, map[string]any{}, &init); err != nil {
		t.Fatal(err)
	}
	ad, err := grant.ParseAdvertisement(init.Capabilities.MCPL(), init.Capabilities.Tools != nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"channels.incoming", "channels.lifecycle", "channels.publish", "channels.register", "tools"}
	for _, uses := range chanserver.FeatureSets {
		want = append(want, uses...)
	}
	slices.Sort(want)
	if !slices.Equal(ad.Capabilities, want) {
		t.Errorf("capabilities:\ngot  %v\nwant %v", ad.Capabilities, want)
	}
	if len(ad.Ignored) > 0 {
		t.Errorf("ignored: %v", ad.Ignored)
	}
	if len(ad.FeatureSets) != len(chanserver.FeatureSets) {
		t.Fatalf("feature sets: %+v", ad.FeatureSets)
	}
	for _, fs := range ad.FeatureSets {
		if uses := chanserver.FeatureSets[fs.Name]; fs.Invalid != "" || !slices.Equal(fs.Uses, uses) {
			t.Errorf("feature set: %+v", fs)
		}
	}
	// Granted everything, each set is enabled.
	g := grant.Compute(ad, grant.Vocabulary(), grant.Policy{Enable: grant.Vocabulary()})
	for name := range chanserver.FeatureSets {
		if st, ok := g.FeatureSet(name); !ok || st.State != grant.StateEnabled {
			t.Errorf("%s = %+v under a full grant", name, st)
		}
	}
	// Any policy is accepted.
	var receipt protocol.PolicyReceipt
	if err := h.peer.Call(t.Context(), protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{}, &receipt); err != nil || !receipt.Accepted {
		t.Errorf("policy: %+v, %v", receipt, err)
	}
}

func TestPush(t *testing.T) {
	h := start(t, chanserver.Config{})
	jsonEq(t, "push", h.call(t, "push", `{"text":"build failed","tags":["ci:failure"]}`),
		`{"result":{"accepted":true,"inferenceId":"inf_1"}}`)
	jsonEq(t, "push with content", h.call(t, "push", `{"eventId":"e2","content":[{"type":"text","text":"raw"},{"type":"nope"}]}`),
		`{"result":{"accepted":true,"inferenceId":"inf_2"}}`)
	h.setRefuse(protocol.MethodPushEvent, true)
	jsonEq(t, "refused push", h.call(t, "push", `{"eventId":"","text":"x"}`),
		`{"error":{"code":-32001,"message":"Feature set not enabled","data":{"featureSet":"test.agent"}}}`)

	sent := h.sent(protocol.MethodPushEvent)
	if len(sent) != 3 {
		t.Fatalf("push/event sent %d times", len(sent))
	}
	for i, want := range []string{
		`{"featureSet":"test.agent","eventId":"evt-1","payload":{"content":[{"type":"text","text":"build failed"}]},"tags":["ci:failure"]}`,
		`{"featureSet":"test.agent","eventId":"e2","payload":{"content":[{"type":"text","text":"raw"},{"type":"nope"}]}}`,
		`{"featureSet":"test.agent","eventId":"","payload":{"content":[{"type":"text","text":"x"}]}}`,
	} {
		var p map[string]any
		json.Unmarshal(sent[i], &p)
		ts, _ := p["timestamp"].(string)
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Errorf("push %d: timestamp %q: %v", i, ts, err)
		}
		delete(p, "timestamp")
		b, _ := json.Marshal(p)
		jsonEq(t, fmt.Sprintf("push %d params", i), string(b), want)
	}
}

func TestInfer(t *testing.T) {
	h := start(t, chanserver.Config{})
	jsonEq(t, "streamed", h.call(t, "infer", `{"messages":[{"role":"user","content":"say hello"}],"stream":true,"maxTokens":50}`),
		`{"result":{"content":"Hello","model":"test-model","finishReason":"end_turn"},"chunks":["Hel","lo"]}`)
	jsonEq(t, "not streamed", h.call(t, "infer", `{}`),
		`{"result":{"content":"Hello","model":"test-model","finishReason":"end_turn"},"chunks":[]}`)
	h.setRefuse(protocol.MethodInferenceRequest, true)
	jsonEq(t, "refused", h.call(t, "infer", `{"stream":true}`),
		`{"error":{"code":-32001,"message":"Feature set not enabled","data":{"featureSet":"test.agent"}},"chunks":[]}`)

	sent := h.sent(protocol.MethodInferenceRequest)
	if len(sent) != 3 {
		t.Fatalf("inference/request sent %d times", len(sent))
	}
	jsonEq(t, "first request", string(sent[0]), `{"featureSet":"test.infer","messages":[{"role":"user","content":"say hello"}],"stream":true,"preferences":{"maxTokens":50}}`)
	jsonEq(t, "second request", string(sent[1]), `{"featureSet":"test.infer","messages":[{"role":"user","content":"hello"}],"stream":false}`)
}

func TestModelInfo(t *testing.T) {
	h := start(t, chanserver.Config{})
	jsonEq(t, "model_info", h.call(t, "model_info", `{}`), `{"result":{"id":"test-model","vendor":"test","contextWindow":1000}}`)
	h.setRefuse(protocol.MethodModelInfo, true)
	jsonEq(t, "refused", h.call(t, "model_info", `{}`),
		`{"error":{"code":-32001,"message":"Feature set not enabled","data":{"featureSet":"test.agent"}}}`)
	jsonEq(t, "params", string(h.sent(protocol.MethodModelInfo)[0]), `{}`)
}

func TestHookScript(t *testing.T) {
	h := start(t, chanserver.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()

	// Unscripted: at once, with nothing.
	res, err := h.hook(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, "default", string(res), `{"featureSet":"test.hooks","contextInjections":[]}`)

	inj := `[{"namespace":"t","position":"afterUser","content":"note"},{"namespace":"t","position":"system","content":[{"type":"text","text":"sys"}]}]`
	h.call(t, "hook", `{"injections":`+inj+`}`)
	res, err = h.hook(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, "scripted", string(res), `{"featureSet":"test.hooks","contextInjections":`+inj+`}`)

	h.call(t, "hook", `{"mode":"answer","injections":`+inj+`,"delayMs":200}`)
	began := time.Now()
	res, err = h.hook(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < 200*time.Millisecond {
		t.Errorf("delayed answer came after %v", d)
	}
	jsonEq(t, "delayed", string(res), `{"featureSet":"test.hooks","contextInjections":`+inj+`}`)

	h.call(t, "hook", `{"mode":"fail"}`)
	if _, err := h.hook(ctx, 3); err == nil || !strings.Contains(err.Error(), "-32603") {
		t.Errorf("fail: %v", err)
	}

	h.call(t, "hook", `{"mode":"hang"}`)
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = h.hook(short, 4)
	cancelShort()
	if ce, ok := err.(*wire.CallError); !ok || ce.Outcome != wire.NoResponse {
		t.Errorf("hang: %v, want no answer", err)
	}

	// The host refuses the inference/request the hook makes; its refusal
	// is the injection.
	h.setRefuse(protocol.MethodInferenceRequest, true)
	h.call(t, "hook", `{"mode":"infer"}`)
	res, err = h.hook(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		FeatureSet        string `json:"featureSet"`
		ContextInjections []struct {
			Namespace, Position string
			Content             []json.RawMessage
		} `json:"contextInjections"`
	}
	if err := json.Unmarshal(res, &got); err != nil {
		t.Fatal(err)
	}
	if got.FeatureSet != chanserver.HooksFeatureSet || len(got.ContextInjections) != 1 {
		t.Fatalf("infer: %s", res)
	}
	in := got.ContextInjections[0]
	if in.Namespace != "loop" || in.Position != "system" {
		t.Errorf("infer injection: %s", res)
	}
	jsonEq(t, "infer injection text", protocol.JoinText(in.Content),
		`{"error":{"code":-32001,"message":"Feature set not enabled","data":{"featureSet":"test.agent"}}}`)
	if sent := h.sent(protocol.MethodInferenceRequest); len(sent) != 1 || !strings.Contains(string(sent[0]), `"featureSet":"test.infer"`) {
		t.Errorf("the hook's inference/request: %s", sent)
	}

}

func TestHookBadMode(t *testing.T) {
	h := start(t, chanserver.Config{})
	var res protocol.CallToolResult
	if err := h.peer.Call(t.Context(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "hook", Arguments: json.RawMessage(`{"mode":"sometimes"}`)}, &res); err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Text(), `unknown hook mode "sometimes"`) {
		t.Errorf("hook sometimes = %q (isError %v)", res.Text(), res.IsError)
	}
}

func TestHooksLog(t *testing.T) {
	h := start(t, chanserver.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()

	// A wait for more than are in answers once they are.
	waited := make(chan string, 1)
	go func() {
		text, err := h.tryCall("hooks_log", `{"count":3}`)
		if err != nil {
			text = err.Error()
		}
		waited <- text
	}()

	lifecycle := func(phase string) {
		if err := h.peer.Notify(ctx, "inference/lifecycle", map[string]any{"inferenceId": "inf_1", "conversationId": "conv_1", "turnIndex": 0, "phase": phase}); err != nil {
			t.Fatal(err)
		}
	}
	lifecycle("started")
	if _, err := h.hook(ctx, 0); err != nil {
		t.Fatal(err)
	}
	lifecycle("completed")

	want := `[
		{"method":"inference/lifecycle","params":{"inferenceId":"inf_1","conversationId":"conv_1","turnIndex":0,"phase":"started"}},
		{"method":"context/beforeInference","params":{"inferenceId":"inf_0","conversationId":"conv_1","turnIndex":0,"userMessage":"hi"}},
		{"method":"inference/lifecycle","params":{"inferenceId":"inf_1","conversationId":"conv_1","turnIndex":0,"phase":"completed"}}]`
	select {
	case got := <-waited:
		jsonEq(t, "waited", got, want)
	case <-time.After(waitFor):
		t.Fatal("hooks_log {count: 3} did not answer")
	}
	jsonEq(t, "all", h.call(t, "hooks_log", `{}`), want)
	jsonEq(t, "beforeInference only", h.call(t, "hooks_log", `{"method":"context/beforeInference","count":1}`),
		`[{"method":"context/beforeInference","params":{"inferenceId":"inf_0","conversationId":"conv_1","turnIndex":0,"userMessage":"hi"}}]`)
	jsonEq(t, "none", h.call(t, "hooks_log", `{"method":"inference/chunk"}`), `[]`)
}

// TestChannelToolsStillWork spot-checks the channel side alongside the new
// tools: a send, and the log.
func TestChannelToolsStillWork(t *testing.T) {
	h := start(t, chanserver.Config{})
	jsonEq(t, "send_message", h.call(t, "send_message", `{"channelId":"c1","text":"hi"}`), `{"channelId":"c1","messageId":"m1"}`)
	jsonEq(t, "log", h.call(t, "log", `{"count":1}`), `["send c1: hi"]`)
	var tools protocol.ListToolsResult
	if err := h.peer.Call(t.Context(), protocol.MethodToolsList, nil, &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"register", "log", "send_message", "push", "infer", "model_info", "hook", "hooks_log"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
}

// TestBinary runs the built command over stdio: it starts, advertises
// test.agent, and pushes.
func TestBinary(t *testing.T) {
	bin := chanserver.Binary(t)
	proc, err := transport.Spawn(transport.Command{Argv: []string{bin}}, transport.StdioOptions{Logger: quietLog, StopWait: waitFor})
	if err != nil {
		t.Fatal(err)
	}
	peer := wire.NewPeer(proc, wire.Options{Name: "chanserver", Logger: quietLog, Handler: wire.HandlerFunc(func(context.Context, *wire.Request) (any, error) {
		return protocol.PushEventResult{Accepted: true}, nil
	})})
	defer peer.Close()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	var init protocol.InitializeResult
	if err := peer.Call(ctx, protocol.MethodInitialize, map[string]any{}, &init); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(init.Capabilities.MCPL()), `"test.agent"`) {
		t.Errorf("advertisement: %s", init.Capabilities.MCPL())
	}
	var res protocol.CallToolResult
	if err := peer.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: "push", Arguments: json.RawMessage(`{"text":"hi"}`)}, &res); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, "push", res.Text(), `{"result":{"accepted":true}}`)
}
