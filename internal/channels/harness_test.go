package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// The deterministic harness: a lifecycle double whose every request waits
// until the test answers it (ok, fail, or an answer naming another
// channel), a store that fails on demand, and a registry built on them.

// call is one request the registry sent to the double.
type call struct {
	method  string
	channel string
	params  json.RawMessage
	reply   chan reply
	seq     int // its place in double.sent
}

type reply struct {
	result any
	err    error
}

// ok answers the call with the usual success.
func (c *call) ok() {
	switch c.method {
	case protocol.MethodChannelsOpen:
		c.reply <- reply{result: map[string]any{"channel": map[string]string{"id": c.channel}}}
	case protocol.MethodChannelsClose:
		c.reply <- reply{result: map[string]bool{"closed": true}}
	default:
		c.reply <- reply{result: map[string]any{"delivered": true, "messageId": "m1"}}
	}
}

func (c *call) answer(v any) { c.reply <- reply{result: v} }

// fail answers with a JSON-RPC error.
func (c *call) fail(msg string) {
	c.reply <- reply{err: &wire.CallError{Outcome: wire.ErrorResponse, Cause: wire.CauseErrorAnswer, Server: "s", Answer: &protocol.Error{Code: protocol.CodeChannelOpenFailed, Message: msg}}}
}

func (c *call) String() string { return c.method + " " + c.channel }

// double is a server connection the test drives.
type double struct {
	t     *testing.T
	calls chan *call

	mu    sync.Mutex
	grant map[string]bool
	sent  []string // "open c", "close c", in the order sent
	notes []note   // the notifications sent, in order
}

// note is a notification the registry sent.
type note struct {
	method string
	params json.RawMessage
}

func (d *double) Notify(_ context.Context, method string, params any) error {
	b, _ := json.Marshal(params)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notes = append(d.notes, note{method, b})
	return nil
}

// notified returns the notifications sent so far.
func (d *double) notified() []note {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]note(nil), d.notes...)
}

func newDouble(t *testing.T, caps ...string) *double {
	d := &double{t: t, calls: make(chan *call, 64), grant: map[string]bool{}}
	for _, c := range caps {
		d.grant[c] = true
	}
	return d
}

func (d *double) setGrant(capability string, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.grant[capability] = on
}

func (d *double) Has(capability string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.grant[capability]
}

func (d *double) Call(ctx context.Context, method string, params, result any, timeout time.Duration) error {
	b, _ := json.Marshal(params)
	var p struct {
		ChannelID string `json:"channelId"`
	}
	json.Unmarshal(b, &p)
	c := &call{method: method, channel: p.ChannelID, params: b, reply: make(chan reply, 1)}
	d.mu.Lock()
	c.seq = len(d.sent)
	d.sent = append(d.sent, shortMethod(method)+" "+p.ChannelID)
	d.mu.Unlock()
	d.calls <- c
	select {
	case r := <-c.reply:
		if r.err != nil {
			return r.err
		}
		out, _ := json.Marshal(r.result)
		return json.Unmarshal(out, result)
	case <-time.After(timeout):
		return &wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseDeadline, Server: "s", Method: method, Timeout: timeout}
	case <-ctx.Done():
		return &wire.CallError{Outcome: wire.NoResponse, Cause: wire.CauseCanceled, Server: "s", Method: method}
	}
}

func shortMethod(m string) string {
	switch m {
	case protocol.MethodChannelsOpen:
		return "open"
	case protocol.MethodChannelsClose:
		return "close"
	case protocol.MethodChannelsPublish:
		return "publish"
	}
	return m
}

// next returns the next request, failing the test if none comes.
func (d *double) next() *call {
	d.t.Helper()
	select {
	case c := <-d.calls:
		return c
	case <-time.After(10 * time.Second):
		d.t.Fatalf("no request came; sent so far: %v", d.log())
		return nil
	}
}

// expect returns the next request, checking its method and channel.
func (d *double) expect(method, channel string) *call {
	d.t.Helper()
	c := d.next()
	if shortMethod(c.method) != method || c.channel != channel {
		d.t.Fatalf("request %s, want %s %s", c, method, channel)
	}
	return c
}

// none checks that no request is waiting.
func (d *double) none() {
	d.t.Helper()
	select {
	case c := <-d.calls:
		d.t.Fatalf("unexpected request %s", c)
	default:
	}
}

func (d *double) log() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.sent...)
}

// flakyStore is a store whose appends fail while fail is set.
type flakyStore struct {
	store.Store
	mu   sync.Mutex
	fail bool
	// okLeft, when >= 0, is how many more appends succeed before fail is
	// set.
	okLeft int
}

var errDiskFull = errors.New("disk full")

func (f *flakyStore) setFail(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.okLeft = on, -1
}

// failAfter lets n more appends succeed, then fails the rest.
func (f *flakyStore) failAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.okLeft = false, n
}

func (f *flakyStore) Append(ctx context.Context, recs ...store.Record) ([]store.Record, error) {
	f.mu.Lock()
	if !f.fail && f.okLeft == 0 {
		f.fail = true
	}
	if !f.fail && f.okLeft > 0 {
		f.okLeft--
	}
	failing := f.fail
	f.mu.Unlock()
	if failing {
		return nil, errDiskFull
	}
	return f.Store.Append(ctx, recs...)
}

// rig is a registry on a double and a flaky memory store.
type rig struct {
	t       *testing.T
	reg     *Registry
	st      *flakyStore
	srv     *double
	logs    *logtest.Recorder
	mu      sync.Mutex
	notices []Notice
	admits  map[string]bool
	// compactAfter, when set, has the registry compact its log this soon.
	compactAfter int
}

func newRig(t *testing.T, caps ...string) *rig {
	t.Helper()
	if caps == nil {
		caps = []string{"channels.register", "channels.lifecycle", "channels.publish", "channels.incoming"}
	}
	rg := &rig{t: t, logs: logtest.New(), st: &flakyStore{Store: store.NewMemory(), okLeft: -1}, srv: newDouble(t, caps...), admits: map[string]bool{}}
	rg.open()
	t.Cleanup(func() { rg.reg.Close() })
	return rg
}

// open (re)starts the registry on the rig's store, as a host restart does.
func (rg *rig) open() {
	rg.t.Helper()
	reg, err := New(Options{Store: rg.st, Logger: rg.logs.Logger(), Describe: describeForTest, OnNotice: func(n Notice) {
		rg.mu.Lock()
		rg.notices = append(rg.notices, n)
		rg.mu.Unlock()
	}})
	if err != nil {
		rg.t.Fatal(err)
	}
	rg.reg = reg
	if rg.compactAfter > 0 {
		reg.do(func(m *machine) { m.compactAfter = rg.compactAfter })
	}
	reg.AddServer("s", rg.srv, ServerConfig{SendTools: []string{"send_message"}, Admits: func(id string) bool {
		rg.mu.Lock()
		defer rg.mu.Unlock()
		return rg.admits[id]
	}})
}

func (rg *rig) admit(id string, on bool) {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	rg.admits[id] = on
}

func (rg *rig) takeNotices() []Notice {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	n := rg.notices
	rg.notices = nil
	return n
}

// register registers descs and starts their lifecycle work.
func (rg *rig) register(descs ...protocol.ChannelDescriptor) protocol.ChannelResults {
	res, start := rg.reg.Register("s", descs)
	start()
	return res
}

func desc(id string, initiallyOpen bool) protocol.ChannelDescriptor {
	return protocol.ChannelDescriptor{ID: id, Type: "chat", Label: "#" + id, Address: json.RawMessage(`{"room":"` + id + `"}`), InitiallyOpen: initiallyOpen}
}

// decision returns the channel's current decision as "state/source", as
// the registry's snapshot reads it: a registered channel with no decision
// on record reads closed/default-closed; one neither registered nor
// decided, "none".
func (rg *rig) decision(id string) string {
	rg.t.Helper()
	return decisionAt(rg, "s", id)
}

// record returns the channel's durable decision, nil when none.
func (rg *rig) record(id string) *Decision {
	rg.reg.viewMu.RLock()
	defer rg.reg.viewMu.RUnlock()
	if v := rg.reg.views[Key{"s", id}]; v != nil {
		return v.decision
	}
	return nil
}

// tool calls a channel tool and returns its text and whether it failed.
func (rg *rig) tool(name, args string) (string, bool) {
	res := rg.reg.CallTool(context.Background(), name, json.RawMessage(args), Caller{})
	return res.Text(), res.IsError
}

// toolAsync calls a channel tool on a goroutine.
func (rg *rig) toolAsync(name, args string) <-chan protocol.CallToolResult {
	ch := make(chan protocol.CallToolResult, 1)
	go func() { ch <- rg.reg.CallTool(context.Background(), name, json.RawMessage(args), Caller{}) }()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Minute):
		t.Fatal("timed out")
		var zero T
		return zero
	}
}

// replayed returns the decisions a fresh replay of the store gives: the
// newest record of each channel, the default's record meaning none.
func (rg *rig) replayed() map[Key]string {
	out := map[Key]string{}
	rg.st.Replay(context.Background(), func(r store.Record) error {
		if r.Kind != store.KindDecision {
			return nil
		}
		if isDefault(&r) {
			delete(out, Key{r.Server, r.Channel})
			return nil
		}
		out[Key{r.Server, r.Channel}] = fmt.Sprintf("%s/%s", r.State, r.Source)
		return nil
	})
	return out
}

// describeForTest words a failed request for the harness: the host's
// texts are pinned through the host; here the reason only has to be
// recognizable.
func describeForTest(_ string, err error) string {
	var ce *wire.CallError
	if errors.As(err, &ce) && ce.Answer != nil {
		return "the server answered: " + ce.Answer.Message + "."
	}
	if errors.As(err, &ce) && ce.Cause == wire.CauseDeadline {
		return "no answer in time."
	}
	return err.Error()
}

// publishAsync publishes "hi" into id on a goroutine.
func (rg *rig) publishAsync(id string) <-chan PublishOutcome {
	ch := make(chan PublishOutcome, 1)
	go func() {
		ch <- rg.reg.Publish(context.Background(), "s", id, nil, []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi"}`)}, Caller{})
	}()
	return ch
}

// reply tells the registry a send tool posted into id.
func (rg *rig) reply(id string) {
	rg.reg.AfterToolCall("s", "send_message", json.RawMessage(`{"channelId":"`+id+`","text":"hi"}`), protocol.TextResult("sent", false), Caller{Agent: "a"})
}

// registered registers id (closed by default) and answers its close.
func (rg *rig) registered(ids ...string) {
	rg.t.Helper()
	for _, id := range ids {
		rg.register(desc(id, false))
		rg.srv.expect("close", id).ok()
	}
	synctest.Wait()
}

// checkReplay checks that a replay of the log gives the registry's
// decisions exactly.
func (rg *rig) checkReplay() {
	rg.t.Helper()
	live := map[Key]string{}
	for _, d := range rg.reg.Decisions() {
		live[Key{d.Server, d.Channel}] = fmt.Sprintf("%s/%s", d.State, d.Source)
	}
	if diff := cmp.Diff(live, rg.replayed()); diff != "" {
		rg.t.Errorf("replay differs from the live decisions (-live +replay):\n%s", diff)
	}
	// Snapshot reads the same registrations and decisions, together.
	var listed []ListedChannel
	var decided []Decision
	for _, sn := range rg.reg.Snapshot() {
		if sn.Listed != nil {
			listed = append(listed, *sn.Listed)
		}
		if sn.Decision != nil {
			decided = append(decided, *sn.Decision)
		}
		if sn.Listed == nil && sn.Decision == nil {
			rg.t.Errorf("Snapshot lists %v with neither a registration nor a decision", sn.Key)
		}
	}
	if diff := cmp.Diff(rg.reg.Channels(), listed, cmpopts.EquateEmpty()); diff != "" {
		rg.t.Errorf("Snapshot's registrations differ from Channels (-Channels +Snapshot):\n%s", diff)
	}
	var real []Decision
	for _, d := range decided {
		if d.Seq != 0 {
			real = append(real, d)
		}
	}
	if diff := cmp.Diff(rg.reg.Decisions(), real, cmpopts.EquateEmpty()); diff != "" {
		rg.t.Errorf("Snapshot's decisions differ from Decisions (-Decisions +Snapshot):\n%s", diff)
	}
}
