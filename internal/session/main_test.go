package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// TestMain removes the built test server, then fails the run if any test
// left a goroutine behind: a redial loop, a connection's watcher, a held
// request, a server process's wait.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testserver.Cleanup()
		os.Exit(code)
	}))
}

// server is the server id every test gives its session; pinned texts name
// it.
const server = "chat"

// waitFor bounds every wait on a real subprocess.
const waitFor = 10 * time.Second

// Advertisements the tests give the test server.
const (
	// adFull advertises every privileged surface session admits, with one
	// feature set that the default host policy enables (chat) and one it
	// cannot (lifecycle: inferenceLifecycle is not implemented).
	adFull = `{"version":"0.5","pushEvents":true,"channels":true,"inferenceRequest":true,"modelInfo":true,` +
		`"featureSets":{"chat":{"description":"chat events","uses":["pushEvents"]},` +
		`"lifecycle":{"description":"needs lifecycle","uses":["inferenceLifecycle"]}}}`
	// ad04 is a 0.4 server's advertisement (featureSets as an array).
	ad04 = `{"version":"0.4","pushEvents":true,"channels":true,` +
		`"featureSets":[{"name":"chat","description":"chat events","uses":["pushEvents"]}]}`
)

// ---- log capture ----

// recorder captures what a session logs.
type recorder = logtest.Recorder

func newRecorder() *recorder { return logtest.New() }

var discard = slog.New(slog.DiscardHandler)

// ---- the test server as a real subprocess ----

// spawn returns a Dial that starts the test server with args.
func spawn(t testing.TB, args ...string) func(context.Context) (transport.Stream, error) {
	t.Helper()
	bin := testserver.Binary(t)
	return func(context.Context) (transport.Stream, error) {
		p, err := transport.Spawn(transport.Command{Argv: append([]string{bin}, args...)}, transport.StdioOptions{Logger: discard})
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// dialer spawns the test server with a different argument list on each
// dial (the last repeating), and counts the dials.
type dialer struct {
	t     testing.TB
	bin   string
	args  [][]string
	n     atomic.Int32
	dials chan int              // told each dial's number, when not nil
	gate  map[int]chan struct{} // a dial with a gate waits for it to close
}

func newDialer(t testing.TB, args ...[]string) *dialer {
	return &dialer{t: t, bin: testserver.Binary(t), args: args}
}

func (d *dialer) dial(ctx context.Context) (transport.Stream, error) {
	n := int(d.n.Add(1))
	if d.dials != nil {
		d.dials <- n
	}
	if g := d.gate[n]; g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	args := d.args[min(n, len(d.args))-1]
	p, err := transport.Spawn(transport.Command{Argv: append([]string{d.bin}, args...)}, transport.StdioOptions{Logger: discard})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// withDefaults fills what a test's config leaves out: the server's id, a
// discarding logger, what the tests' host serves, and a push consumer that
// accepts.
func withDefaults(cfg session.Config) session.Config {
	if cfg.ID == "" {
		cfg.ID = server
	}
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	if cfg.Implemented == nil {
		cfg.Implemented = served
	}
	if cfg.OnPushEvent == nil {
		cfg.OnPushEvent = acceptPush
	}
	return cfg
}

// open connects a session and closes it when the test ends.
func open(t testing.TB, cfg session.Config) *session.Session {
	t.Helper()
	cfg = withDefaults(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tool calls one of the test server's tools and returns its text.
func tool(t testing.TB, s *session.Session, name string, args any) string {
	t.Helper()
	text, err := toolErr(s, name, args)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return text
}

func toolErr(s *session.Session, name string, args any) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var res protocol.CallToolResult
	if err := s.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: name, Arguments: raw}, &res); err != nil {
		return "", err
	}
	return res.Text(), nil
}

// answer is what the server got back from the host, as the send tool
// reports it.
type answer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Failed string `json:"failed"`
	Sent   *bool  `json:"sent"`
}

func (a answer) String() string {
	b, _ := json.Marshal(a)
	return string(b)
}

// send makes the server send the host method as a request, and returns the
// host's answer as it arrived on the wire.
func send(t testing.TB, s *session.Session, method, params string) answer {
	t.Helper()
	return decodeAnswer(t, tool(t, s, "send", map[string]any{"method": method, "params": json.RawMessage(params)}))
}

// notify makes the server send the host method as a notification.
func notify(t testing.TB, s *session.Session, method, params string) {
	t.Helper()
	a := decodeAnswer(t, tool(t, s, "send", map[string]any{"method": method, "params": json.RawMessage(params), "notify": true}))
	if a.Sent == nil || !*a.Sent {
		t.Fatalf("notification %s not sent: %v", method, a)
	}
}

func decodeAnswer(t testing.TB, text string) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal([]byte(text), &a); err != nil {
		t.Fatalf("the server's report %q: %v", text, err)
	}
	return a
}

// report is the policy tool's account: the policy messages the server got
// and the host's answers to its early requests.
type report struct {
	Policies []struct {
		AsRequest bool            `json:"asRequest"`
		Params    json.RawMessage `json:"params"`
	} `json:"policies"`
	Early []answer `json:"early"`
}

func policyReport(t testing.TB, s *session.Session) report {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(tool(t, s, "policy", map[string]any{})), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// earlyAnswers returns the host's answers to the server's n -early
// requests, as the server got them (its policy tool waits for them).
func earlyAnswers(t testing.TB, s *session.Session, n int) []answer {
	t.Helper()
	early := policyReport(t, s).Early
	if len(early) != n {
		t.Fatalf("the server has %d answers to its early requests, want %d: %v", len(early), n, early)
	}
	return early
}

// ---- assertions on answers ----

// wantResult fails unless a is a result equal (as JSON) to want.
func wantResult(t testing.TB, a answer, want string) {
	t.Helper()
	if a.Error != nil || a.Result == nil {
		t.Fatalf("answer %v, want result %s", a, want)
	}
	if !jsonEqual(a.Result, json.RawMessage(want)) {
		t.Fatalf("result %s, want %s", a.Result, want)
	}
}

// wantError fails unless a is an error with code, data equal to data (as
// JSON, when data is not empty), and a message holding every one of words.
func wantError(t testing.TB, a answer, code int64, data string, words ...string) {
	t.Helper()
	if a.Error == nil {
		t.Fatalf("answer %v, want error %d", a, code)
	}
	if a.Error.Code != code {
		t.Fatalf("error %d %q, want code %d", a.Error.Code, a.Error.Message, code)
	}
	if data != "" && !jsonEqual(a.Error.Data, json.RawMessage(data)) {
		t.Fatalf("error data %s, want %s", a.Error.Data, data)
	}
	for _, w := range words {
		if !strings.Contains(a.Error.Message, w) {
			t.Fatalf("error message %q does not say %q", a.Error.Message, w)
		}
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// callError returns err as a *wire.CallError, failing otherwise.
func callError(t testing.TB, err error) *wire.CallError {
	t.Helper()
	var ce *wire.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *wire.CallError", err, err)
	}
	return ce
}

// ---- inbound observation ----

// inbox collects what OnInbound and OnPushEvent are told.
type inbox struct {
	mu      sync.Mutex
	inbound []session.Inbound
	events  []session.PushEvent
	changed chan struct{}
}

func newInbox() *inbox { return &inbox{changed: make(chan struct{})} }

func (b *inbox) onInbound(in session.Inbound) {
	b.mu.Lock()
	b.inbound = append(b.inbound, in)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

func (b *inbox) onPush(_ context.Context, ev session.PushEvent) (protocol.PushEventResult, error) {
	b.mu.Lock()
	b.events = append(b.events, ev)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
	return protocol.PushEventResult{Accepted: true}, nil
}

func (b *inbox) all() []session.Inbound {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.inbound)
}

func (b *inbox) pushed() []session.PushEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.events)
}

// wait returns the inbound records once there are at least n.
func (b *inbox) wait(t testing.TB, n int) []session.Inbound {
	t.Helper()
	b.until(t, func() bool { return len(b.inbound) >= n }, fmt.Sprintf("%d inbound records", n))
	return b.all()
}

// waitPushed returns the events handed over once there are at least n.
// OnInbound is told of an event before it is handed over.
func (b *inbox) waitPushed(t testing.TB, n int) []session.PushEvent {
	t.Helper()
	b.until(t, func() bool { return len(b.events) >= n }, fmt.Sprintf("%d events", n))
	return b.pushed()
}

// until waits for cond, called with b.mu held.
func (b *inbox) until(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		b.mu.Lock()
		ok, ch := cond(), b.changed
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s within %s: inbound %+v, events %+v", what, waitFor, b.all(), b.pushed())
		}
	}
}

// handled is the test host's handler for admitted methods: channels/register
// and channels/changed get itemized results, the rest say which method they
// answered.
var handled = wire.HandlerFunc(func(_ context.Context, req *wire.Request) (any, error) {
	switch req.Method {
	case protocol.MethodChannelsRegister:
		var p protocol.ChannelsRegisterParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, protocol.NewError(protocol.CodeInvalidParams, "bad params", nil)
		}
		res := protocol.ChannelResults{Results: []protocol.ChannelResult{}}
		for _, c := range p.Channels {
			res.Results = append(res.Results, protocol.ChannelResult{ID: c.ID, Accepted: true})
		}
		return res, nil
	case protocol.MethodChannelsChanged:
		var p protocol.ChannelsChangedParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, protocol.NewError(protocol.CodeInvalidParams, "bad params", nil)
		}
		res := protocol.ChannelResults{Results: []protocol.ChannelResult{}}
		for _, c := range p.Added {
			res.Results = append(res.Results, protocol.ChannelResult{ID: c.ID, Accepted: true})
		}
		for _, id := range p.Removed {
			res.Results = append(res.Results, protocol.ChannelResult{ID: id, Accepted: true})
		}
		return res, nil
	case protocol.MethodChannelsList, protocol.MethodChannelsIncoming, protocol.MethodInferenceRequest, protocol.MethodModelInfo, protocol.MethodPing:
		return map[string]string{"handled": req.Method}, nil
	}
	return nil, wire.ErrMethodNotFound
})

// everything is a host that implements the whole vocabulary, so every
// privileged method can be granted.
var everything = grant.Vocabulary()

// acceptPush accepts every push event: the consumer a session the helpers
// open has unless the test gives its own.
func acceptPush(context.Context, session.PushEvent) (protocol.PushEventResult, error) {
	return protocol.PushEventResult{Accepted: true}, nil
}

// served is what the tests' consumers serve (the push inbox, the handled
// handler) beside tools: a session the helpers open implements it unless
// the test says otherwise. The host's own default is tools alone.
var served = []string{"tools", "pushEvents", "channels.register", "channels.incoming"}
