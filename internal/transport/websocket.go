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
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// WebSocketOptions tunes a WebSocket stream. The zero value is usable.
type WebSocketOptions struct {
	// Token, if set, is sent as "Authorization: Bearer <Token>" when dialing.
	Token string
	// Header holds further request headers for the dial.
	Header http.Header
	// HTTPClient dials; nil means http.DefaultClient.
	HTTPClient *http.Client
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
// not a message is left for the layer above to skip). Binary frames are
// ignored.
type WebSocket struct {
	c       *websocket.Conn
	max     int
	log     *slog.Logger
	pending [][]byte // messages split from a frame, not yet returned
	tooBig  error    // once a frame was over the limit, every later Read returns this

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

// DialWebSocket connects to a WebSocket server at url ("ws://" or "wss://").
func DialWebSocket(ctx context.Context, url string, opts WebSocketOptions) (*WebSocket, error) {
	h := opts.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if opts.Token != "" {
		h.Set("Authorization", "Bearer "+opts.Token)
	}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", url, err)
	}
	return newWebSocket(c, opts), nil
}

// AcceptWebSocket upgrades an HTTP request to a WebSocket stream, for the
// server side. The stream stays usable after the handler returns.
func AcceptWebSocket(w http.ResponseWriter, r *http.Request, opts WebSocketOptions) (*WebSocket, error) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, err
	}
	return newWebSocket(c, opts), nil
}

func newWebSocket(c *websocket.Conn, opts WebSocketOptions) *WebSocket {
	max := opts.MaxMessageSize
	if max <= 0 {
		max = DefaultMaxMessageSize
	}
	c.SetReadLimit(int64(max))
	ws := &WebSocket{c: c, max: max, log: loggerOr(opts.Logger), pingDone: make(chan struct{}), wsem: make(chan struct{}, 1)}
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
	ws.log.Warn("websocket peer silent; closing", "idle", idle)
	ws.setInfo(CloseInfo{Err: fmt.Sprintf("no frame or pong for %s", idle)})
	ws.c.CloseNow()
}

func (ws *WebSocket) touch() { ws.lastSeen.Store(time.Now().UnixNano()) }

// Read implements Stream.
func (ws *WebSocket) Read() ([]byte, error) {
	if ws.closing.Load() {
		return nil, ErrClosed
	}
	if ws.tooBig != nil {
		return nil, ws.tooBig
	}
	for {
		if len(ws.pending) > 0 {
			msg := ws.pending[0]
			ws.pending = ws.pending[1:]
			return msg, nil
		}
		typ, r, err := ws.c.Reader(context.Background())
		if err != nil {
			return nil, ws.readFailed(err, 0)
		}
		ws.touch()
		if typ != websocket.MessageText {
			if _, err := io.Copy(io.Discard, r); err != nil {
				return nil, ws.readFailed(err, 0)
			}
			continue
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, ws.readFailed(err, len(data))
		}
		// One scan decides: a frame that is one JSON value (json.Valid
		// allows whitespace around it) is one message, its interior kept
		// as it is. Pending is empty here, so it can be returned at once.
		if json.Valid(data) {
			return bytes.Trim(data, jsonSpace), nil
		}
		for line := range bytes.SplitSeq(data, []byte{'\n'}) {
			if len(bytes.TrimSpace(line)) > 0 {
				ws.pending = append(ws.pending, trimEOL(line))
			}
		}
	}
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
		ws.tooBig = tl
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
		ws.c.Close(websocket.StatusNormalClosure, "")
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
