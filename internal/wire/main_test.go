package wire_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testserver.Cleanup()
		os.Exit(code)
	}))
}

// server is the peer name the tests give a Peer; every pinned text names it.
const server = "discord"

// ---- log capture ----

// logRec and recorder capture what the peer logs.
type (
	logRec   = logtest.Record
	recorder = logtest.Recorder
)

func newRecorder() *recorder { return logtest.New() }

// wantAttrs checks that rec carries each attribute with the given value
// (compared by its printed form, so 3, int64(3) and "3" are told apart by
// kind only where it matters to the test).
func wantAttrs(t testing.TB, rec logRec, want map[string]any) {
	t.Helper()
	for k, w := range want {
		v, ok := rec.Attrs[k]
		if !ok {
			t.Errorf("log record %q has no attribute %q; has %v", rec.Message, k, rec.Attrs)
			continue
		}
		if got := fmt.Sprint(v.Any()); got != fmt.Sprint(w) {
			t.Errorf("log record %q: %s = %s, want %v", rec.Message, k, got, w)
		}
	}
}

// noAttrs checks that rec carries none of keys.
func noAttrs(t testing.TB, rec logRec, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, ok := rec.Attrs[k]; ok {
			t.Errorf("log record %q has attribute %s=%v, want none", rec.Message, k, v)
		}
	}
}

// ---- operator texts ----

// hostWords are words only the host's agent-facing text uses. The wire's
// text is read by the operator of a host and of a server built with the
// SDK alike, so it never calls the peer a server or a host, never speaks
// to an agent or to whoever reads it, and never says what to do next.
var hostWords = []string{
	"this host", "ask whoever", "whoever", "agent", "host", "server", "you",
	"reconnect", "try again", "check its effect", "took effect", "nothing ran",
}

// assertOperatorText checks text, a CallError's Error: one line (no control
// character, no line or paragraph separator), starting with the method and
// the quoted peer name, with no host-only wording in the words the wire
// chose. In an error answer the peer's message follows, one line and
// bounded to 500 bytes; a transport's or decoder's words close the text
// where the cause carries them.
func assertOperatorText(t testing.TB, text string, ce *wire.CallError) {
	t.Helper()
	for _, r := range text {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			t.Errorf("operator text holds %U, not one line: %q", r, text)
		}
	}
	subject := ce.Method
	if subject == "" {
		subject = "request"
	}
	if ce.Server != "" {
		subject += " to " + strconv.Quote(ce.Server)
	}
	own, ok := strings.CutPrefix(text, subject)
	if !ok || !(strings.HasPrefix(own, ": ") || strings.HasPrefix(own, " not sent: ")) {
		t.Errorf("operator text does not start with %q and a colon or \" not sent:\": %q", subject, text)
	}
	switch {
	case ce.Cause == wire.CauseErrorAnswer && ce.Answer != nil:
		want := wire.OneLine(ce.Answer.Message, 500)
		prefix := fmt.Sprintf(": error %d: ", ce.Answer.Code)
		if want == "" {
			prefix = fmt.Sprintf(": error %d", ce.Answer.Code) // no words, no colon
		}
		words, ok := strings.CutPrefix(own, prefix)
		if !ok {
			t.Errorf("error answer's text does not give the code as %q: %q", prefix, text)
		}
		if words != want {
			t.Errorf("error answer's text gives the peer's words as %q, want them one line and bounded: %q", words, want)
		}
		if len(words) > 500+len("…") {
			t.Errorf("the peer's words are %d bytes, over 500", len(words))
		}
		own = prefix
	case (ce.Cause == wire.CauseWriteFailed || ce.Cause == wire.CauseBadAnswer) && ce.Err != nil:
		words, ok := strings.CutSuffix(own, ": "+ce.Err.Error())
		if !ok {
			t.Errorf("operator text does not end with the underlying error %q: %q", ce.Err, text)
		}
		own = words
	}
	lower := strings.ToLower(own)
	for _, bad := range hostWords {
		if strings.Contains(lower, bad) {
			t.Errorf("operator text holds the host-only wording %q: %s", bad, text)
		}
	}
}

// callError asserts err is a *wire.CallError with the given outcome and
// cause, matching the sentinels they call for (and no others), and returns
// it.
func callError(t testing.TB, err error, outcome wire.Outcome, cause wire.Cause) *wire.CallError {
	t.Helper()
	if err == nil {
		t.Fatalf("want a *wire.CallError (%v), got success", outcome)
	}
	ce, ok := err.(*wire.CallError)
	if !ok {
		t.Fatalf("want a *wire.CallError, got %T: %v", err, err)
	}
	if ce.Outcome != outcome || ce.Cause != cause {
		t.Fatalf("outcome/cause = %v/%d, want %v/%d; text: %s", ce.Outcome, ce.Cause, outcome, cause, ce.Error())
	}
	for sentinel, want := range map[error]bool{
		wire.ErrNotSent:    outcome == wire.NotSent,
		wire.ErrNoAnswer:   outcome == wire.NoResponse || outcome == wire.BadResponse,
		wire.ErrConnClosed: cause == wire.CauseClosed || cause == wire.CauseClosedHere || cause == wire.CauseTooLarge || cause == wire.CauseStalled,
	} {
		if got := errors.Is(err, sentinel); got != want {
			t.Errorf("errors.Is(%v/%d, %q) = %v, want %v", outcome, cause, sentinel, got, want)
		}
	}
	var pe *jsonrpc.Error
	if got, want := errors.As(err, &pe), outcome == wire.ErrorResponse; got != want {
		t.Errorf("errors.As(%v/%d, *jsonrpc.Error) = %v, want %v", outcome, cause, got, want)
	} else if got && pe != ce.Answer {
		t.Errorf("errors.As reached %+v, not the CallError's Answer %+v", pe, ce.Answer)
	}
	return ce
}

// ---- a real subprocess server ----

// spawnProc starts the test server program as a subprocess.
func spawnProc(t *testing.T, sopts transport.StdioOptions, args ...string) *transport.Process {
	t.Helper()
	if sopts.Logger == nil {
		sopts.Logger = slog.New(slog.DiscardHandler)
	}
	proc, err := transport.Spawn(transport.Command{Argv: append([]string{testserver.Binary(t)}, args...)}, sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Close() })
	return proc
}

// newPeer puts a Peer on s, closed when the test ends. opts.Name defaults to
// server and opts.Logger to a fresh recorder's.
func newPeer(t *testing.T, s transport.Stream, opts wire.Options) (*wire.Peer, *recorder) {
	t.Helper()
	rec := newRecorder()
	if opts.Name == "" {
		opts.Name = server
	}
	if opts.Logger == nil {
		opts.Logger = rec.Logger()
	}
	p := wire.NewPeer(s, opts)
	t.Cleanup(func() { p.Close() })
	return p, rec
}

// spawnServer starts the test server program and puts a Peer on it.
func spawnServer(t *testing.T, opts wire.Options, sopts transport.StdioOptions, args ...string) (*wire.Peer, *recorder) {
	t.Helper()
	return newPeer(t, spawnProc(t, sopts, args...), opts)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// initialize runs the MCP handshake and returns the server's answer.
func initialize(t *testing.T, p *wire.Peer) protocol.InitializeResult {
	t.Helper()
	ctx := testCtx(t)
	var res protocol.InitializeResult
	err := p.Call(ctx, protocol.MethodInitialize, protocol.InitializeParams{
		ProtocolVersion: protocol.ProtocolVersion,
		ClientInfo:      protocol.Implementation{Name: "wire-test", Version: "0"},
	}, &res)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if err := p.Notify(ctx, protocol.MethodInitialized, nil); err != nil {
		t.Fatalf("initialized: %v", err)
	}
	return res
}

// callTool calls one of the test server's tools.
func callTool(ctx context.Context, p *wire.Peer, name string, args any, opts ...wire.CallOption) (protocol.CallToolResult, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	var res protocol.CallToolResult
	err = p.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: name, Arguments: raw}, &res, opts...)
	return res, err
}

// echo calls the echo tool and checks its answer.
func echo(t *testing.T, p *wire.Peer, text string) {
	t.Helper()
	res, err := callTool(testCtx(t), p, "echo", map[string]string{"text": text})
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if got := res.Text(); got != text {
		t.Fatalf("echo answered %q, want %q", got, text)
	}
}

// waitDone waits for the peer's connection to end.
func waitDone(t testing.TB, p *wire.Peer) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the connection did not end")
	}
}

// ---- stream wrappers ----

// tapStream is a Stream that reports each message written whole.
type tapStream struct {
	transport.Stream
	onWrite func(msg []byte)
}

func (s *tapStream) Write(ctx context.Context, msg []byte) error {
	err := s.Stream.Write(ctx, msg)
	if err == nil && s.onWrite != nil {
		s.onWrite(msg)
	}
	return err
}

// writtenWhen returns a tap on s and a channel closed once a message
// containing marker has been written whole.
func writtenWhen(s transport.Stream, marker string) (transport.Stream, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return &tapStream{Stream: s, onWrite: func(msg []byte) {
		if strings.Contains(string(msg), marker) {
			once.Do(func() { close(ch) })
		}
	}}, ch
}

// ---- the other end of a pipe, driven by hand ----

// farEnd is the far end of a transport.Pipe whose near end a Peer holds: the
// test writes raw lines and reads what the Peer wrote.
type farEnd struct {
	t testing.TB
	s transport.Stream
}

// pipePeer puts a Peer on one end of a pipe and returns the other.
func pipePeer(t *testing.T, opts wire.Options) (*wire.Peer, *farEnd, *recorder) {
	t.Helper()
	a, b := transport.Pipe(0)
	p, rec := newPeer(t, a, opts)
	t.Cleanup(func() { b.Close() })
	return p, &farEnd{t: t, s: b}, rec
}

// send writes one raw line.
func (f *farEnd) send(line string) {
	if err := f.s.Write(context.Background(), []byte(line)); err != nil {
		f.t.Errorf("far end: write %s: %v", line, err)
	}
}

// sendf writes one raw line built from format.
func (f *farEnd) sendf(format string, args ...any) { f.send(fmt.Sprintf(format, args...)) }

// wireMsg is a message as the far end reads it.
type wireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
	raw     string
}

// read reads the next message the Peer wrote, checking it is JSON-RPC 2.0.
func (f *farEnd) read() (wireMsg, error) {
	b, err := f.s.Read()
	if err != nil {
		return wireMsg{}, err
	}
	var m wireMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return wireMsg{}, fmt.Errorf("far end read a line that is not JSON: %q", b)
	}
	if m.JSONRPC != "2.0" {
		return wireMsg{}, fmt.Errorf("far end read a message without jsonrpc 2.0: %s", b)
	}
	m.raw = string(b)
	return m, nil
}

// mustRead reads the next message or fails the test.
func (f *farEnd) mustRead() wireMsg {
	f.t.Helper()
	m, err := f.read()
	if err != nil {
		f.t.Fatalf("far end: %v", err)
	}
	return m
}

// refusingStream is a Stream whose Write refuses while refuse is set, as a
// transport that cannot take a message does.
type refusingStream struct {
	transport.Stream
	refuse atomic.Bool
}

var errRefused = errors.New("write |1: no buffer space available")

func (s *refusingStream) Write(ctx context.Context, msg []byte) error {
	if s.refuse.Load() {
		return errRefused
	}
	return s.Stream.Write(ctx, msg)
}

// mustCancelled reads the next message, which must be the
// notifications/cancelled for request id, giving reason, and nothing else.
func (f *farEnd) mustCancelled(id json.RawMessage, reason string) {
	f.t.Helper()
	m := f.mustRead()
	want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":%q}}`, id, reason)
	if m.raw != want {
		f.t.Fatalf("far end read %s\nwant %s", m.raw, want)
	}
}

// The reasons a notifications/cancelled gives, pinned.
const (
	reasonAbandoned = "the request was abandoned by its caller"
	reasonWithin1s  = "no answer within 1s"
)
