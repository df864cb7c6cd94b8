package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// TestMain fails the run if a test left a goroutine behind: a session's
// watcher, a connection's reader, the room's schedule.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait on a real connection.
const waitFor = 15 * time.Second

var quietLog = slog.New(slog.DiscardHandler)

// hostImplements is what the test host grants the room: every channel
// capability it advertises, all seven leaves, so the whole room can be
// driven.
var hostImplements = []string{"tools", "channels.register", "channels.lifecycle", "channels.publish", "channels.incoming",
	"channels.streaming", "channels.acknowledge", "channels.typing", "pushEvents"}

// scenarioScript needs no clock: the host's reactions, made while it
// answers channels/incoming (the room waits for that answer before its next
// post), decide what is open when each post comes. #random is never open
// and #dev is closed after "two": an ambient post there is not delivered,
// one that addresses the agent is, in a thread too. dave's direct message
// comes as a push event.
const scenarioScript = `
+0s #general alice: one
+0s #random carol: hidden in random
+0s #dev bob @agent: two
+0s #general alice: three
+0s #dev bob: four, after dev closed
+0s #dev bob @agent: still there? dev is closed
+0s #random carol @agent: a mention in random
+0s #dev/pr-12 bob @agent: in the thread
+0s @dm dave: just between us
+0s #general alice @agent: five
`

// testHost is the host side of a scenario: a session whose handler
// answers channels/register and channels/incoming, records what arrives,
// and reacts to some messages by opening and closing channels.
type testHost struct {
	t          *testing.T
	implements []string // what the host grants: hostImplements unless set
	refuse     string   // a channel id channels/register refuses, if set
	sess       atomic.Pointer[session.Session]
	up         chan struct{} // closed once sess is set (by Bind, before the connect)

	mu         sync.Mutex
	registered []protocol.ChannelDescriptor
	incoming   []protocol.IncomingMessage
	pushed     []protocol.PushEventParams
	done       chan struct{} // closed when "five" arrives
}

func newTestHost(t *testing.T) *testHost {
	return &testHost{t: t, implements: hostImplements, up: make(chan struct{}), done: make(chan struct{})}
}

func (h *testHost) handler() wire.Handler {
	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodChannelsRegister, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsRegisterParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		h.mu.Lock()
		h.registered = append(h.registered, p.Channels...)
		h.mu.Unlock()
		res := protocol.ChannelResults{Results: []protocol.ChannelResult{}}
		for _, d := range p.Channels {
			if d.ID == h.refuse {
				res.Results = append(res.Results, protocol.ChannelResult{ID: d.ID, Reason: "refused by the test"})
				continue
			}
			res.Results = append(res.Results, protocol.ChannelResult{ID: d.ID, Accepted: true})
		}
		return res, nil
	})
	mux.HandleFunc(protocol.MethodChannelsIncoming, func(ctx context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsIncomingParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		res := protocol.ChannelsIncomingResult{Results: []protocol.IncomingResult{}}
		for _, m := range p.Messages {
			h.mu.Lock()
			h.incoming = append(h.incoming, m)
			h.mu.Unlock()
			h.react(ctx, m)
			res.Results = append(res.Results, protocol.IncomingResult{MessageID: m.MessageID, Accepted: true, ConversationID: "conv-" + m.ChannelID})
		}
		return res, nil
	})
	return mux
}

// react opens #dev on "one", closes it on "two", and marks the end at
// "five".
func (h *testHost) react(ctx context.Context, m protocol.IncomingMessage) {
	text := protocol.JoinText(m.Content)
	switch {
	case text == "one":
		// By type and address, as SPEC §14.3 shows it.
		h.lifecycle(ctx, protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{Type: "chatroom", Address: json.RawMessage(`{"channel":"#dev"}`)})
	case strings.HasSuffix(text, "two"):
		h.lifecycle(ctx, protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: "chatroom:#dev"})
	case strings.HasSuffix(text, "five"):
		close(h.done)
	}
}

func (h *testHost) lifecycle(ctx context.Context, method string, params any) {
	select {
	case <-h.up:
	case <-time.After(waitFor):
		h.t.Error("the session never connected")
		return
	}
	var res json.RawMessage
	if err := h.sess.Load().Call(ctx, method, params, &res); err != nil {
		h.t.Errorf("%s: %v", method, err)
	}
}

// connect starts a session to the room through dial.
func (h *testHost) connect(dial func(context.Context) (transport.Stream, error)) *session.Session {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	s, err := session.Connect(ctx, session.Config{
		ID:          "chatroom",
		Dial:        dial,
		Implemented: h.implements,
		Handler:     h.handler(),
		// The session admits a push (its feature set declared and
		// enabled) before it comes here.
		OnPushEvent: func(_ context.Context, ev session.PushEvent) (protocol.PushEventResult, error) {
			h.mu.Lock()
			h.pushed = append(h.pushed, ev.Params)
			h.mu.Unlock()
			return protocol.PushEventResult{Accepted: true}, nil
		},
		Logger:         quietLog,
		RequestTimeout: waitFor,
		// The room may post before Connect returns (its first posts are
		// due at once): the session answers them from inside Connect, and
		// the reactions call it, so it is bound before the connect.
		Bind: func(s *session.Session) {
			h.sess.Store(s)
			close(h.up)
		},
	})
	if err != nil {
		h.t.Fatalf("connect: %v", err)
	}
	return s
}

// runScenario drives the room through the scenario over sess, and checks
// what the host received, what the room answered, and the room's
// transcript.
func runScenario(t *testing.T, h *testHost, sess *session.Session, tr *transcript) {
	ctx := context.Background()
	st := sess.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted {
		t.Fatalf("policy = %+v, want accepted (every feature set's uses granted)", st.Policy)
	}
	if got := st.Grant.Enabled(); !slices.Equal(got, []string{"chat.direct", "chat.messaging"}) {
		t.Errorf("enabled feature sets = %v", got)
	}

	select {
	case <-h.done:
	case <-time.After(waitFor):
		h.mu.Lock()
		t.Fatalf("the scenario did not finish; incoming so far: %v", h.incoming)
	}

	h.mu.Lock()
	registered, incoming := slices.Clone(h.registered), slices.Clone(h.incoming)
	h.mu.Unlock()
	var regs []string
	for _, d := range registered {
		regs = append(regs, fmt.Sprintf("%s open=%v %s", d.ID, d.InitiallyOpen, d.Capabilities))
	}
	// #dev has threads: it posts exactly where asked (RFC-011); the others
	// have none. The DM is not registered: its push names it.
	if diff := fmt.Sprint(regs); diff != `[chatroom:#general open=true {"publish":{"target":"root"}} chatroom:#random open=false {"publish":{"target":"root"}} chatroom:#dev open=false {"publish":{"target":"exact"}}]` {
		t.Errorf("registered: %s", diff)
	}
	// #random was never opened; #dev's "four" came after it was closed.
	// The posts that address the agent came all the same.
	var got []string
	for _, m := range incoming {
		place := m.ChannelID
		if m.ThreadID != "" {
			place += " thread " + m.ThreadID
		}
		got = append(got, fmt.Sprintf("%s %s %q %v", place, m.Author, protocol.JoinText(m.Content), m.Tags))
	}
	want := []string{
		`chatroom:#general {"id":"u_alice","name":"alice"} "one" [chat:ambient chat:from-human]`,
		`chatroom:#dev {"id":"u_bob","name":"bob"} "@agent two" [chat:mention chat:addressed chat:from-human]`,
		`chatroom:#general {"id":"u_alice","name":"alice"} "three" [chat:ambient chat:from-human]`,
		`chatroom:#dev {"id":"u_bob","name":"bob"} "@agent still there? dev is closed" [chat:mention chat:addressed chat:from-human]`,
		`chatroom:#random {"id":"u_carol","name":"carol"} "@agent a mention in random" [chat:mention chat:addressed chat:from-human]`,
		`chatroom:#dev thread pr-12 {"id":"u_bob","name":"bob"} "@agent in the thread" [chat:mention chat:addressed chat:from-human]`,
		`chatroom:#general {"id":"u_alice","name":"alice"} "@agent five" [chat:mention chat:addressed chat:from-human]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("incoming:\ngot  %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	// The ids are this connection's run's: chatroom-RUN-N, N counting the
	// posts, delivered or not (issue 27: unique across runs).
	run := runPrefix(t, incoming)
	for i, n := range []int{1, 3, 4, 6, 7, 8, 10} {
		if id := incoming[i].MessageID; id != run+strconv.Itoa(n) {
			t.Errorf("message %d's id is %q, want %s%d", i, id, run, n)
		}
	}

	// The agent works on an answer in #general: typing (the start
	// repeated, as the host does every 7 s), the text streamed, then
	// published, then the stop.
	notify := func(method string, params any) {
		t.Helper()
		if err := sess.Notify(ctx, method, params); err != nil {
			t.Fatal(err)
		}
	}
	typing := func(channel, op string) {
		notify(protocol.MethodChannelsTyping, map[string]string{"channelId": channel, "op": op})
	}
	chunk := func(inference, channel string, index int, delta string) {
		notify(protocol.MethodChannelsOutgoingChunk, map[string]any{"inferenceId": inference, "conversationId": "conv-" + channel, "channelId": channel, "index": index, "delta": delta})
	}
	typing("chatroom:#general", "start")
	typing("chatroom:#general", "start")
	chunk("inf-1", "chatroom:#general", 0, "The release ")
	chunk("inf-1", "chatroom:#general", 1, "is on Thursday.")
	notify(protocol.MethodChannelsOutgoingComplete, map[string]any{"inferenceId": "inf-1", "conversationId": "conv-chatroom:#general", "channelId": "chatroom:#general",
		"content": []json.RawMessage{json.RawMessage(`{"type":"text","text":"The release is on Thursday."}`)}})

	// The agent speaks: delivered, with the room's id for it.
	var pub protocol.ChannelsPublishResult
	if err := sess.Call(ctx, protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{
		ChannelID: "chatroom:#general", ConversationID: "conv-chatroom:#general",
		Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"The release is on Thursday."}`)},
	}, &pub); err != nil {
		t.Fatal(err)
	}
	if !pub.Delivered || pub.MessageID != "chatroom-agent-1" {
		t.Errorf("publish = %+v", pub)
	}
	typing("chatroom:#general", "start")
	typing("chatroom:#general", "stop")
	// In #dev the agent types, streams (the chunks arriving out of
	// order, and a complete without text: the chunks make the text),
	// and says nothing after all.
	typing("chatroom:#dev", "start")
	chunk("inf-2", "chatroom:#dev", 3, "world")
	chunk("inf-2", "chatroom:#dev", 2, "hello ")
	notify(protocol.MethodChannelsOutgoingComplete, map[string]any{"inferenceId": "inf-2", "channelId": "chatroom:#dev", "content": []any{}})
	typing("chatroom:#dev", "stop")

	// The agent saw carol's mention in #random (chatroom-7, the
	// scenario's seventh post) and stays out: acknowledged with the
	// value. A message the room does not know, or not in that channel,
	// is not.
	for _, tc := range []struct {
		channel, message, want string
	}{
		{"chatroom:#random", run + "7", `{"acknowledged":true,"representation":"👀"}`},
		{"chatroom:#random", run + "99", `{"acknowledged":false,"reason":"there is no message ` + run + `99 in #random"}`},
		{"chatroom:#dev", run + "7", `{"acknowledged":false,"reason":"message ` + run + `7 is in #random, not #dev"}`},
		{"chatroom:#random", "chatroom-7", `{"acknowledged":false,"reason":"there is no message chatroom-7 in #random"}`},
	} {
		var ack json.RawMessage
		if err := sess.Call(ctx, protocol.MethodChannelsAcknowledge, map[string]string{"channelId": tc.channel, "messageId": tc.message, "intent": "seen-not-opening", "value": "👀"}, &ack); err != nil {
			t.Fatal(err)
		}
		if string(ack) != tc.want {
			t.Errorf("acknowledge %s in %s = %s, want %s", tc.message, tc.channel, ack, tc.want)
		}
	}

	// An unknown channel is -32023, from the SDK's mapping of the room's
	// answer.
	err := sess.Call(ctx, protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{Type: "chatroom", Address: json.RawMessage(`{"channel":"#ops"}`)}, nil)
	if ce, ok := err.(*wire.CallError); !ok || ce.Answer.Code != protocol.CodeUnknownChannel {
		t.Errorf("open #ops = %v, want -32023", err)
	}
	// The history tool has what was never delivered.
	var hist protocol.CallToolResult
	if err := sess.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: "history", Arguments: json.RawMessage(`{"channel":"#random"}`)}, &hist); err != nil {
		t.Fatal(err)
	}
	if want := "carol: hidden in random\ncarol: @agent a mention in random"; hist.IsError || hist.Text() != want {
		t.Errorf("history #random = %q (isError %v)", hist.Text(), hist.IsError)
	}

	for _, line := range []string{
		"[#general] (open from the start)",
		"[#general] alice: one",
		"[#random] carol: hidden in random   (not delivered: #random is not open)",
		"[#dev] (the agent opened the channel)",
		"[#dev] bob: @agent two",
		"[#dev] (the agent closed the channel)",
		"[#dev] bob: four, after dev closed   (not delivered: #dev is not open)",
		"[#dev] bob: @agent still there? dev is closed   (delivered though #dev is not open: it addresses the agent)",
		"[#random] carol: @agent a mention in random   (delivered though #random is not open: it addresses the agent)",
		"[#general] AGENT: The release is on Thursday.",
	} {
		tr.wait(t, line)
	}
	// What the host said of its agent's work: one line per change, in
	// the order sent, none for the repeated start or for a stop after
	// the agent's message.
	signals := []string{
		"[#general] (the agent is typing…)",
		"[#general] (streamed to the room in 2 chunks: The release is on Thursday.)",
		"[#general] AGENT: The release is on Thursday.",
		"[#dev] (the agent is typing…)",
		"[#dev] (streamed to the room in 2 chunks: hello world)",
		"[#dev] (the agent stopped typing)",
		"[#random] (the agent saw carol's message and stays out: 👀)",
	}
	tr.wait(t, signals[len(signals)-1])
	var shown []string
	for _, line := range strings.Split(tr.String(), "\n") {
		if strings.Contains(line, "] (the agent ") && !strings.Contains(line, "the channel)") ||
			strings.Contains(line, "] (streamed") || strings.Contains(line, "] AGENT: ") {
			shown = append(shown, line)
		}
	}
	if !slices.Equal(shown, signals) {
		t.Errorf("typing, streams, reactions and the agent's messages in the transcript:\ngot  %s\nwant %s",
			strings.Join(shown, "\n     "), strings.Join(signals, "\n     "))
	}
	threadsAndDMs(t, h, sess, tr)
}

// threadsAndDMs checks the scenario's thread and direct message: dave's
// DM came as a push event naming a DM channel the room never registered;
// the agent's publishes land where they ask (RFC-011), in bob's thread of
// #dev, at a root, in dave's DM, and each answer says where; a thread that
// does not exist, or a thread of a channel without threads, is refused
// with nothing posted.
func threadsAndDMs(t *testing.T, h *testHost, sess *session.Session, tr *transcript) {
	ctx := context.Background()
	h.mu.Lock()
	pushed := slices.Clone(h.pushed)
	h.mu.Unlock()
	if len(pushed) != 1 {
		t.Fatalf("%d push events, want 1 (dave's DM): %+v", len(pushed), pushed)
	}
	ev := pushed[0]
	h.mu.Lock()
	run := runPrefix(t, h.incoming)
	h.mu.Unlock()
	var origin map[string]any
	json.Unmarshal(ev.Origin, &origin)
	wantOrigin := map[string]any{"mcplChannelId": "chatroom:dm:dave", "messageId": run + "9", "isDM": true, "authorId": "u_dave", "authorName": "dave"}
	if ev.FeatureSet != "chat.direct" || ev.EventID != "evt-"+run+"9" || !maps.Equal(origin, wantOrigin) ||
		!slices.Equal(ev.Tags, []string{"chat:dm", "chat:from-human"}) || protocol.JoinText(ev.Payload.Content) != "just between us" {
		t.Errorf("the DM's push: featureSet %q, eventId %q, origin %s, tags %v, text %q", ev.FeatureSet, ev.EventID, ev.Origin, ev.Tags, protocol.JoinText(ev.Payload.Content))
	}
	tr.wait(t, "[@dave] dave (to the agent, privately): just between us")
	tr.wait(t, "[#dev] bob (in thread pr-12): @agent in the thread   (delivered though #dev is not open: it addresses the agent)")

	// The DM channel opens, as the host does before its first reply into
	// it; one nobody has written from does not exist.
	var open protocol.ChannelsOpenResult
	if err := sess.Call(ctx, protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "chatroom:dm:dave"}, &open); err != nil {
		t.Fatal(err)
	}
	if d := open.Channel; d.ID != "chatroom:dm:dave" || d.Label != "@dave" || !slices.Equal(d.Tags, []string{"chat:dm"}) || string(d.Capabilities) != `{"publish":{"target":"root"}}` {
		t.Errorf("the DM's descriptor = %+v", d)
	}
	tr.wait(t, "[@dave] (the agent opened the channel)")
	err := sess.Call(ctx, protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "chatroom:dm:zed"}, nil)
	if ce, ok := err.(*wire.CallError); !ok || ce.Answer.Code != protocol.CodeUnknownChannel {
		t.Errorf("open chatroom:dm:zed = %v, want -32023", err)
	}

	// publish sends threadId as given: absent when thread is nil, else
	// the raw value ("null", a JSON string).
	publish := func(channel, thread, text string) string {
		t.Helper()
		p := map[string]any{"channelId": channel, "content": []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"type":"text","text":%q}`, text))}}
		if thread != "" {
			p["threadId"] = json.RawMessage(thread)
		}
		var res json.RawMessage
		if err := sess.Call(ctx, protocol.MethodChannelsPublish, p, &res); err != nil {
			t.Fatal(err)
		}
		return string(res)
	}
	for _, tc := range []struct{ channel, thread, text, want, line string }{
		{"chatroom:#dev", `"pr-12"`, "in the thread, yes", `{"delivered":true,"messageId":"chatroom-agent-2","threadId":"pr-12"}`, "[#dev] AGENT (in thread pr-12): in the thread, yes"},
		{"chatroom:#dev", `null`, "at dev's root", `{"delivered":true,"messageId":"chatroom-agent-3","threadId":null}`, "[#dev] AGENT: at dev's root"},
		{"chatroom:#dev", `"pr-99"`, "lost", `{"delivered":false,"reason":"not posted: there is no thread pr-99 in #dev"}`, "[#dev] (the agent's message was refused: there is no thread pr-99 in #dev)"},
		{"chatroom:#general", `"pr-12"`, "lost too", `{"delivered":false,"reason":"not posted: #general has no threads, so it has no thread pr-12"}`, "[#general] (the agent's message was refused: #general has no threads, so it has no thread pr-12)"},
		{"chatroom:#general", `null`, "at general's root", `{"delivered":true,"messageId":"chatroom-agent-4","threadId":null}`, "[#general] AGENT: at general's root"},
		{"chatroom:dm:dave", ``, "between us, then", `{"delivered":true,"messageId":"chatroom-agent-5"}`, "[@dave] AGENT (to dave, privately): between us, then"},
		{"chatroom:dm:dave", `"pr-12"`, "not in a DM", `{"delivered":false,"reason":"not posted: @dave has no threads, so it has no thread pr-12"}`, "[@dave] (the agent's message was refused: @dave has no threads, so it has no thread pr-12)"},
	} {
		if got := publish(tc.channel, tc.thread, tc.text); got != tc.want {
			t.Errorf("publish %q to %s, threadId %s = %s, want %s", tc.text, tc.channel, tc.thread, got, tc.want)
		}
		tr.wait(t, tc.line)
	}
	// Nothing refused was posted: #dev's history has the thread's post
	// and the root's, and not the lost one.
	var hist protocol.CallToolResult
	if err := sess.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: "history", Arguments: json.RawMessage(`{"channel":"#dev"}`)}, &hist); err != nil {
		t.Fatal(err)
	}
	if text := hist.Text(); !strings.HasSuffix(text, "bob (in thread pr-12): @agent in the thread\nagent (in thread pr-12): in the thread, yes\nagent: at dev's root") {
		t.Errorf("history #dev = %q", text)
	}
	if strings.Contains(tr.String(), "lost") {
		t.Errorf("a refused message was posted:\n%s", tr)
	}
}

// runIDs are the ids of a connection's first post: chatroom-RUN-1, RUN
// drawn for the connection (Room.WithRun).
var runIDs = regexp.MustCompile(`^chatroom-[0-9a-f]{8}-1$`)

// runPrefix is "chatroom-RUN-" of the connection whose posts incoming
// are, from the first.
func runPrefix(t *testing.T, incoming []protocol.IncomingMessage) string {
	t.Helper()
	if len(incoming) == 0 || !runIDs.MatchString(incoming[0].MessageID) {
		t.Fatalf("the first post's id is not chatroom-RUN-1, RUN 8 hex digits: %+v", incoming)
	}
	return strings.TrimSuffix(incoming[0].MessageID, "1")
}

// buildChatroom builds the command into a temporary directory.
func buildChatroom(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chatroom")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// transcript collects the room's transcript and lets a test wait for a
// line of it.
type transcript struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on each write
}

func newTranscript() *transcript { return &transcript{changed: make(chan struct{})} }

// Write implements io.Writer: the room writes its transcript here.
func (tr *transcript) Write(p []byte) (int, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.buf.Write(p)
	close(tr.changed)
	tr.changed = make(chan struct{})
	return len(p), nil
}

func (tr *transcript) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.buf.String()
}

// wait waits for line to appear in the transcript.
func (tr *transcript) wait(t *testing.T, line string) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		tr.mu.Lock()
		text, changed := tr.buf.String(), tr.changed
		tr.mu.Unlock()
		if strings.Contains(text, line+"\n") {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Errorf("transcript lacks %q:\n%s", line, text)
			return
		}
	}
}

// stderrLog is a slog handler that writes a subprocess's stderr, which
// transport.Process logs line by line at debug level, to a transcript.
type stderrLog struct{ tr *transcript }

func (s stderrLog) Enabled(context.Context, slog.Level) bool { return true }
func (s stderrLog) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s stderrLog) WithGroup(string) slog.Handler            { return s }
func (s stderrLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "server stderr" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			s.tr.Write([]byte(a.Value.String() + "\n"))
		}
		return true
	})
	return nil
}

// TestStdio runs the built command as a subprocess of a session, through
// the scenario, then closes the session: the room exits on its own when
// its stdin closes. Its transcript goes to stderr, or, with -transcript,
// to a FIFO the test reads as the room writes it (as mcplhost demo does),
// and then stderr has none of it.
func TestStdio(t *testing.T) {
	bin := buildChatroom(t)
	script := filepath.Join(t.TempDir(), "scenario.script")
	if err := os.WriteFile(script, []byte(scenarioScript), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, toFIFO := range []bool{false, true} {
		name := "stderr"
		if toFIFO {
			name = "fifo"
		}
		t.Run(name, func(t *testing.T) {
			stderr := newTranscript()
			tr := stderr
			argv := []string{bin, "-script", script}
			if toFIFO {
				tr = newTranscript()
				argv = append(argv, "-transcript", readFIFO(t, tr))
			}
			var proc *transport.Process
			h := newTestHost(t)
			sess := h.connect(func(context.Context) (transport.Stream, error) {
				p, err := transport.Spawn(transport.Command{Argv: argv},
					transport.StdioOptions{Logger: slog.New(stderrLog{stderr}), StopWait: waitFor})
				proc = p
				return p, err
			})
			runScenario(t, h, sess, tr)
			tr.wait(t, ScriptOver)
			sess.Close()
			select {
			case <-proc.Exited():
			case <-time.After(waitFor):
				t.Fatal("the chatroom did not exit")
			}
			if info := proc.CloseInfo(); info.ExitCode != 0 || info.Signal != "" {
				t.Errorf("exit %d, signal %q: want a clean exit when stdin closed; stderr:\n%s", info.ExitCode, info.Signal, stderr)
			}
			if toFIFO && strings.Contains(stderr.String(), "[#general]") {
				t.Errorf("with -transcript, stderr has the transcript too:\n%s", stderr)
			}
		})
	}
}

// readFIFO makes a FIFO and copies the lines written to it into tr, until
// the test's cleanup, which ends the copy and waits for it. It returns the
// FIFO's path.
//
// The test holds the FIFO open for reading and writing (as mcplhost demo
// does), so the room's open of it never waits, and the copy sees no end of
// file when the room exits: the cleanup writes a last line of its own, and
// the copy stops there, after everything the room wrote.
func readFIFO(t *testing.T, tr *transcript) string {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "room.transcript")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const end = "(the test's end of the FIFO)\n"
	copied := make(chan error, 1)
	go func() {
		r := bufio.NewReader(f)
		for {
			line, err := r.ReadString('\n')
			if err != nil || line == end {
				copied <- err
				return
			}
			tr.Write([]byte(line))
		}
	}()
	t.Cleanup(func() {
		if _, err := f.WriteString(end); err != nil {
			t.Errorf("ending the FIFO: %v", err)
		} else if err := <-copied; err != nil {
			t.Errorf("reading the FIFO: %v", err)
		}
		f.Close()
	})
	return fifo
}

// TestTranscriptFlag: -transcript and -q together are a usage error, and a
// transcript file that can't be opened stops the room before it serves.
func TestTranscriptFlag(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-q", "-transcript", filepath.Join(t.TempDir(), "t")}, &out); code != 2 || !strings.Contains(out.String(), "[-q | -transcript file]") {
		t.Errorf("-q -transcript: exit %d, %q; want 2 and the usage", code, out.String())
	}
	out.Reset()
	missing := filepath.Join(t.TempDir(), "no-such-dir", "t")
	if code := run(context.Background(), []string{"-transcript", missing}, &out); code != 1 || !strings.Contains(out.String(), "chatroom: open "+missing) {
		t.Errorf("-transcript %s: exit %d, %q; want 1 and the error", missing, code, out.String())
	}
}

// A channel the room counts open from the start, that the host refuses to
// register, is not open after all, and its transcript says so.
func TestRefusedChannelNotOpen(t *testing.T) {
	posts, err := ParseScript(strings.NewReader("+0s #random carol: hi\n"), Channels)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTranscript()
	srv := httptest.NewServer(NewRoom(posts, 1, false, tr, quietLog).Server("test"))
	defer srv.Close()
	h := newTestHost(t)
	h.refuse = "chatroom:#general"
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	sess := h.connect(func(ctx context.Context) (transport.Stream, error) {
		return transport.DialWebSocket(ctx, url, transport.WebSocketOptions{Logger: quietLog})
	})
	defer sess.Close()
	tr.wait(t, "[#general] (open from the start)")
	tr.wait(t, "[#general] (not open after all: the host did not accept the channel)")
}

// TestWebSocket serves the room over WebSocket on 127.0.0.1 and runs the
// scenario through a session that dials it.
func TestWebSocket(t *testing.T) {
	posts, err := ParseScript(strings.NewReader(scenarioScript), Channels)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTranscript()
	srv := httptest.NewServer(NewRoom(posts, 1, false, tr, quietLog).Server("test"))
	defer srv.Close()
	h := newTestHost(t)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	sess := h.connect(func(ctx context.Context) (transport.Stream, error) {
		return transport.DialWebSocket(ctx, url, transport.WebSocketOptions{Logger: quietLog})
	})
	defer sess.Close()
	runScenario(t, h, sess, tr)
}
