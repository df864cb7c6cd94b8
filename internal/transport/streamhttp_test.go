package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// httpCall is one request a scripted server got.
type httpCall struct {
	Method string
	Header http.Header
	Body   string
	RPC    rpcFrame
}

// scriptedHTTP serves h on 127.0.0.1 and sends every request it gets on
// the channel it returns (buffered; a test reads what it needs).
func scriptedHTTP(t *testing.T, h func(w http.ResponseWriter, r *http.Request, c httpCall)) (string, <-chan httpCall) {
	t.Helper()
	calls := make(chan httpCall, 64)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := httpCall{Method: r.Method, Header: r.Header.Clone(), Body: string(body)}
		_ = json.Unmarshal(body, &c.RPC)
		select {
		case calls <- c:
		default:
		}
		h(w, r, c)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", calls
}

func dialHTTP(t *testing.T, url string, opts transport.HTTPOptions) *transport.StreamableHTTP {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	s, err := transport.DialStreamableHTTP(testCtx(t, testTimeout), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeMsg(t *testing.T, s transport.Stream, msg string) {
	t.Helper()
	if err := s.Write(testCtx(t, testTimeout), []byte(msg)); err != nil {
		t.Fatalf("Write(%s): %v", msg, err)
	}
}

// nextCall returns the next request of the given HTTP method.
func nextCall(t *testing.T, calls <-chan httpCall, method string) httpCall {
	t.Helper()
	for {
		c := recvWithin(t, calls, testTimeout, method+" request")
		if c.Method == method {
			return c
		}
	}
}

func jsonAnswer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func result(id json.RawMessage, result string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

const (
	initReq        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	initializedMsg = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	listReq        = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

// legacyServer answers initialize with a session id and version
// 2025-06-18, notifications with 202, GET with 405, and other requests by
// other (nil: an empty result).
func legacyServer(t *testing.T, other func(w http.ResponseWriter, r *http.Request, c httpCall)) (string, <-chan httpCall) {
	return scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case c.RPC.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "sess-1")
			jsonAnswer(w, 200, result(c.RPC.ID, `{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"0"}}`))
		case len(c.RPC.ID) == 0:
			w.WriteHeader(http.StatusAccepted)
		case other != nil:
			other(w, r, c)
		default:
			jsonAnswer(w, 200, result(c.RPC.ID, `{}`))
		}
	})
}

// The session id the initialize answer carries is sent back on every later
// request, with the protocol version the server chose, and in a DELETE on
// Close; the initialize request itself carries neither.
func TestStreamableHTTPSessionAndVersionHeaders(t *testing.T) {
	t.Parallel()
	url, calls := legacyServer(t, nil)
	s := dialHTTP(t, url, transport.HTTPOptions{})

	writeMsg(t, s, initReq)
	c := nextCall(t, calls, http.MethodPost)
	if got := c.Header.Get("Mcp-Session-Id") + c.Header.Get("MCP-Protocol-Version"); got != "" {
		t.Errorf("initialize carried session/version headers %q", got)
	}
	if c.Header.Get("Content-Type") != "application/json" || c.Header.Get("Accept") != "application/json, text/event-stream" {
		t.Errorf("initialize headers = %v", c.Header)
	}
	if _, err := readWithin(t, s, testTimeout); err != nil {
		t.Fatal(err)
	}
	writeMsg(t, s, initializedMsg)
	writeMsg(t, s, listReq)
	for _, want := range []string{"notifications/initialized", "tools/list"} {
		c := nextCall(t, calls, http.MethodPost)
		if c.RPC.Method != want || c.Header.Get("Mcp-Session-Id") != "sess-1" || c.Header.Get("MCP-Protocol-Version") != "2025-06-18" {
			t.Errorf("%s: method %q, headers %v", want, c.RPC.Method, c.Header)
		}
	}
	msg, err := readWithin(t, s, testTimeout)
	if err != nil || !strings.Contains(string(msg), `"id":2`) {
		t.Fatalf("tools/list answer = %s, %v", msg, err)
	}
	s.Close()
	d := nextCall(t, calls, http.MethodDelete)
	if d.Header.Get("Mcp-Session-Id") != "sess-1" {
		t.Errorf("DELETE headers = %v", d.Header)
	}
	if _, err := s.Read(); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
}

// A 404 for a request carrying the session id ends the stream with the
// session-expired error, and no DELETE follows for the session that is
// gone.
func TestStreamableHTTPSessionExpired(t *testing.T) {
	t.Parallel()
	url, calls := legacyServer(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		http.NotFound(w, r)
	})
	s := dialHTTP(t, url, transport.HTTPOptions{})
	writeMsg(t, s, initReq)
	if _, err := readWithin(t, s, testTimeout); err != nil {
		t.Fatal(err)
	}
	err := s.Write(testCtx(t, testTimeout), []byte(listReq))
	if !errors.Is(err, transport.ErrClosed) || !errors.Is(err, transport.ErrSessionExpired) {
		t.Errorf("Write = %v, want ErrClosed and ErrSessionExpired", err)
	}
	_, err = readWithin(t, s, testTimeout)
	var se *transport.SessionExpiredError
	if !errors.As(err, &se) || !errors.Is(err, transport.ErrSessionExpired) {
		t.Fatalf("Read = %v, want a *SessionExpiredError", err)
	}
	if info := s.CloseInfo(); !strings.Contains(info.Err, "expired") {
		t.Errorf("CloseInfo = %+v", info)
	}
	s.Close()
	for {
		select {
		case c := <-calls:
			if c.Method == http.MethodDelete {
				t.Errorf("DELETE sent for an expired session")
			}
			continue
		default:
		}
		break
	}
}

// A request refused with a JSON-RPC error body gets that error as its
// answer, code and data kept; one refused with plain text gets an error
// naming the status and quoting the body.
func TestStreamableHTTPRefusals(t *testing.T) {
	t.Parallel()
	const unsupported = `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2025-11-25"]}}}`
	url, _ := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		switch c.RPC.Method {
		case "modern":
			jsonAnswer(w, 400, fmt.Sprintf(unsupported, c.RPC.ID))
		case "plain":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(400)
			io.WriteString(w, "bad\x00 things\r\n"+strings.Repeat("x", 300))
		case "auth":
			w.WriteHeader(401)
		case "notify":
			w.WriteHeader(403)
		}
	})
	s := dialHTTP(t, url, transport.HTTPOptions{})
	peer := wire.NewPeer(s, wire.Options{Name: "t", Logger: discardLogger})
	t.Cleanup(func() { peer.Close() })
	ctx := testCtx(t, testTimeout)

	var ce *wire.CallError
	err := peer.Call(ctx, "modern", map[string]any{}, nil)
	if !errors.As(err, &ce) || ce.Answer == nil || ce.Answer.Code != -32022 || string(ce.Answer.Data) != `{"supported":["2025-11-25"]}` {
		t.Errorf("modern: %v (%+v)", err, ce)
	}
	err = peer.Call(ctx, "plain", map[string]any{}, nil)
	if !errors.As(err, &ce) || ce.Answer == nil || ce.Answer.Code != -32603 ||
		ce.Answer.Message != "HTTP 400 Bad Request: bad things "+strings.Repeat("x", 187) ||
		string(ce.Answer.Data) != `{"httpStatus":400}` {
		t.Errorf("plain: %q %s", ce.Answer.Message, ce.Answer.Data)
	}
	err = peer.Call(ctx, "auth", map[string]any{}, nil)
	if !errors.As(err, &ce) || ce.Answer == nil || ce.Answer.Message != "HTTP 401 Unauthorized" {
		t.Errorf("auth: %v", err)
	}
	err = s.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"notify"}`))
	var se *transport.HTTPStatusError
	if !errors.As(err, &se) || se.Status != 403 {
		t.Errorf("notification refused: Write = %v", err)
	}
}

// sse writes one event and flushes it.
func sse(w http.ResponseWriter, event string) {
	io.WriteString(w, event)
	w.(http.Flusher).Flush()
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
}

// An event stream that breaks before the answer is resumed by a GET
// carrying the last event id; one that gave no event id answers the
// request with an error instead of leaving it unanswered.
func TestStreamableHTTPResume(t *testing.T) {
	t.Parallel()
	url, calls := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		switch {
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "e1":
			sseHeaders(w)
			sse(w, ": resumed\n\nid: e2\r\ndata: "+result([]byte("5"), `{"ok":true}`)+"\r\n\r\n")
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case c.RPC.Method == "resumable":
			sseHeaders(w)
			sse(w, "id: e0\nretry: 1\ndata:\n\n") // a priming event: no data
			sse(w, "id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"notifications/progress\"}\n\n")
		case c.RPC.Method == "broken":
			sseHeaders(w)
			sse(w, "event: other\ndata: skipped\n\n")
		}
	})
	s := dialHTTP(t, url, transport.HTTPOptions{})
	writeMsg(t, s, `{"jsonrpc":"2.0","id":5,"method":"resumable"}`)
	msg, err := readWithin(t, s, testTimeout)
	if err != nil || string(msg) != "{\"jsonrpc\":\"2.0\",\n\"method\":\"notifications/progress\"}" {
		t.Fatalf("first event = %q, %v", msg, err)
	}
	msg, err = readWithin(t, s, testTimeout)
	if err != nil || string(msg) != result([]byte("5"), `{"ok":true}`) {
		t.Fatalf("resumed answer = %q, %v", msg, err)
	}
	nextCall(t, calls, http.MethodGet)

	writeMsg(t, s, `{"jsonrpc":"2.0","id":6,"method":"broken"}`)
	msg, err = readWithin(t, s, testTimeout)
	var answer struct {
		ID    int
		Error struct {
			Code    int
			Message string
		}
	}
	if err != nil || json.Unmarshal(msg, &answer) != nil || answer.ID != 6 || answer.Error.Code != -32603 ||
		!strings.Contains(answer.Error.Message, "ended before the answer came") {
		t.Fatalf("broken stream's answer = %s, %v", msg, err)
	}
}

// Once notifications/initialized has been sent, the GET stream is opened
// with the session id, and a notification the server sends on it is read.
func TestStreamableHTTPGETStream(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	url, calls := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		switch {
		case r.Method == http.MethodGet:
			sseHeaders(w)
			sse(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case r.Method == http.MethodDelete:
			w.WriteHeader(200)
		case c.RPC.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s2")
			jsonAnswer(w, 200, result(c.RPC.ID, `{"protocolVersion":"2025-11-25"}`))
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	t.Cleanup(func() { close(release) })
	s := dialHTTP(t, url, transport.HTTPOptions{})
	writeMsg(t, s, initReq)
	if _, err := readWithin(t, s, testTimeout); err != nil {
		t.Fatal(err)
	}
	writeMsg(t, s, initializedMsg)
	msg, err := readWithin(t, s, testTimeout)
	if err != nil || !strings.Contains(string(msg), "notifications/tools/list_changed") {
		t.Fatalf("GET stream message = %s, %v", msg, err)
	}
	g := nextCall(t, calls, http.MethodGet)
	if g.Header.Get("Mcp-Session-Id") != "s2" || g.Header.Get("Accept") != "text/event-stream" || g.Header.Get("MCP-Protocol-Version") != "2025-11-25" {
		t.Errorf("GET headers = %v", g.Header)
	}
}

// An event over MaxMessageSize ends the stream with a *TooLargeError, and
// so does a JSON body over it.
func TestStreamableHTTPTooLarge(t *testing.T) {
	t.Parallel()
	url, _ := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		big := `{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("a", 200) + `"}}`
		if c.RPC.Method == "json" {
			jsonAnswer(w, 200, big)
			return
		}
		sseHeaders(w)
		sse(w, "data: "+big+"\n\n")
	})
	for _, method := range []string{"sse", "json"} {
		s := dialHTTP(t, url, transport.HTTPOptions{MaxMessageSize: 100})
		writeMsg(t, s, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`)
		_, err := readWithin(t, s, testTimeout)
		if !tooLarge(err, 100) {
			t.Errorf("%s: Read = %v, want a TooLargeError", method, err)
		}
		if err := s.Write(testCtx(t, testTimeout), []byte(listReq)); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("%s: Write after the end = %v", method, err)
		}
	}
}

// A redirect is not followed: the request is answered with an error
// naming the status, the target gets nothing, and the token is in no
// error, log line or CloseInfo.
func TestStreamableHTTPRedirectAndToken(t *testing.T) {
	t.Parallel()
	const token = "tok-s3cret-value"
	elsewhere, elseCalls := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) { w.WriteHeader(200) })
	url, calls := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		http.Redirect(w, r, elsewhere+"?token="+token, http.StatusTemporaryRedirect)
	})
	rec := &lineRecorder{}
	s := dialHTTP(t, url+"?key=q-s3cret", transport.HTTPOptions{Token: token, Logger: slog.New(rec)})
	writeMsg(t, s, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	msg, err := readWithin(t, s, testTimeout)
	if err != nil || !strings.Contains(string(msg), "HTTP 307 Temporary Redirect") || strings.Contains(string(msg), token) {
		t.Fatalf("answer = %s, %v", msg, err)
	}
	if c := nextCall(t, calls, http.MethodPost); c.Header.Get("Authorization") != "Bearer "+token {
		t.Errorf("Authorization = %q", c.Header.Get("Authorization"))
	}
	select {
	case c := <-elseCalls:
		t.Errorf("the redirect's target got a %s request", c.Method)
	default:
	}
	err = s.Write(testCtx(t, testTimeout), []byte(`{"jsonrpc":"2.0","method":"notifications/x"}`))
	if err == nil || strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "q-s3cret") {
		t.Errorf("notification Write = %v", err)
	}
	s.Close()

	// A server that is gone: the network's error holds no secret either.
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	s2 := dialHTTP(t, goneURL+"/mcp?key=q-s3cret", transport.HTTPOptions{Token: token, Logger: slog.New(rec)})
	err = s2.Write(testCtx(t, testTimeout), []byte(listReq))
	if err == nil || strings.Contains(err.Error(), "q-s3cret") || strings.Contains(err.Error(), token) {
		t.Errorf("Write to a server that is gone = %v", err)
	}
	for _, info := range []transport.CloseInfo{s.CloseInfo(), s2.CloseInfo()} {
		if strings.Contains(fmt.Sprint(info), token) || strings.Contains(fmt.Sprint(info), "q-s3cret") {
			t.Errorf("CloseInfo holds a secret: %+v", info)
		}
	}
	assertNoSecretLogged(t, rec, token, "q-s3cret")
}

// lineRecorder is a slog.Handler that keeps each record as one line of
// text, its attributes included.
type lineRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (h *lineRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineRecorder) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, line)
	return nil
}
func (h *lineRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineRecorder) WithGroup(string) slog.Handler      { return h }

func assertNoSecretLogged(t *testing.T, rec *lineRecorder, secrets ...string) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.lines) == 0 {
		t.Error("nothing was logged")
	}
	for _, line := range rec.lines {
		for _, sec := range secrets {
			if strings.Contains(line, sec) {
				t.Errorf("log line holds a secret: %s", line)
			}
		}
	}
}

// A stateless-era message (its _meta names the protocol version) is sent
// with that version and its method and name mirrored into headers; a name
// that is not plain ASCII is base64-encoded.
func TestStreamableHTTPModernHeaders(t *testing.T) {
	t.Parallel()
	url, calls := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		jsonAnswer(w, 200, result(c.RPC.ID, `{}`))
	})
	s := dialHTTP(t, url, transport.HTTPOptions{Header: http.Header{"X-Extra": {"1"}}})
	for _, tc := range []struct{ msg, method, name string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shout","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "tools/call", "shout"},
		{`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///a b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "resources/read", "file:///a b"},
		{`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"héllo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "prompts/get", "=?base64?aMOpbGxv?="},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "tools/list", ""},
	} {
		writeMsg(t, s, tc.msg)
		c := nextCall(t, calls, http.MethodPost)
		h := c.Header
		if h.Get("MCP-Protocol-Version") != "2026-07-28" || h.Get("Mcp-Method") != tc.method || h.Get("Mcp-Name") != tc.name || h.Get("X-Extra") != "1" || h.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: headers %v", tc.method, h)
		}
		if _, err := readWithin(t, s, testTimeout); err != nil {
			t.Fatal(err)
		}
	}
}

// DialStreamableHTTP refuses a URL that is not http(s) with a host, and
// quotes no credential of it.
func TestDialStreamableHTTPBadURL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"ws://h/mcp?token=zz-s3cret", "http:///mcp?token=zz-s3cret", "user:zz-s3cret@host", "ftp://u:zz-s3cret@h/"} {
		_, err := transport.DialStreamableHTTP(testCtx(t, testTimeout), raw, transport.HTTPOptions{})
		if err == nil || strings.Contains(err.Error(), "zz-s3cret") {
			t.Errorf("Dial(%q) = %v", transport.RedactURL(raw), err)
		}
	}
}

// A request sent whole whose answer is slower than ConnectTimeout is not
// abandoned: Write returns, and the answer is read when it comes.
func TestStreamableHTTPSlowAnswer(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	url, _ := scriptedHTTP(t, func(w http.ResponseWriter, r *http.Request, c httpCall) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		jsonAnswer(w, 200, result(c.RPC.ID, `{"slow":true}`))
	})
	s := dialHTTP(t, url, transport.HTTPOptions{ConnectTimeout: 50 * time.Millisecond})
	writeMsg(t, s, listReq)
	close(release)
	msg, err := readWithin(t, s, testTimeout)
	if err != nil || !strings.Contains(string(msg), `"slow":true`) {
		t.Fatalf("answer = %s, %v", msg, err)
	}
}
