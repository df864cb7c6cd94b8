package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// waitFor bounds every wait on a real connection.
const waitFor = 15 * time.Second

var quietLog = slog.New(slog.DiscardHandler)

// hostImplements is what the test host grants by default: everything the
// server advertises, as mcplhost does.
var hostImplements = []string{"tools", "channels.register", "channels.incoming", "channels.lifecycle", "channels.publish"}

// testHost is the host side of a test: a session whose handler answers
// channels/register (accepting every channel) and channels/incoming
// (accepting a message only on a registered channel, as mcplhost does),
// and hands over every message that arrives.
type testHost struct {
	mu         sync.Mutex
	registered []protocol.ChannelDescriptor
	incoming   chan protocol.IncomingMessage
}

func (h *testHost) handler() wire.Handler {
	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodChannelsRegister, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsRegisterParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		res := protocol.ChannelResults{Results: []protocol.ChannelResult{}}
		for _, d := range p.Channels {
			h.registered = append(h.registered, d)
			res.Results = append(res.Results, protocol.ChannelResult{ID: d.ID, Accepted: true})
		}
		return res, nil
	})
	mux.HandleFunc(protocol.MethodChannelsIncoming, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsIncomingParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		res := protocol.ChannelsIncomingResult{Results: []protocol.IncomingResult{}}
		for _, m := range p.Messages {
			h.incoming <- m
			h.mu.Lock()
			known := slices.ContainsFunc(h.registered, func(d protocol.ChannelDescriptor) bool { return d.ID == m.ChannelID })
			h.mu.Unlock()
			if !known {
				res.Results = append(res.Results, protocol.IncomingResult{MessageID: m.MessageID,
					Reason: fmt.Sprintf("unknown channel %q — register it first (§14.5)", m.ChannelID)})
				continue
			}
			res.Results = append(res.Results, protocol.IncomingResult{MessageID: m.MessageID, Accepted: true, ConversationID: "conv-1"})
		}
		return res, nil
	})
	return mux
}

// next returns the next message the server delivered.
func (h *testHost) next(t *testing.T) protocol.IncomingMessage {
	t.Helper()
	select {
	case m := <-h.incoming:
		return m
	case <-time.After(waitFor):
		t.Fatal("no channels/incoming arrived")
		return protocol.IncomingMessage{}
	}
}

// connect starts a session to the server through dial, as a host that
// implements implements.
func connect(t *testing.T, implements []string, dial func(context.Context) (transport.Stream, error)) (*session.Session, *testHost) {
	t.Helper()
	h := &testHost{incoming: make(chan protocol.IncomingMessage, 16)}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	sess, err := session.Connect(ctx, session.Config{
		ID: "notes", Dial: dial, Implemented: implements, Handler: h.handler(),
		Logger: quietLog, RequestTimeout: waitFor,
	})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return sess, h
}

// call sends a request to the server and fails the test if it fails.
func call(t *testing.T, sess *session.Session, method string, params, result any) {
	t.Helper()
	if err := sess.Call(context.Background(), method, params, result); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

var noteID = regexp.MustCompile(`^note-[0-9a-f]{16}$`)

// checkNotes drives the server through the guide's story over sess, under
// a host that granted everything: the policy, the channel, a note, the
// agent's message.
func checkNotes(t *testing.T, sess *session.Session, h *testHost) {
	st := sess.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeAccepted {
		t.Fatalf("policy = %+v, want accepted", st.Policy)
	}
	if got := st.Grant.Enabled(); !slices.Equal(got, []string{"notes.inbox"}) {
		t.Errorf("enabled feature sets = %v, want [notes.inbox]", got)
	}
	// What the agent and the host's operator read of the server, as
	// docs/writing-a-server.md shows it.
	if got, want := st.Init.Instructions, "Call add_note to keep a note: it is posted in #inbox. What you say in #inbox is kept as a note too."; got != want {
		t.Errorf("instructions = %q, want %q", got, want)
	}
	if fs := st.Advertisement.FeatureSets; len(fs) != 1 || fs[0].Description != "The #inbox channel: every note is posted there, and what the agent says there is kept" {
		t.Errorf("feature sets = %+v", fs)
	}
	var tools protocol.ListToolsResult
	call(t, sess, protocol.MethodToolsList, nil, &tools)
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "add_note" || tools.Tools[0].Description != "Keeps a note and posts it in #inbox." {
		t.Errorf("tools/list = %+v", tools.Tools)
	}

	// Once the policy is in, #inbox is registered, then the agent greeted.
	hello := h.next(t)
	h.mu.Lock()
	registered := slices.Clone(h.registered)
	h.mu.Unlock()
	if len(registered) != 1 || registered[0].ID != "notes:#inbox" || registered[0].Label != "#inbox" ||
		registered[0].Direction != protocol.DirectionBidirectional || !registered[0].InitiallyOpen {
		t.Errorf("registered = %+v, want #inbox, bidirectional, initially open", registered)
	}
	if got := fmt.Sprintf("%s %s %q %v", hello.ChannelID, hello.Author, protocol.JoinText(hello.Content), hello.Tags); got !=
		`notes:#inbox {"name":"notes"} "Hello! Add a note with add_note; what you say here is kept too." [chat:addressed]` {
		t.Errorf("greeting = %s", got)
	}

	// The host opens #inbox, as mcplhost does after the registration.
	var opened protocol.ChannelsOpenResult
	call(t, sess, protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "notes:#inbox"}, &opened)
	if opened.Channel.ID != "notes:#inbox" || !opened.Channel.InitiallyOpen {
		t.Errorf("channels/open = %+v", opened)
	}

	// add_note keeps the note and delivers it in #inbox, under its id.
	var res protocol.CallToolResult
	call(t, sess, protocol.MethodToolsCall, protocol.CallToolParams{Name: "add_note", Arguments: json.RawMessage(`{"text":"buy milk"}`)}, &res)
	id, ok := strings.CutSuffix(strings.TrimPrefix(res.Text(), "Kept "), " and posted it in #inbox.")
	if res.IsError || !ok || !noteID.MatchString(id) {
		t.Fatalf("add_note = %q (isError %v)", res.Text(), res.IsError)
	}
	note := h.next(t)
	if got := fmt.Sprintf("%s %s %s %q %v", note.ChannelID, note.MessageID, note.Author, protocol.JoinText(note.Content), note.Tags); got !=
		fmt.Sprintf(`notes:#inbox %s {"name":"notes"} "buy milk" [chat:ambient]`, id) {
		t.Errorf("the note's message = %s", got)
	}
	res = protocol.CallToolResult{}
	call(t, sess, protocol.MethodToolsCall, protocol.CallToolParams{Name: "add_note", Arguments: json.RawMessage(`{"text":" "}`)}, &res)
	if !res.IsError || res.Text() != "A note needs some text." {
		t.Errorf("add_note of nothing = %q (isError %v)", res.Text(), res.IsError)
	}

	// What the agent says in #inbox is delivered, kept under a note id.
	var pub protocol.ChannelsPublishResult
	call(t, sess, protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{
		ChannelID: "notes:#inbox", ConversationID: "conv-1", Content: server.TextContent("Noted."),
	}, &pub)
	if !pub.Delivered || !noteID.MatchString(pub.MessageID) || pub.MessageID == id {
		t.Errorf("channels/publish = %+v, want delivered with a new note id", pub)
	}
	pub = protocol.ChannelsPublishResult{}
	call(t, sess, protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{ChannelID: "notes:#inbox", Content: server.TextContent("  ")}, &pub)
	if pub.Delivered || pub.Reason != "nothing to keep: the message has no text" {
		t.Errorf("channels/publish of nothing = %+v", pub)
	}
	err := sess.Call(context.Background(), protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{ChannelID: "notes:#elsewhere", Content: server.TextContent("hi")}, nil)
	var ce *wire.CallError
	if !errors.As(err, &ce) || ce.Answer == nil || ce.Answer.Code != protocol.CodeUnknownChannel {
		t.Errorf("channels/publish to another channel = %v, want -32023", err)
	}

	var closed protocol.ChannelsCloseResult
	call(t, sess, protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: "notes:#inbox"}, &closed)
	if !closed.Closed {
		t.Errorf("channels/close = %+v", closed)
	}
}

// TestStdio builds the command, runs it as a subprocess of a session, and
// closes the session: the server exits on its own when its stdin closes.
func TestStdio(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "notes")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var proc *transport.Process
	sess, h := connect(t, hostImplements, func(context.Context) (transport.Stream, error) {
		p, err := transport.Spawn(transport.Command{Argv: []string{bin}}, transport.StdioOptions{Logger: quietLog, StopWait: waitFor})
		proc = p
		return p, err
	})
	checkNotes(t, sess, h)
	sess.Close()
	select {
	case <-proc.Exited():
	case <-time.After(waitFor):
		t.Fatal("the server did not exit")
	}
	if info := proc.CloseInfo(); info.ExitCode != 0 || info.Signal != "" {
		t.Errorf("exit %d, signal %q: want a clean exit when stdin closed", info.ExitCode, info.Signal)
	}
}

// serveWebSocket serves n on 127.0.0.1 and connects a session to it.
func serveWebSocket(t *testing.T, n *notes, implements []string) (*session.Session, *testHost) {
	srv := httptest.NewServer(newServer(n))
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	sess, h := connect(t, implements, func(ctx context.Context) (transport.Stream, error) {
		return transport.DialWebSocket(ctx, url, transport.WebSocketOptions{Logger: quietLog})
	})
	t.Cleanup(func() { sess.Close() }) // before srv.Close, which waits for the connection
	return sess, h
}

// TestWebSocket runs the same story over WebSocket (Server.ServeHTTP),
// in process, and checks what the server kept.
func TestWebSocket(t *testing.T) {
	n := &notes{log: quietLog}
	sess, h := serveWebSocket(t, n, hostImplements)
	checkNotes(t, sess, h)
	n.mu.Lock()
	defer n.mu.Unlock()
	if want := []string{"buy milk", "Noted."}; !slices.Equal(n.kept, want) {
		t.Errorf("kept %q, want %q", n.kept, want)
	}
}

// TestDegraded connects as a host that does not implement
// channels.publish: the receipt says notes.inbox is disabled for want of
// it, and the server registers nothing and delivers nothing: add_note says
// its note was kept, not posted.
func TestDegraded(t *testing.T) {
	var logged syncBuffer
	n := &notes{log: slog.New(slog.NewTextHandler(&logged, nil))}
	sess, h := serveWebSocket(t, n, []string{"tools", "channels.register", "channels.incoming", "channels.lifecycle"})

	st := sess.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeDegraded || st.Policy.Receipt == nil {
		t.Fatalf("policy = %+v, want degraded", st.Policy)
	}
	rec, _ := json.Marshal(st.Policy.Receipt)
	if want := `{"accepted":true,"mode":"degraded","unavailableFeatures":[{"featureSet":"notes.inbox","missingCapabilities":["channels.publish"],"effect":"disabled"}]}`; string(rec) != want {
		t.Errorf("receipt = %s\nwant      %s", rec, want)
	}
	if got := st.Grant.Enabled(); len(got) != 0 {
		t.Errorf("enabled feature sets = %v, want none", got)
	}
	logged.wait(t, "notes.inbox is not enabled: #inbox is not registered")

	var res protocol.CallToolResult
	call(t, sess, protocol.MethodToolsCall, protocol.CallToolParams{Name: "add_note", Arguments: json.RawMessage(`{"text":"buy milk"}`)}, &res)
	if !regexp.MustCompile(`^Kept note-[0-9a-f]{16}\. #inbox is off: the host did not enable notes\.inbox\.$`).MatchString(res.Text()) {
		t.Errorf("add_note = %q", res.Text())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.registered) != 0 || len(h.incoming) != 0 {
		t.Errorf("registered %v and delivered %d messages, want nothing", h.registered, len(h.incoming))
	}
}

// syncBuffer is a log a test can wait on: each write wakes the waiters.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at each write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
	}
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

// wait waits (up to waitFor) for text in the log.
func (b *syncBuffer) wait(t *testing.T, text string) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		b.mu.Lock()
		s := b.buf.String()
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed
		b.mu.Unlock()
		if strings.Contains(s, text) {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the log lacks %q:\n%s", text, s)
		}
	}
}
