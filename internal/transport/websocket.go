package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// DefaultConnectTimeout bounds DialWebSocket's connecting unless
// WebSocketOptions.ConnectTimeout says otherwise.
const DefaultConnectTimeout = 10 * time.Second

// WebSocketOptions tunes a WebSocket stream. The zero value is usable.
type WebSocketOptions struct {
	// Token, if set, is sent as "Authorization: Bearer <Token>" when dialing.
	// It goes only to the dialed URL's origin: DialWebSocket refuses a
	// redirect to any other.
	Token string
	// TokenParam, if set with Token, names a query parameter that carries
	// the token instead of the Authorization header, for servers that read
	// it from the URL (?token=...): the parameter is added to the dialed
	// URL, and no Authorization header is sent. The dialed URL is never
	// shown: errors and logs show the URL given to DialWebSocket, redacted.
	TokenParam string
	// Header holds further request headers for the dial.
	Header http.Header
	// HTTPClient dials; nil means http.DefaultClient. DialWebSocket uses a
	// copy with its own redirect check and leaves the client itself as it
	// is. Its Transport must honour the request's context (http.Transport
	// does) for ConnectTimeout to hold.
	HTTPClient *http.Client
	// ConnectTimeout bounds DialWebSocket from start to end: the TCP
	// connection, the TLS handshake, the HTTP upgrade request and its
	// answer, and any same-origin redirects (0 or less means
	// DefaultConnectTimeout, 10s). The dial's ctx bounds it too, whichever
	// ends first. A server that accepts the connection and never answers
	// the upgrade fails the dial once it has passed. It does not bound
	// the stream after the dial.
	ConnectTimeout time.Duration
	// MaxMessageSize bounds one received frame, and is the WebSocket read
	// limit (0 means DefaultMaxMessageSize).
	MaxMessageSize int
	// PingInterval is how often a ping is sent (0 means 30s; negative
	// disables pings and the idle close).
	PingInterval time.Duration
	// IdleTimeout closes the stream when nothing, not even a pong, has
	// arrived for this long (0 means 60s).
	IdleTimeout time.Duration
	// Logger receives operator detail. Nil means slog.Default().
	Logger *slog.Logger
}

// WebSocket is a Stream over a WebSocket connection: one JSON-RPC message
// per text frame. A received frame that holds one JSON value is one message
// whatever whitespace and newlines it holds, since pretty-printed JSON is
// legal and must not be cut at its newlines; the whitespace around the value
// is trimmed, since some peers end a frame with a newline. Only a frame that
// is not one JSON value is split on newlines into its non-blank lines, since
// some peers put several messages, one a line, in one frame (a line that is
// not a message is left for the layer above to skip). Such a frame is split
// as it is read, one line per Read, each line a copy: a stream holds at most
// the one frame it is splitting besides the message it returns.
//
// A binary frame is refused: MCPL messages are text frames. The stream
// closes the connection with status 1003 (unsupported data) and the reason
// "MCPL messages are text frames", logs a warning, and Read returns an
// error, then and on every later call; CloseInfo.Err says what happened.
//
// Log lines name the peer by its URL with userinfo, query and fragment
// redacted (see RedactURL), or, for an accepted stream, by its address.
type WebSocket struct {
	c       *websocket.Conn
	max     int
	log     *slog.Logger
	peer    string                         // the redacted URL dialed, or the remote address accepted
	rest    []byte                         // the unread part of a frame being split into lines
	failed  error                          // once set (a frame over the limit, a binary frame), every later Read returns it
	refused atomic.Pointer[PeerFaultError] // a binary frame was refused: writes fail, Close sends 1003

	lastSeen  atomic.Int64 // unix nanos of the last frame or pong
	closing   atomic.Bool
	idleErr   atomic.Pointer[error] // set when keepAlive closed a silent connection
	wsem      chan struct{}         // held by the one Write under way
	closeOnce sync.Once
	ctx       context.Context // ends at Close; bounds pings
	stop      context.CancelFunc
	pingDone  chan struct{}

	infoMu sync.Mutex
	info   CloseInfo
}

// DialWebSocket connects to a WebSocket server at rawURL ("ws://" or
// "wss://"; "http://" and "https://" are taken as the same). It gives up
// after opts.ConnectTimeout, or when ctx ends. It follows a redirect only
// to the same origin (scheme, host and port, ws counting as http and wss
// as https); a redirect elsewhere fails the dial, so that the token and
// headers reach no one else.
//
// Its errors show the URL as RedactURL does, and hold no userinfo, query
// or fragment of it or of a redirect's target. They wrap context.Canceled
// or context.DeadlineExceeded when the dial ended for that reason (the
// ConnectTimeout passing counts as a deadline), and a *net.OpError when the
// network refused, but not the library's own errors, whose text holds the
// URL.
func DialWebSocket(ctx context.Context, rawURL string, opts WebSocketOptions) (*WebSocket, error) {
	shown := RedactURL(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("transport: dial %s: not a valid WebSocket URL", shown)
	}
	switch u.Scheme {
	case "ws", "wss", "http", "https":
	default:
		return nil, fmt.Errorf("transport: dial %s: unsupported URL scheme %q (want ws or wss)", shown, u.Scheme)
	}
	sec := &secrets{}
	sec.addURL(u)

	h := opts.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	dialURL := rawURL
	switch {
	case opts.Token != "" && opts.TokenParam != "":
		du := *u
		kv := url.QueryEscape(opts.TokenParam) + "=" + url.QueryEscape(opts.Token)
		if du.RawQuery != "" {
			du.RawQuery += "&" + kv
		} else {
			du.RawQuery = kv
		}
		dialURL = du.String()
		sec.addURL(&du)
		sec.add(opts.Token)
		sec.add(url.QueryEscape(opts.Token))
	case opts.Token != "":
		h.Set("Authorization", "Bearer "+opts.Token)
	}

	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var phase atomic.Int32
	dctx = httptrace.WithClientTrace(dctx, &httptrace.ClientTrace{
		GetConn:              func(string) { phase.Store(phaseConnecting) },
		GotConn:              func(httptrace.GotConnInfo) { phase.Store(phaseUpgrading) },
		GotFirstResponseByte: func() { phase.Store(phaseAnswering) },
	})

	c, _, err := websocket.Dial(dctx, dialURL, &websocket.DialOptions{
		HTTPHeader: h,
		HTTPClient: sameOriginClient(opts.HTTPClient, sec),
	})
	if err != nil {
		return nil, dialError(ctx, dctx, err, shown, sec, timeout, phase.Load())
	}
	return newWebSocket(c, opts, shown), nil
}

// How far a dial got, for the words of its timeout.
const (
	phaseConnecting int32 = iota
	phaseUpgrading        // connected, the upgrade request sent or being sent
	phaseAnswering        // part of the answer has come
)

// sameOriginClient returns a copy of client (nil: http.DefaultClient) that
// follows redirects only within the origin of the first request, noting
// the secrets of every redirect's target in sec.
func sameOriginClient(client *http.Client, sec *secrets) *http.Client {
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		sec.addURL(req.URL)
		if !sameOrigin(via[0].URL, req.URL) {
			return &redirectError{target: redactParsed(req.URL)}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// redirectError refuses a redirect to another origin.
type redirectError struct{ target string }

func (e *redirectError) Error() string {
	return "refused a redirect to another origin (" + e.target + ")"
}

// sameOrigin reports whether a and b have the same scheme, host and port,
// ws counting as http and wss as https, and a missing port as the scheme's
// default.
func sameOrigin(a, b *url.URL) bool {
	sa, sb := httpScheme(a.Scheme), httpScheme(b.Scheme)
	return sa == sb && strings.EqualFold(a.Hostname(), b.Hostname()) && portOf(a, sa) == portOf(b, sb)
}

func httpScheme(s string) string {
	switch s = strings.ToLower(s); s {
	case "ws":
		return "http"
	case "wss":
		return "https"
	}
	return s
}

func portOf(u *url.URL, scheme string) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// dialError words a failed dial for the log and the user: the URL redacted
// as shown, the secrets in sec scrubbed from whatever the library and
// net/http said, and a timeout of the dial's own said in plain words.
func dialError(ctx, dctx context.Context, err error, shown string, sec *secrets, timeout time.Duration, phase int32) error {
	e := &safeDialError{}
	var re *redirectError
	switch {
	case errors.As(err, &re):
		e.msg = re.Error()
	case ctx.Err() == nil && errors.Is(dctx.Err(), context.DeadlineExceeded):
		switch phase {
		case phaseConnecting:
			e.msg = fmt.Sprintf("could not connect within %s", timeout)
		case phaseUpgrading:
			e.msg = fmt.Sprintf("no WebSocket upgrade answer within %s", timeout)
		default:
			e.msg = fmt.Sprintf("the WebSocket upgrade answer did not complete within %s", timeout)
		}
		e.causes = append(e.causes, context.DeadlineExceeded)
	default:
		e.msg = strings.TrimPrefix(redactURLErrors(err), "failed to WebSocket dial: ")
	}
	e.msg = "transport: dial " + shown + ": " + sec.scrub(e.msg)
	for _, target := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, target) && !slices.Contains(e.causes, target) {
			e.causes = append(e.causes, target)
		}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		e.causes = append(e.causes, op)
	}
	return e
}

// redactURLErrors returns err's text with the URL of each *url.Error in its
// chain (which the text quotes) redacted.
func redactURLErrors(err error) string {
	text := err.Error()
	var walk func(error)
	walk = func(err error) {
		switch x := err.(type) {
		case nil:
			return
		case *url.Error:
			text = strings.ReplaceAll(text, strconv.Quote(x.URL), strconv.Quote(redactRef(x.URL)))
			walk(x.Err)
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
		default:
			walk(errors.Unwrap(err))
		}
	}
	walk(err)
	return text
}

// redactRef is RedactURL, except that a reference without scheme and host
// (a redirect's Location may be one) keeps its path.
func redactRef(ref string) string {
	u, err := url.Parse(ref)
	if err == nil && u.Scheme == "" && u.Host == "" && u.Opaque == "" && u.User == nil {
		return redactParsed(u)
	}
	return RedactURL(ref)
}

// safeDialError is a dial error whose text holds no secret. It unwraps only
// to errors whose text holds none either: the context's, and the network's.
type safeDialError struct {
	msg    string
	causes []error
}

func (e *safeDialError) Error() string   { return e.msg }
func (e *safeDialError) Unwrap() []error { return e.causes }

// AcceptWebSocket upgrades an HTTP request to a WebSocket stream, for the
// server side. The stream stays usable after the handler returns.
func AcceptWebSocket(w http.ResponseWriter, r *http.Request, opts WebSocketOptions) (*WebSocket, error) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, err
	}
	return newWebSocket(c, opts, r.RemoteAddr), nil
}

func newWebSocket(c *websocket.Conn, opts WebSocketOptions, peer string) *WebSocket {
	max := opts.MaxMessageSize
	if max <= 0 {
		max = DefaultMaxMessageSize
	}
	c.SetReadLimit(int64(max))
	ws := &WebSocket{c: c, max: max, log: loggerOr(opts.Logger), peer: peer, pingDone: make(chan struct{}), wsem: make(chan struct{}, 1)}
	ws.ctx, ws.stop = context.WithCancel(context.Background())
	ws.lastSeen.Store(time.Now().UnixNano())
	interval, idle := opts.PingInterval, opts.IdleTimeout
	if interval == 0 {
		interval = 30 * time.Second
	}
	if idle <= 0 {
		idle = 60 * time.Second
	}
	if interval > 0 {
		go ws.keepAlive(interval, idle)
	} else {
		close(ws.pingDone)
	}
	return ws
}

// keepAlive pings every interval and closes the stream when nothing has
// arrived for idle. A ping waits for its pong no later than the moment the
// stream would go idle, so a silent peer is dropped after idle, not after
// idle plus however long the ping waited.
func (ws *WebSocket) keepAlive(interval, idle time.Duration) {
	defer close(ws.pingDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ws.ctx.Done():
			return
		case <-t.C:
		}
		deadline := time.Unix(0, ws.lastSeen.Load()).Add(idle)
		if !time.Now().Before(deadline) {
			ws.idleClose(idle)
			return
		}
		ctx, cancel := context.WithDeadline(ws.ctx, deadline)
		err := ws.c.Ping(ctx)
		cancel()
		if err == nil {
			ws.touch()
			continue
		}
		if ws.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			return // closed: nothing to keep alive
		}
		if !time.Now().Before(time.Unix(0, ws.lastSeen.Load()).Add(idle)) {
			ws.idleClose(idle)
			return
		}
	}
}

// idleClose drops a connection whose peer has gone silent. It does not wait
// for a close handshake the peer will not answer.
func (ws *WebSocket) idleClose(idle time.Duration) {
	err := fmt.Errorf("transport: no frame or pong from the websocket peer for %s", idle)
	ws.idleErr.Store(&err)
	ws.log.Warn("websocket peer silent; closing", "peer", ws.peer, "idle", idle)
	ws.setInfo(CloseInfo{Err: fmt.Sprintf("no frame or pong for %s", idle)})
	ws.c.CloseNow()
}

func (ws *WebSocket) touch() { ws.lastSeen.Store(time.Now().UnixNano()) }

// Read implements Stream.
func (ws *WebSocket) Read() ([]byte, error) {
	if ws.closing.Load() {
		return nil, ErrClosed
	}
	if ws.failed != nil {
		return nil, ws.failed
	}
	for {
		if msg := ws.nextLine(); msg != nil {
			return msg, nil
		}
		typ, r, err := ws.c.Reader(context.Background())
		if err != nil {
			return nil, ws.readFailed(err, 0)
		}
		ws.touch()
		if typ != websocket.MessageText {
			return nil, ws.refuseBinary()
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, ws.readFailed(err, len(data))
		}
		// One scan decides: a frame that is one JSON value (json.Valid
		// allows whitespace around it) is one message, its interior kept
		// as it is. No frame is being split here, so it can be returned
		// at once.
		if json.Valid(data) {
			return bytes.Trim(data, jsonSpace), nil
		}
		ws.rest = data
	}
}

// nextLine returns a copy of the next non-blank line of the frame being
// split, or nil when none is left, and lets go of the frame once it has
// been read to its end.
func (ws *WebSocket) nextLine() []byte {
	for len(ws.rest) > 0 {
		var line []byte
		line, ws.rest, _ = bytes.Cut(ws.rest, []byte{'\n'})
		if len(bytes.TrimSpace(line)) > 0 {
			if len(ws.rest) == 0 {
				ws.rest = nil
			}
			return bytes.Clone(trimEOL(line))
		}
	}
	ws.rest = nil
	return nil
}

// binaryReason is the close reason sent to a peer that sent a binary frame.
const binaryReason = "MCPL messages are text frames"

// refuseBinary refuses a binary frame: it returns the error every later
// Read returns, a *PeerFaultError, at once; Close then closes with status
// 1003 and the reason. The layer above closes the stream on that error,
// as its own doing.
func (ws *WebSocket) refuseBinary() error {
	if ws.closing.Load() {
		return ErrClosed
	}
	pf := &PeerFaultError{Reason: "the websocket peer sent a binary frame; " + binaryReason}
	ws.failed = pf
	ws.setInfo(CloseInfo{Err: "the peer sent a binary frame; closed with 1003 (unsupported data): " + binaryReason})
	ws.log.Warn("websocket peer sent a binary frame; closing", "peer", ws.peer, "ws_code", int(websocket.StatusUnsupportedData))
	ws.refused.Store(pf)
	return pf
}

// jsonSpace is the whitespace JSON allows around a value.
const jsonSpace = " \t\r\n"

func (ws *WebSocket) readFailed(err error, got int) error {
	if ws.closing.Load() {
		return ErrClosed
	}
	if errors.Is(err, websocket.ErrMessageTooBig) {
		// The library has closed the connection with StatusMessageTooBig.
		tl := &TooLargeError{Limit: ws.max, Size: max(got, ws.max+1)}
		ws.setInfo(CloseInfo{Err: tl.Error()})
		ws.failed = tl
		return tl
	}
	if e := ws.idleErr.Load(); e != nil {
		return *e
	}
	info := CloseInfo{}
	if code := websocket.CloseStatus(err); code != -1 {
		info.WSCode = int(code)
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			info.WSReason = ce.Reason
		}
		ws.setInfo(info)
		return io.EOF
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The connection ended without a close frame: not the clean
		// close that io.EOF reports.
		err = fmt.Errorf("transport: websocket connection ended without a close frame (%v)", err)
	}
	info.Err = err.Error()
	ws.setInfo(info)
	return err
}

func (ws *WebSocket) setInfo(info CloseInfo) {
	ws.infoMu.Lock()
	defer ws.infoMu.Unlock()
	if ws.info == (CloseInfo{}) {
		ws.info = info
	}
}

// Write implements Stream.
func (ws *WebSocket) Write(ctx context.Context, msg []byte) error {
	if pf := ws.refused.Load(); pf != nil {
		// A binary frame was refused: closed, and why.
		return errors.Join(ErrClosed, pf)
	}
	if ws.closing.Load() {
		return ErrClosed
	}
	// Wait our turn here, where giving up sends nothing and leaves the
	// stream usable. (The library, given a context that has ended, may
	// start the write anyway and then close the connection.)
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case ws.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-ws.ctx.Done():
		return ErrClosed
	}
	defer func() { <-ws.wsem }()
	err := ws.c.Write(ctx, websocket.MessageText, msg)
	if err == nil {
		return nil
	}
	if ws.closing.Load() {
		return ErrClosed
	}
	if ctx.Err() != nil {
		// The library closes the connection when a write's context ends
		// part way; what reached the peer is unknown. Make sure it is
		// closed even if the context ended before the frame began, as
		// ErrPartialWrite promises.
		ws.setInfo(CloseInfo{Err: "write abandoned part way: " + err.Error()})
		ws.closing.Store(true)
		ws.stop()
		ws.c.CloseNow()
		return errors.Join(ErrPartialWrite, err)
	}
	if errors.Is(err, net.ErrClosed) {
		// Closed by the peer, or by the library after a protocol error.
		// A frame cut short is never taken as a message, so none was
		// delivered.
		return errors.Join(ErrClosed, err)
	}
	return err
}

// Close implements Stream: it sends a normal close and waits briefly for the
// peer's answer.
func (ws *WebSocket) Close() error {
	ws.closeOnce.Do(func() {
		ws.closing.Store(true)
		ws.stop()
		if ws.refused.Load() != nil {
			ws.c.Close(websocket.StatusUnsupportedData, binaryReason)
		} else {
			ws.c.Close(websocket.StatusNormalClosure, "")
		}
	})
	<-ws.pingDone
	return nil
}

// CloseInfo implements Stream.
func (ws *WebSocket) CloseInfo() CloseInfo {
	ws.infoMu.Lock()
	defer ws.infoMu.Unlock()
	return ws.info
}
