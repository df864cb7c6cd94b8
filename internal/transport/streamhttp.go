package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPOptions tunes a Streamable HTTP stream. The zero value is usable.
type HTTPOptions struct {
	// Token, if set, is sent as "Authorization: Bearer <Token>" on every
	// request. Redirects are never followed, so it reaches the dialed URL
	// only; it appears in no error and no log line.
	Token string
	// Header holds further headers for every request. The transport's own
	// (Content-Type, Accept, Authorization, Mcp-Session-Id,
	// MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID) win over
	// any of the same name here.
	Header http.Header
	// HTTPClient sends the requests; nil means http.DefaultClient. The
	// stream uses a copy that never follows a redirect and leaves the
	// client itself as it is. Its Transport must honour the request's
	// context (http.Transport does).
	HTTPClient *http.Client
	// ConnectTimeout bounds each request until it has been sent whole
	// and, beyond that, how long Write waits for the response's headers
	// (0 or less means DefaultConnectTimeout, 10s). A request sent whole
	// whose answer takes longer is not abandoned: its answer is awaited in
	// the background, and the layer above's deadline bounds the call.
	ConnectTimeout time.Duration
	// MaxMessageSize bounds one received message: a JSON body, or one
	// server-sent event's data (0 means DefaultMaxMessageSize).
	MaxMessageSize int
	// MaxQueuedBytes bounds the bytes of the received messages waiting
	// for Read (0 means DefaultMaxMessageSize). While it is reached the
	// response bodies are not read further. One message is always taken
	// when none waits, whatever its size.
	MaxQueuedBytes int
	// Logger receives operator detail. Nil means slog.Default().
	Logger *slog.Logger
}

// ErrSessionExpired is wrapped by the Read error of a stream whose server
// answered a request carrying the session's id with 404 Not Found: the
// session is gone, and the layer above reconnects with a new initialize.
var ErrSessionExpired = errors.New("transport: the server's session has expired (HTTP 404 for its Mcp-Session-Id)")

// StreamableHTTP is a Stream over MCP's Streamable HTTP transport, client
// side. Each message written is its own POST to the server's URL; the
// answers to requests (a JSON body, or a server-sent event stream) are
// read in the background, as is the standalone GET event stream of the
// session-era protocol versions (2025-03-26 to 2025-11-25), and queued
// for Read.
//
// The stream looks at the messages it carries, as far as the transport
// needs: it notes the Mcp-Session-Id a response sets and sends it back,
// takes the protocol version from the initialize result for the
// MCP-Protocol-Version header, mirrors a message's
// params._meta["io.modelcontextprotocol/protocolVersion"] and method (the
// stateless era, 2026-07-28) into the request headers, and opens the GET
// stream once notifications/initialized has been sent.
//
// A request answered with an HTTP error is answered, for Read, with a
// JSON-RPC error response for its id: the server's own when its body is
// one, or one naming the HTTP status (code -32603, data {"httpStatus":
// N}). The stream ends (Read fails) only when the session has expired
// (ErrSessionExpired), a message is over the size limit (*TooLargeError),
// or Close is called (ErrClosed). There is no clean end (io.EOF) on HTTP.
type StreamableHTTP struct {
	url     *url.URL
	shown   string // the URL, redacted
	client  *http.Client
	header  http.Header
	token   string
	sec     *secrets
	log     *slog.Logger
	max     int
	timeout time.Duration

	q      *msgQueue
	ctx    context.Context // ends at Close, or when the stream ends
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closing   atomic.Bool
	closeOnce sync.Once

	mu        sync.Mutex
	sessionID string
	version   string // for MCP-Protocol-Version, from the initialize result
	getOpened bool
	posts     map[string]*post // requests' POSTs under way, by id (streamhttp_cancel.go)
	ended     error            // why the stream ended, before Close
	info      CloseInfo
}

// DialStreamableHTTP returns a stream to the Streamable HTTP server at
// rawURL ("http://" or "https://", with a host). It sends nothing: the
// first message written is the first request. Its errors show the URL as
// RedactURL does. ctx is not kept.
func DialStreamableHTTP(ctx context.Context, rawURL string, opts HTTPOptions) (*StreamableHTTP, error) {
	shown := RedactURL(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil || u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("transport: dial %s: not a valid HTTP URL", shown)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return nil, fmt.Errorf("transport: dial %s: unsupported URL scheme %q (want http or https)", shown, u.Scheme)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", shown, err)
	}
	sec := &secrets{}
	sec.addURL(u)
	if opts.Token != "" {
		sec.add(opts.Token)
		sec.add("Bearer " + opts.Token)
	}
	client := opts.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	max := opts.MaxMessageSize
	if max <= 0 {
		max = DefaultMaxMessageSize
	}
	qmax := opts.MaxQueuedBytes
	if qmax <= 0 {
		qmax = DefaultMaxMessageSize
	}
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	s := &StreamableHTTP{
		url: u, shown: shown, client: &c, header: opts.Header.Clone(), token: opts.Token,
		sec: sec, log: loggerOr(opts.Logger), max: max, timeout: timeout,
		q: newMsgQueue(qmax),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// IsHTTPURL reports whether rawURL's scheme is http or https: a URL for
// DialStreamableHTTP rather than DialWebSocket, which takes those schemes
// too.
func IsHTTPURL(rawURL string) bool {
	scheme, _, ok := strings.Cut(rawURL, "://")
	return ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https"))
}

// Read implements Stream.
func (s *StreamableHTTP) Read() ([]byte, error) {
	if s.closing.Load() {
		return nil, ErrClosed
	}
	return s.q.get()
}

// Write implements Stream: it POSTs msg. It returns once the response's
// headers have come and been looked at, or, for a request sent whole
// whose answer is slow, once ctx ends or ConnectTimeout has passed (the
// answer is then awaited in the background). An error means the server
// did not take the message: ctx ended or the timeout passed before it was
// sent whole, the network failed, the server refused a notification or a
// response, or the stream is closed (ErrClosed; with ErrSessionExpired
// when the server said the session is gone). A request the server
// refused is answered through Read instead.
func (s *StreamableHTTP) Write(ctx context.Context, msg []byte) error {
	if s.closing.Load() {
		return ErrClosed
	}
	if err := s.endedErr(); err != nil {
		return errors.Join(ErrClosed, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m := sniffOutgoing(msg)
	if m.method == "notifications/cancelled" {
		s.abortCancelled(msg)
	}
	rctx, cancel := context.WithCancelCause(s.ctx)
	written := make(chan struct{})
	var once sync.Once
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				once.Do(func() { close(written) })
			}
		},
	})
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.url.String(), bytes.NewReader(bytes.Clone(msg)))
	if err != nil {
		cancel(nil)
		return fmt.Errorf("transport: POST %s: %s", s.shown, s.sec.scrub(err.Error()))
	}
	s.setHeaders(req, m)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")

	p := &post{s: s, m: m, cancel: cancel, hdr: make(chan error, 1), sentSession: req.Header.Get(headerSession) != ""}
	untrack := func() {}
	if m.isRequest() {
		untrack = s.track(p)
	}
	if !s.goOwned(func() { defer untrack(); p.run(req) }) {
		untrack()
		cancel(nil)
		return ErrClosed
	}

	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	var why error
	select {
	case err := <-p.hdr:
		return err
	case <-s.ctx.Done():
		return s.closedErr()
	case <-ctx.Done():
		why = ctx.Err()
	case <-timer.C:
		why = fmt.Errorf("no response headers within %s", s.timeout)
	}
	select {
	case <-written:
		// Sent whole: the server has it. Its answer is awaited in the
		// background, and failures reach Read as the request's answer.
		if p.handOff() {
			s.log.Debug("Streamable HTTP answer slow; awaited in the background", "url", s.shown, "method", m.method)
			return nil
		}
		return <-p.hdr
	default:
	}
	cause := fmt.Errorf("transport: POST %s: the request was not sent within its bound: %w", s.shown, why)
	if errors.Is(why, context.Canceled) || errors.Is(why, context.DeadlineExceeded) {
		cause = fmt.Errorf("transport: POST %s: the request was not sent before its context ended: %w", s.shown, why)
	}
	cancel(cause)
	err = <-p.hdr // run reports promptly once its request is cancelled
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return cause
}

// goOwned runs f in a goroutine Close waits for, unless the stream is
// closing.
func (s *StreamableHTTP) goOwned(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// closedErr is the error of a Write that found the stream closed or ended.
func (s *StreamableHTTP) closedErr() error {
	if err := s.endedErr(); err != nil {
		return errors.Join(ErrClosed, err)
	}
	return ErrClosed
}

// setHeaders sets the headers every request of the stream carries, and
// those m's own fields decide.
func (s *StreamableHTTP) setHeaders(req *http.Request, m outgoing) {
	for k, vs := range s.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	s.mu.Lock()
	sid, version := s.sessionID, s.version
	s.mu.Unlock()
	if sid != "" {
		req.Header.Set(headerSession, sid)
	}
	if m.modernVersion != "" {
		version = m.modernVersion
	}
	if version != "" {
		req.Header.Set(headerVersion, version)
	}
	if m.modernVersion != "" && m.isRequest() {
		req.Header.Set(headerMethod, m.method)
		if m.nameValue != "" {
			req.Header.Set(headerName, headerSafe(m.nameValue))
		}
	}
}

// noteSession keeps the session id a response carries. A value that is
// not visible ASCII is not one the server may send, and is ignored.
func (s *StreamableHTTP) noteSession(h http.Header) {
	sid := h.Get(headerSession)
	if sid == "" {
		return
	}
	for i := 0; i < len(sid); i++ {
		if sid[i] < 0x21 || sid[i] > 0x7e {
			s.log.Warn("Streamable HTTP server sent an Mcp-Session-Id that is not visible ASCII; ignored", "url", s.shown)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessionID != sid {
		if s.sessionID != "" {
			s.log.Debug("Streamable HTTP server changed the session id", "url", s.shown)
		}
		s.sessionID = sid
	}
}

func (s *StreamableHTTP) setVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = v
}

// noteHTTPError keeps a request's failure for CloseInfo, unless the
// stream has ended: then Err says why.
func (s *StreamableHTTP) noteHTTPError(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == nil {
		s.info.Err = text
	}
}

// end ends the stream for err: Read returns it once what is queued has
// been read, and every request and body reader stops. The first reason
// stands.
func (s *StreamableHTTP) end(err error) {
	s.mu.Lock()
	if s.ended == nil {
		s.ended = err
		s.info.Err = err.Error()
	}
	s.mu.Unlock()
	s.q.fail(err)
	s.cancel()
}

func (s *StreamableHTTP) endedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// expire ends the stream because the server no longer knows its session.
func (s *StreamableHTTP) expire(method string) {
	s.log.Info("Streamable HTTP session expired (HTTP 404); the stream ends", "url", s.shown, "method", method)
	s.mu.Lock()
	s.sessionID = "" // gone: not to be deleted
	s.mu.Unlock()
	s.end(&SessionExpiredError{URL: s.shown})
}

// SessionExpiredError is the Read error of a stream whose session the
// server no longer knows. It wraps ErrSessionExpired.
type SessionExpiredError struct {
	URL string // redacted
}

func (e *SessionExpiredError) Error() string {
	return "transport: " + e.URL + ": the server's session has expired (HTTP 404 for its Mcp-Session-Id); a new initialize is needed"
}

func (e *SessionExpiredError) Unwrap() error { return ErrSessionExpired }

// deleteTimeout bounds the DELETE that ends a session at Close.
const deleteTimeout = 2 * time.Second

// Close implements Stream: it stops every request and body reader, waits
// for them, and then, when the server gave a session id, ends the session
// with a DELETE (bounded by 2s; a failure is only logged).
func (s *StreamableHTTP) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing.Store(true)
		s.mu.Unlock()
		s.q.close()
		s.cancel()
		s.wg.Wait()
		s.mu.Lock()
		sid := s.sessionID
		s.mu.Unlock()
		if sid != "" {
			s.deleteSession(sid)
		}
	})
	s.wg.Wait()
	return nil
}

func (s *StreamableHTTP) deleteSession(sid string) {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.url.String(), nil)
	if err != nil {
		return
	}
	s.setHeaders(req, outgoing{})
	req.Header.Set(headerSession, sid)
	resp, err := s.client.Do(req)
	if err != nil {
		s.log.Debug("Streamable HTTP session DELETE failed", "url", s.shown, "err", s.sec.scrub(redactURLErrors(err)))
		return
	}
	drainBody(resp)
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusMethodNotAllowed {
		s.log.Debug("Streamable HTTP session DELETE refused", "url", s.shown, "status", resp.StatusCode)
	}
}

// CloseInfo implements Stream: Err holds why the stream ended, or the
// last HTTP failure seen.
func (s *StreamableHTTP) CloseInfo() CloseInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// SessionID returns the session id the server gave, or "".
func (s *StreamableHTTP) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}
