package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/protocol"
)

// script is a server the test plays by hand, message by message, over an
// in-memory stream: it sees every message the host writes, in order, and
// the host reads only what the test writes. Unlike a pipe, its read side
// can end (as a server that closed its output) while the host can still
// write, so a test can see what the host answers as a connection ends.
type script struct {
	t        testing.TB
	toHost   chan []byte
	fromHost chan []byte
	eof      chan struct{} // closed: the host's Read reports io.EOF
	closed   chan struct{} // the host closed the stream
	eofOnce  sync.Once
	once     sync.Once
}

// scriptWait bounds a script's waits. Scripts run in synctest bubbles,
// whose clock is fake: this is long enough to outlast every deadline the
// host has (the policy's 15 s, a redial's backoff) at no cost.
const scriptWait = time.Hour

// newScript returns a script; its stream is s.stream(). Create it inside a
// synctest bubble when the test runs in one.
func newScript(t testing.TB) *script {
	return &script{
		t:        t,
		toHost:   make(chan []byte, 4096),
		fromHost: make(chan []byte, 4096),
		eof:      make(chan struct{}),
		closed:   make(chan struct{}),
	}
}

// dial is a Config.Dial that hands the host this script's stream.
func (s *script) dial(context.Context) (transport.Stream, error) { return (*scriptStream)(s), nil }

type scriptStream script

func (st *scriptStream) Read() ([]byte, error) {
	s := (*script)(st)
	select {
	case m := <-s.toHost:
		return m, nil
	default:
	}
	select {
	case m := <-s.toHost:
		return m, nil
	case <-s.eof:
		return nil, io.EOF
	case <-s.closed:
		return nil, transport.ErrClosed
	}
}

func (st *scriptStream) Write(ctx context.Context, msg []byte) error {
	s := (*script)(st)
	select {
	case <-s.closed:
		return transport.ErrClosed
	default:
	}
	select {
	case s.fromHost <- append([]byte(nil), msg...):
		return nil
	case <-s.closed:
		return transport.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (st *scriptStream) Close() error {
	s := (*script)(st)
	s.once.Do(func() { close(s.closed) })
	return nil
}

func (st *scriptStream) CloseInfo() transport.CloseInfo { return transport.CloseInfo{} }

// end makes the host's reads end, as a server closing its output would.
func (s *script) end() { s.eofOnce.Do(func() { close(s.eof) }) }

// isClosed reports whether the host closed the stream.
func (s *script) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// msg is one message the host wrote.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	raw []byte
}

func (m msg) String() string { return string(m.raw) }

// asAnswer reads a response the host wrote as an answer.
func (m msg) asAnswer() answer {
	var a answer
	a.Result = m.Result
	if m.Error != nil {
		a.Error = m.Error
	}
	return a
}

// next returns the next message the host writes.
func (s *script) next() msg {
	s.t.Helper()
	select {
	case b := <-s.fromHost:
		return s.parse(b)
	case <-time.After(scriptWait):
		s.t.Fatalf("the host wrote nothing within %s", scriptWait)
		return msg{}
	}
}

// pending returns what the host has written and the test not yet read,
// without waiting.
func (s *script) pending() []msg {
	var out []msg
	for {
		select {
		case b := <-s.fromHost:
			out = append(out, s.parse(b))
		default:
			return out
		}
	}
}

func (s *script) parse(b []byte) msg {
	s.t.Helper()
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		s.t.Fatalf("the host wrote %q: %v", b, err)
	}
	m.raw = b
	return m
}

// expect returns the next message, failing unless it is method.
func (s *script) expect(method string) msg {
	s.t.Helper()
	m := s.next()
	if m.Method != method {
		s.t.Fatalf("the host wrote %s, want %s", m, method)
	}
	return m
}

// expectCancelled reads the next message, failing unless it is the host's
// notifications/cancelled for its request m, giving reason.
func (s *script) expectCancelled(m msg, reason string) {
	s.t.Helper()
	c := s.expect(protocol.MethodCancelled)
	want := fmt.Sprintf(`{"requestId":%s,"reason":%q}`, m.ID, reason)
	if string(c.Params) != want {
		s.t.Fatalf("the host cancelled with %s, want %s", c.Params, want)
	}
}

// write sends the host a raw message.
func (s *script) write(raw string) {
	s.toHost <- []byte(raw)
}

// reply answers the host's request m with result.
func (s *script) reply(m msg, result string) {
	s.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result))
}

// replyError answers the host's request m with an error.
func (s *script) replyError(m msg, code int64, message string) {
	s.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, m.ID, code, message))
}

// request sends the host a request with id, method and params.
func (s *script) request(id int, method, params string) {
	s.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
}

// initialize plays the server's side of initialize and initialized,
// advertising mcpl (none when empty).
func (s *script) initialize(mcpl string) msg {
	s.t.Helper()
	init := s.expect(protocol.MethodInitialize)
	caps := `{"tools":{}}`
	if mcpl != "" {
		caps = `{"tools":{},"experimental":{"mcpl":` + mcpl + `}}`
	}
	s.reply(init, `{"protocolVersion":"2024-11-05","capabilities":`+caps+`,"serverInfo":{"name":"scripted","version":"1"}}`)
	s.expect(protocol.MethodInitialized)
	return init
}

// answerTo returns the host's answer to the server's request id, failing
// when the next message is anything else.
func (s *script) answerTo(id int) answer {
	s.t.Helper()
	m := s.next()
	if m.Method != "" || string(m.ID) != fmt.Sprint(id) {
		s.t.Fatalf("the host wrote %s, want the answer to request %d", m, id)
	}
	return m.asAnswer()
}

// connecting runs Connect on a goroutine, for a test that plays the server
// meanwhile; wait returns its outcome.
type connecting struct {
	done chan struct{}
	s    *session.Session
	err  error
}

func connectAsync(cfg session.Config) *connecting {
	c := &connecting{done: make(chan struct{})}
	cfg = withDefaults(cfg)
	go func() {
		defer close(c.done)
		c.s, c.err = session.Connect(context.Background(), cfg)
	}()
	return c
}

func (c *connecting) wait(t testing.TB) (*session.Session, error) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(scriptWait):
		t.Fatalf("Connect did not return within %s", scriptWait)
	}
	return c.s, c.err
}

// ok waits for Connect to succeed, and closes the session when the test
// ends.
func (c *connecting) ok(t testing.TB) *session.Session {
	t.Helper()
	s, err := c.wait(t)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
