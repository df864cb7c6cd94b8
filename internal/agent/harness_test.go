package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/internal/model"
	"github.com/mcpl-go/mcpl/internal/treat"
	"github.com/mcpl-go/mcpl/store"
)

// The runtime tests run in a synctest bubble: after synctest.Wait every
// goroutine of the runtime is blocked (idle, or held by a fake), so what
// has happened is all that will happen until the test acts again.

// fakeEnv is the host as the agents see it.
type fakeEnv struct {
	mu       sync.Mutex
	tools    []model.Tool
	chans    map[[2]string]channels.ListedChannel
	silences map[string]bool
	gates    map[string]chan struct{} // a call of the tool waits for its gate to close (or ctx)
	answers  map[string]ToolAnswer
	outcome  func(server, channel, text string) channels.PublishOutcome
	// typing and streams: the channels ("server/channel") whose servers
	// take typing and streaming; what they were sent, in order.
	typing  map[string]bool
	streams map[string]bool
	signals []string // "typing start s/c", "chunk s/c 0 Hel", "complete s/c Hello", "seen s/c m1"
	seen    bool     // record Seen in signals
	// connected overrides Connected for a server.
	connected map[string]time.Time
	// bots is the bot rule by server and channel (none: bots don't wake).
	bots map[[2]string]BotRule
	// accepted are servers' accepted suggested rules.
	accepted map[string][]treat.Rule
	// coalesced is what the host says of a coalesced event, by server
	// and event id (none: every event is ordinary).
	coalesced map[[2]string]Coalesced

	entered  []string // tool names, as calls began
	returned []string // tool names, as calls returned
	calls    []envCall
	pubs     []publication
	threads  []string // each publication's thread (threadOf)
	// streamThreads is the thread each stream was made for (threadOf).
	streamThreads []string
}

type envCall struct {
	Agent, Name string
	Args        json.RawMessage
	CtxErr      error // the call's ctx.Err() when it returned
}

type publication struct{ Agent, Server, Channel, Text string }

// thread names a publication's thread as sent: "-" none, "" the root.
func threadOf(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

func newEnv(toolNames ...string) *fakeEnv {
	e := &fakeEnv{chans: map[[2]string]channels.ListedChannel{}, silences: map[string]bool{}, gates: map[string]chan struct{}{}, answers: map[string]ToolAnswer{}, connected: map[string]time.Time{}}
	for _, n := range toolNames {
		e.tools = append(e.tools, model.Tool{Name: n, Description: "the " + n + " tool", InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return e
}

// channel registers a channel with its decision ("open", "closed").
func (e *fakeEnv) channel(server, id, desired string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.chans[[2]string{server, id}] = channels.ListedChannel{ID: id, Label: "#" + id, Desired: desired, ServerID: server, Registered: true}
}

// Connected is when server connected: long ago (its registrations are
// settled), unless the test set it (the zero time: not connected).
func (e *fakeEnv) Connected(server string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.connected[server]; ok {
		return t
	}
	return time.Unix(0, 0)
}

// gate makes calls of tool wait until the returned func is called.
func (e *fakeEnv) gate(tool string) (release func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := make(chan struct{})
	e.gates[tool] = g
	return sync.OnceFunc(func() { close(g) })
}

func (e *fakeEnv) Tools() []model.Tool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]model.Tool(nil), e.tools...)
}

func (e *fakeEnv) CallTool(ctx context.Context, agent, name string, args json.RawMessage) ToolAnswer {
	e.mu.Lock()
	e.entered = append(e.entered, name)
	g := e.gates[name]
	a, ok := e.answers[name]
	e.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.returned = append(e.returned, name)
	e.calls = append(e.calls, envCall{Agent: agent, Name: name, Args: append(json.RawMessage(nil), args...), CtxErr: ctx.Err()})
	if !ok {
		a = ToolAnswer{Content: []model.Block{{Type: model.Text, Text: "result of " + name}}, Outcome: "ok"}
	}
	return a
}

func (e *fakeEnv) Posts(tool string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return group(tool), e.silences[tool]
}

func (e *fakeEnv) Channel(server, id string) (channels.ListedChannel, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.chans[[2]string{server, id}]
	return ch, ok
}

func (e *fakeEnv) Coalesced(server, eventID string) Coalesced {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.coalesced[[2]string{server, eventID}]
}

// coalesce sets what the host says of server's event eventID.
func (e *fakeEnv) coalesce(server, eventID string, co Coalesced) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.coalesced == nil {
		e.coalesced = map[[2]string]Coalesced{}
	}
	e.coalesced[[2]string{server, eventID}] = co
}

func (e *fakeEnv) Assemble(ctx context.Context, server string, ids []string) []Assembled {
	return make([]Assembled, len(ids))
}

func (e *fakeEnv) Accepted(server string) []treat.Rule {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.accepted[server]
}

func (e *fakeEnv) Bots(server, channel string) BotRule {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bots[[2]string{server, channel}]
}

func (e *fakeEnv) Publish(ctx context.Context, agent, server, channel string, thread *string, text string) channels.PublishOutcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pubs = append(e.pubs, publication{agent, server, channel, text})
	e.threads = append(e.threads, threadOf(thread))
	if e.outcome != nil {
		return e.outcome(server, channel, text)
	}
	return channels.PublishOutcome{Status: channels.Delivered, Server: server, Channel: channel, Label: "#" + channel}
}

// View shows one text part per block, its "text".
func (e *fakeEnv) View(server, provenance string, blocks []json.RawMessage) []content.Part {
	var out []content.Part
	for _, b := range blocks {
		var t struct {
			Text string `json:"text"`
		}
		json.Unmarshal(b, &t)
		out = append(out, content.Part{Kind: content.KindText, Text: t.Text})
	}
	return out
}

func (e *fakeEnv) snapshot() (entered, returned []string, calls []envCall, pubs []publication) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.entered...), append([]string(nil), e.returned...), append([]envCall(nil), e.calls...), append([]publication(nil), e.pubs...)
}

// fakeModel answers from respond (nil: an empty end_turn). A held one
// first waits for each call to be let go (release), or for ctx to end. A
// call whose ctx has ended returns ctx.Err(), as a provider's does.
type fakeModel struct {
	respond func(n int, req model.Request) (model.Response, error)
	held    bool

	mu    sync.Mutex
	block chan struct{} // made in the bubble, so that waiting on it is durable
	reqs  []model.Request
	errs  []error
}

func (m *fakeModel) gate() chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.block == nil {
		m.block = make(chan struct{})
	}
	return m.block
}

// release lets one held model call answer, and waits for the runtime to
// settle.
func release(m *fakeModel) {
	m.gate() <- struct{}{}
	synctest.Wait()
}

func (m *fakeModel) Info() model.Info { return model.Info{ID: "fake-1", Vendor: "test"} }

func (m *fakeModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	// A deep copy, so later changes by the caller can't touch it.
	var msgs []model.Message
	b, _ := json.Marshal(req.Messages)
	json.Unmarshal(b, &msgs)
	req.Messages = msgs
	req.Tools = append([]model.Tool(nil), req.Tools...)
	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	resp, err := m.answer(ctx, n, req)
	m.mu.Lock()
	m.errs = append(m.errs, err)
	m.mu.Unlock()
	return resp, err
}

func (m *fakeModel) answer(ctx context.Context, n int, req model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, err
	}
	if m.held {
		select {
		case <-m.gate():
		case <-ctx.Done():
			return model.Response{}, ctx.Err()
		}
	}
	if m.respond == nil {
		return model.Response{Stop: model.EndTurn}, nil
	}
	return m.respond(n, req)
}

func (m *fakeModel) requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.Request(nil), m.reqs...)
}

// script answers the calls in order with resps, then with empty end_turns.
func script(resps ...model.Response) func(int, model.Request) (model.Response, error) {
	return func(n int, _ model.Request) (model.Response, error) {
		if n < len(resps) {
			return resps[n], nil
		}
		return model.Response{Stop: model.EndTurn}, nil
	}
}

// Response builders.
func textBlock(s string) model.Block { return model.Block{Type: model.Text, Text: s} }

func callBlock(id, name string) model.Block {
	return model.Block{Type: model.ToolUse, ToolCall: &model.ToolCall{ID: id, Name: name, Args: json.RawMessage(`{}`)}}
}

func respond(stop model.StopReason, blocks ...model.Block) model.Response {
	return model.Response{Content: blocks, Stop: stop, Usage: model.Usage{InputTokens: 10, OutputTokens: 1}, Model: "fake-1"}
}

// fakeHooks injects fixed blocks and records the inferences and how each
// ended.
type fakeHooks struct {
	system, before, after []model.Block

	mu    sync.Mutex
	infs  []Inference
	ends  []string // "completed", "aborted", "failed", in order
	usage []model.Usage
}

type fakeLife struct{ h *fakeHooks }

func (h *fakeHooks) Before(ctx context.Context, inf Inference) (system, beforeUser, afterUser []model.Block) {
	return h.system, h.before, h.after
}

func (h *fakeHooks) Start(inf Inference) Lifecycle {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.infs = append(h.infs, inf)
	return fakeLife{h}
}

func (l fakeLife) end(s string, u model.Usage) {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	l.h.ends = append(l.h.ends, s)
	if s == "completed" {
		l.h.usage = append(l.h.usage, u)
	}
}

func (l fakeLife) Completed(u model.Usage) { l.end("completed", u) }
func (l fakeLife) Aborted()                { l.end("aborted", model.Usage{}) }
func (l fakeLife) Failed()                 { l.end("failed", model.Usage{}) }

// recorder is the transcript's writer: it keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return 0, err
		}
		r.events = append(r.events, ev)
	}
	return len(p), nil
}

// of returns the events of agent ("" for any) of kind ("" for any).
func (r *recorder) of(agent, kind string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, ev := range r.events {
		if (agent == "" || ev.Agent == agent) && (kind == "" || ev.Event == kind) {
			out = append(out, ev)
		}
	}
	return out
}

type harness struct {
	t     *testing.T
	st    *store.Memory
	env   *fakeEnv
	model *fakeModel
	rec   *recorder
	rt    *Runtime
}

// setup fills in what opts leaves out: a memory store, an env, the
// transcript, and one agent "ada" on a fake model.
func setup(t *testing.T, opts *Options) *harness {
	t.Helper()
	h := &harness{t: t, rec: &recorder{}}
	if opts.Store == nil {
		opts.Store = store.NewMemory()
	}
	h.st, _ = opts.Store.(*store.Memory)
	if opts.Env == nil {
		opts.Env = newEnv()
	}
	h.env, _ = opts.Env.(*fakeEnv)
	if len(opts.Agents) == 0 {
		opts.Agents = []Spec{{Name: "ada", Model: &fakeModel{}, System: "You are ada."}}
	}
	h.model, _ = opts.Agents[0].Model.(*fakeModel)
	opts.Transcript = NewTranscript(h.rec)
	opts.Logger = slog.New(slog.DiscardHandler)
	return h
}

// start starts the runtime; the test closes it.
func (h *harness) start(opts Options) {
	h.t.Helper()
	rt, err := Start(opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.rt = rt
}

// bubble runs f in a synctest bubble with the runtime opts describe
// started, and closes it after f.
func bubble(t *testing.T, opts Options, f func(h *harness)) {
	synctest.Test(t, func(t *testing.T) {
		h := setup(t, &opts)
		h.start(opts)
		defer h.rt.Close()
		synctest.Wait()
		f(h)
	})
}

// add puts messages into the inbox, wakes the runtime and waits for it to
// settle.
func (h *harness) add(msgs ...store.Message) []store.Message {
	h.t.Helper()
	msgs = addMessages(h.t, h.st, msgs...)
	h.rt.Wake()
	synctest.Wait()
	return msgs
}

func addMessages(t *testing.T, st store.Store, msgs ...store.Message) []store.Message {
	t.Helper()
	added, err := st.AddMessages(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range added {
		if !ok {
			t.Fatalf("message %d not added", i)
		}
	}
	return msgs
}

func (h *harness) cursors() map[string]int64 {
	h.t.Helper()
	c, err := h.st.Cursors(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// cursor is agent's position in server's messages as the store has it:
// its cursor there, else its base.
func (h *harness) cursor(agent, server string) int64 {
	h.t.Helper()
	c := h.cursors()
	if v, ok := c[serverCursorName(agent, server)]; ok {
		return v
	}
	return c[cursorName(agent)]
}

// history reads conversation's recorded messages.
func history(t *testing.T, st store.Store, conversation string) []entryBody {
	t.Helper()
	var out []entryBody
	err := st.History(context.Background(), conversation, func(e store.Entry) error {
		var b entryBody
		if err := json.Unmarshal(e.Body, &b); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Inbox messages.

func chanMsg(server, channel, id, text string, tags ...string) store.Message {
	body, _ := json.Marshal(map[string]any{
		"author":  map[string]string{"id": "u1", "name": "bob"},
		"content": []map[string]string{{"type": "text", "text": text}},
	})
	return store.Message{Server: server, Channel: channel, MessageID: id, Tags: tags, Body: body}
}

func pushMsg(server, id, text string) store.Message {
	body, _ := json.Marshal(map[string]any{"payload": map[string]any{"content": []map[string]string{{"type": "text", "text": text}}}})
	return store.Message{Server: server, MessageID: id, Kind: store.KindPushEvent, FeatureSet: "alerts", Body: body}
}

// userTexts is every text block of msgs' user messages, tool results'
// text included, in order.
func userTexts(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Role != model.User {
			continue
		}
		for _, b := range m.Content {
			switch {
			case b.Type == model.Text:
				out = append(out, b.Text)
			case b.Type == model.ToolResult && b.Result != nil:
				for _, c := range b.Result.Content {
					out = append(out, c.Text)
				}
			}
		}
	}
	return out
}

func containsText(texts []string, sub string) bool {
	for _, s := range texts {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// lastUser is the newest user message of req.
func lastUser(t *testing.T, req model.Request) model.Message {
	t.Helper()
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.User {
			return req.Messages[i]
		}
	}
	t.Fatalf("no user message in %+v", req.Messages)
	return model.Message{}
}

func toolNames(tools []model.Tool) []string {
	var out []string
	for _, tl := range tools {
		out = append(out, tl.Name)
	}
	return out
}

func (e *fakeEnv) Typing(server, channel string) (func(), bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	where := server + "/" + channel
	if !e.typing[where] {
		return func() {}, false
	}
	e.signals = append(e.signals, "typing start "+where)
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.signals = append(e.signals, "typing stop "+where)
	}, true
}

func (e *fakeEnv) Stream(server, channel string, thread *string) Stream {
	e.mu.Lock()
	defer e.mu.Unlock()
	where := server + "/" + channel
	if !e.streams[where] {
		return nil
	}
	e.streamThreads = append(e.streamThreads, threadOf(thread))
	return fakeStream{e, where}
}

type fakeStream struct {
	e     *fakeEnv
	where string
}

func (s fakeStream) Chunk(inferenceID, conversationID string, index int, delta string) {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	s.e.signals = append(s.e.signals, fmt.Sprintf("chunk %s %d %s", s.where, index, delta))
}

func (s fakeStream) Complete(inferenceID, conversationID, text string) {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	s.e.signals = append(s.e.signals, "complete "+s.where+" "+text)
}

// sent returns what the channels' servers were sent (typing, streams).
func (e *fakeEnv) sent() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.signals...)
}

func (e *fakeEnv) Seen(msgs []Wake) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range msgs {
		if e.seen {
			e.signals = append(e.signals, "seen "+m.Server+"/"+m.Channel+" "+m.MessageID)
		}
	}
}
