package transport_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// wsServer runs handler for each WebSocket connection on an httptest server
// (on 127.0.0.1) and, when the test ends, waits for the handlers to return.
func wsServer(t *testing.T, handler func(c *websocket.Conn, r *http.Request)) string {
	t.Helper()
	var wg sync.WaitGroup
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Counted before the handshake completes, so before the client's
		// dial returns and so before the test can end and wait.
		wg.Add(1)
		defer wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("Accept: %v", err)
			return
		}
		defer c.CloseNow()
		handler(c, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		waitGroupWithin(t, &wg, testTimeout)
	})
	return "ws" + strings.TrimPrefix(ts.URL, "http")
}

func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("server handlers still running after %s", d)
	}
}

func dial(t *testing.T, url string, opts transport.WebSocketOptions) *transport.WebSocket {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	ws, err := transport.DialWebSocket(testCtx(t, testTimeout), url, opts)
	if err != nil {
		t.Fatalf("DialWebSocket: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// drainConn reads from c until the connection ends, so that pings and the
// close handshake are answered.
func drainConn(c *websocket.Conn) {
	for {
		if _, _, err := c.Read(context.Background()); err != nil {
			return
		}
	}
}

func TestWebSocketReadFrames(t *testing.T) {
	t.Parallel()
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		ctx := context.Background()
		c.Write(ctx, websocket.MessageText, []byte("one\ntwo\n"))
		c.Write(ctx, websocket.MessageText, []byte(" \r\n\n"))
		c.Write(ctx, websocket.MessageText, []byte("three\r\nfour"))
		c.Write(ctx, websocket.MessageText, []byte(`{"five":5}`))
		c.Close(4000, "done here")
	})
	ws := dial(t, url, transport.WebSocketOptions{})
	got, err := readUntilErr(t, ws, testTimeout)
	if diff := cmp.Diff([]string{"one", "two", "three", "four", `{"five":5}`}, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if !errors.Is(err, io.EOF) {
		t.Errorf("Read at the peer's close = %v, want io.EOF", err)
	}
	if diff := cmp.Diff(transport.CloseInfo{WSCode: 4000, WSReason: "done here"}, ws.CloseInfo()); diff != "" {
		t.Errorf("CloseInfo (-want +got):\n%s", diff)
	}
	// Closed by the peer: writes fail as closed.
	if err := ws.Write(testCtx(t, testTimeout), []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after the peer's close = %v, want ErrClosed", err)
	}
}

// A frame that holds one JSON value is one message, however it is spread
// over lines; only a frame that is not one JSON value is split into lines.
func TestWebSocketReadFrameMessages(t *testing.T) {
	t.Parallel()
	const pretty = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"result\": {\n    \"tools\": [\n      1,\n      2\n    ]\n  }\n}"
	const prettyCRLF = "{\r\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 2,\r\n  \"result\": {}\r\n}"
	for _, tc := range []struct {
		name   string
		frames []string
		want   []string
	}{
		{
			name:   "pretty-printed object, trailing newline",
			frames: []string{pretty + "\n"},
			want:   []string{pretty},
		},
		{
			name:   "pretty-printed object, CRLF line ends",
			frames: []string{prettyCRLF + "\r\n"},
			want:   []string{prettyCRLF},
		},
		{
			name:   "pretty-printed, whitespace before and after",
			frames: []string{"\r\n \t" + pretty + " \n\n"},
			want:   []string{pretty},
		},
		{
			name:   "pretty-printed batch array",
			frames: []string{"[\n  {\"jsonrpc\": \"2.0\", \"method\": \"a\"},\n  {\"jsonrpc\": \"2.0\", \"method\": \"b\"}\n]\n"},
			want:   []string{"[\n  {\"jsonrpc\": \"2.0\", \"method\": \"a\"},\n  {\"jsonrpc\": \"2.0\", \"method\": \"b\"}\n]"},
		},
		{
			name:   "compact message, trailing newline",
			frames: []string{`{"jsonrpc":"2.0","id":3,"result":{}}` + "\n"},
			want:   []string{`{"jsonrpc":"2.0","id":3,"result":{}}`},
		},
		{
			name:   "compact message, trailing CRLF",
			frames: []string{`{"jsonrpc":"2.0","id":3,"result":{}}` + "\r\n"},
			want:   []string{`{"jsonrpc":"2.0","id":3,"result":{}}`},
		},
		{
			name:   "two compact messages in one frame",
			frames: []string{`{"jsonrpc":"2.0","id":4,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"n"}` + "\n"},
			want:   []string{`{"jsonrpc":"2.0","id":4,"result":{}}`, `{"jsonrpc":"2.0","method":"n"}`},
		},
		{
			name:   "two compact messages, CRLF and a blank line",
			frames: []string{`{"id":5}` + "\r\n\r\n" + `{"id":6}` + "\r\n"},
			want:   []string{`{"id":5}`, `{"id":6}`},
		},
		{
			name:   "noise then a message",
			frames: []string{"not json\n" + `{"jsonrpc":"2.0","method":"x"}`},
			want:   []string{"not json", `{"jsonrpc":"2.0","method":"x"}`},
		},
		{
			name:   "whitespace-only frame yields nothing",
			frames: []string{" \r\n\t\n", `{"jsonrpc":"2.0","method":"next"}`},
			want:   []string{`{"jsonrpc":"2.0","method":"next"}`},
		},
		{
			name:   "empty frame yields nothing",
			frames: []string{"", `{"jsonrpc":"2.0","method":"next"}`},
			want:   []string{`{"jsonrpc":"2.0","method":"next"}`},
		},
		{
			name:   "a frame after a pretty-printed one",
			frames: []string{pretty + "\n", `{"id":7}`},
			want:   []string{pretty, `{"id":7}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
				ctx := context.Background()
				for _, f := range tc.frames {
					if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
						return
					}
				}
				c.Close(websocket.StatusNormalClosure, "")
			})
			ws := dial(t, url, transport.WebSocketOptions{PingInterval: -1})
			got, err := readUntilErr(t, ws, testTimeout)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("messages from frames %q (-want +got):\n%s", tc.frames, diff)
			}
			if !errors.Is(err, io.EOF) {
				t.Errorf("Read at the peer's close = %v, want io.EOF", err)
			}
		})
	}
}

func TestWebSocketWriteOneFramePerMessage(t *testing.T) {
	t.Parallel()
	type frame struct {
		Type websocket.MessageType
		Data string
	}
	frames := make(chan []frame, 1)
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		var got []frame
		for range 3 {
			typ, data, err := c.Read(context.Background())
			if err != nil {
				break
			}
			got = append(got, frame{typ, string(data)})
		}
		frames <- got
		drainConn(c)
	})
	ws := dial(t, url, transport.WebSocketOptions{})
	for _, m := range []string{`{"id":1}`, `{"id":2,"text":"a b"}`, `{"id":3}`} {
		if err := ws.Write(testCtx(t, testTimeout), []byte(m)); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	want := []frame{
		{websocket.MessageText, `{"id":1}`},
		{websocket.MessageText, `{"id":2,"text":"a b"}`},
		{websocket.MessageText, `{"id":3}`},
	}
	if diff := cmp.Diff(want, <-frames); diff != "" {
		t.Errorf("frames the server got (-want +got):\n%s", diff)
	}
}

func TestWebSocketDialHeaders(t *testing.T) {
	t.Parallel()
	headers := make(chan http.Header, 2)
	url := wsServer(t, func(c *websocket.Conn, r *http.Request) {
		headers <- r.Header.Clone()
		drainConn(c)
	})
	dial(t, url, transport.WebSocketOptions{Token: "s3cret", Header: http.Header{"X-Mcpl-Test": {"yes"}}})
	h := <-headers
	if got := h.Get("Authorization"); got != "Bearer s3cret" {
		t.Errorf("Authorization = %q, want \"Bearer s3cret\"", got)
	}
	if got := h.Get("X-Mcpl-Test"); got != "yes" {
		t.Errorf("X-Mcpl-Test = %q, want \"yes\"", got)
	}
	dial(t, url, transport.WebSocketOptions{})
	if got := (<-headers).Get("Authorization"); got != "" {
		t.Errorf("Authorization without a token = %q, want none", got)
	}
}

func TestWebSocketDialRefused(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer ts.Close()
	url := "ws" + strings.TrimPrefix(ts.URL, "http")
	ws, err := transport.DialWebSocket(testCtx(t, testTimeout), url, transport.WebSocketOptions{Token: "wrong"})
	if err == nil {
		ws.Close()
		t.Fatal("DialWebSocket succeeded against a server that refuses it")
	}
	if !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "401") {
		t.Errorf("dial error %q should name the URL and the status", err)
	}
}

func TestWebSocketTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 100
	serverErr := make(chan error, 1)
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		ctx := context.Background()
		c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("a", limit)))
		// An oversize binary frame is refused too: the read limit is the
		// library's, for any frame.
		c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("b", limit+1)))
		_, _, err := c.Read(ctx)
		serverErr <- err
	})
	ws := dial(t, url, transport.WebSocketOptions{MaxMessageSize: limit})
	msg, err := readWithin(t, ws, testTimeout)
	if err != nil || len(msg) != limit {
		t.Fatalf("Read of a frame at the limit = %d bytes, %v", len(msg), err)
	}
	_, err = readWithin(t, ws, testTimeout)
	var tl *transport.TooLargeError
	if !errors.As(err, &tl) || tl.Limit != limit || tl.Size <= limit {
		t.Fatalf("Read of an oversize frame = %v, want *TooLargeError with limit %d", err, limit)
	}
	if _, err := readWithin(t, ws, testTimeout); !errors.As(err, &tl) {
		t.Errorf("Read after too large = %v, want the *TooLargeError again", err)
	}
	if ws.CloseInfo().Err == "" {
		t.Errorf("CloseInfo has no error after an oversize frame: %+v", ws.CloseInfo())
	}
	if err := ws.Write(testCtx(t, testTimeout), []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after an oversize frame = %v, want ErrClosed", err)
	}
	// The peer is told why.
	if got := websocket.CloseStatus(<-serverErr); got != websocket.StatusMessageTooBig {
		t.Errorf("server saw close status %v, want %v", got, websocket.StatusMessageTooBig)
	}
}

// A binary frame is refused: Read fails with a *PeerFaultError from then
// on (with one warning), writes are refused, and Close (which the layer
// above makes on that error) closes with 1003 and a reason; the lines of a
// frame being split before it are still read.
func TestWebSocketBinaryFrameRefused(t *testing.T) {
	t.Parallel()
	serverErr := make(chan error, 1)
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		ctx := context.Background()
		c.Write(ctx, websocket.MessageText, []byte("one\ntwo"))
		c.Write(ctx, websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","method":"binary"}`))
		c.Write(ctx, websocket.MessageText, []byte(`{"never":"read"}`))
		_, _, err := c.Read(ctx)
		serverErr <- err
	})
	rec := &logRecorder{}
	ws := dial(t, url+"/mcp?token=abc", transport.WebSocketOptions{Logger: slog.New(rec)})
	got, err := readUntilErr(t, ws, testTimeout)
	if diff := cmp.Diff([]string{"one", "two"}, got); diff != "" {
		t.Errorf("messages before the binary frame (-want +got):\n%s", diff)
	}
	var pf *transport.PeerFaultError
	if !errors.As(err, &pf) || errors.Is(err, io.EOF) || errors.Is(err, transport.ErrClosed) || !strings.Contains(err.Error(), "binary frame") {
		t.Fatalf("Read of a binary frame = %v, want a *PeerFaultError naming the binary frame", err)
	}
	if _, again := readWithin(t, ws, testTimeout); again == nil || again.Error() != err.Error() {
		t.Errorf("Read after the binary frame = %v, want %v again", again, err)
	}
	if info := ws.CloseInfo(); !strings.Contains(info.Err, "binary frame") || !strings.Contains(info.Err, "1003") {
		t.Errorf("CloseInfo = %+v, want Err to name the binary frame and 1003", info)
	}
	if err := ws.Write(testCtx(t, testTimeout), []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after the binary frame = %v, want ErrClosed", err)
	}
	ws.Close()
	var ce websocket.CloseError
	if serr := <-serverErr; !errors.As(serr, &ce) || ce.Code != websocket.StatusUnsupportedData || ce.Reason != "MCPL messages are text frames" {
		t.Errorf("the server's Read ended with %v, want close status 1003 \"MCPL messages are text frames\"", serr)
	}
	warns := rec.All("websocket peer sent a binary frame; closing")
	if len(warns) != 1 {
		t.Fatalf("%d warnings about the binary frame, want 1", len(warns))
	}
	if lvl, attrs, _ := rec.Find("websocket peer sent a binary frame; closing"); lvl != slog.LevelWarn || attrs["peer"].String() != url+"/mcp?REDACTED" {
		t.Errorf("the warning: level %v, attrs %v; want Warn and peer %q", lvl, attrs, url+"/mcp?REDACTED")
	}
}

func TestWebSocketPeerGoneWithoutCloseFrame(t *testing.T) {
	t.Parallel()
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		c.CloseNow()
	})
	ws := dial(t, url, transport.WebSocketOptions{})
	_, err := readWithin(t, ws, testTimeout)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Read after the peer vanished = %v, want an error that is not a clean close", err)
	}
	if info := ws.CloseInfo(); info.Err == "" || info.WSCode != 0 {
		t.Errorf("CloseInfo = %+v, want an error and no close code", info)
	}
}

func TestWebSocketClose(t *testing.T) {
	t.Parallel()
	serverErr := make(chan error, 1)
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		_, _, err := c.Read(context.Background())
		serverErr <- err
	})
	ws := dial(t, url, transport.WebSocketOptions{})
	readErr := make(chan error, 1)
	go func() {
		_, err := ws.Read()
		readErr <- err
	}()
	start := time.Now()
	if err := ws.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %s against a peer that answers", d)
	}
	if err := <-readErr; !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Read blocked across Close = %v, want ErrClosed", err)
	}
	if got := websocket.CloseStatus(<-serverErr); got != websocket.StatusNormalClosure {
		t.Errorf("server saw close status %v, want normal closure", got)
	}
	if _, err := ws.Read(); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	if err := ws.Write(context.Background(), []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if err := ws.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestWebSocketReadAfterCloseWithPendingMessages(t *testing.T) {
	t.Parallel()
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		c.Write(context.Background(), websocket.MessageText, []byte("a\nb\nc"))
		drainConn(c)
	})
	ws := dial(t, url, transport.WebSocketOptions{})
	if msg, err := readWithin(t, ws, testTimeout); err != nil || string(msg) != "a" {
		t.Fatalf("Read = %q, %v; want \"a\"", msg, err)
	}
	ws.Close()
	if msg, err := ws.Read(); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Read after Close = %q, %v; want ErrClosed though messages were split off", msg, err)
	}
}

// A write whose context has already ended sends nothing and leaves the
// stream open.
func TestWebSocketWriteCanceledContext(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		_, data, err := c.Read(context.Background())
		if err == nil {
			got <- string(data)
		}
		drainConn(c)
	})
	ws := dial(t, url, transport.WebSocketOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 100 {
		err := ws.Write(ctx, []byte("never"))
		if !errors.Is(err, context.Canceled) || errors.Is(err, transport.ErrPartialWrite) {
			t.Fatalf("Write with a canceled context = %v, want context.Canceled alone", err)
		}
	}
	if err := ws.Write(testCtx(t, testTimeout), []byte("sent")); err != nil {
		t.Fatalf("Write after canceled writes: %v", err)
	}
	if m := <-got; m != "sent" {
		t.Errorf("server got %q, want \"sent\"", m)
	}
}

// A write the peer does not take in time is abandoned part way, and the
// stream closes itself.
func TestWebSocketWriteDeadline(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		<-release // read nothing until the test is done
	})
	defer close(release)
	ws := dial(t, url, transport.WebSocketOptions{PingInterval: -1})
	// Write until the socket buffers, whatever their size, are full.
	msg := make([]byte, 1<<20)
	var err error
	var took time.Duration
	for range 512 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		err = ws.Write(ctx, msg)
		took = time.Since(start)
		cancel()
		if err != nil {
			break
		}
	}
	if !errors.Is(err, transport.ErrPartialWrite) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write the peer does not read = %v, want ErrPartialWrite and context.DeadlineExceeded", err)
	}
	if took > 5*time.Second {
		t.Errorf("the abandoned Write took %s", took)
	}
	if err := ws.Write(context.Background(), []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after a partial write = %v, want ErrClosed", err)
	}
	if _, err := ws.Read(); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Read after a partial write = %v, want ErrClosed", err)
	}
}

// silentServer completes the WebSocket handshake by hand, then reads and
// discards everything and answers nothing: not even a ping.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			base64.StdEncoding.EncodeToString(sum[:]))
		io.Copy(io.Discard, br)
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case <-done:
		case <-time.After(testTimeout):
			t.Error("the silent server is still running: the client never closed the connection")
		}
	})
	return "ws://" + ln.Addr().String()
}

func TestWebSocketIdleClose(t *testing.T) {
	t.Parallel()
	const idle = 150 * time.Millisecond
	rec := &logRecorder{}
	url := silentServer(t)
	start := time.Now() // the idle clock starts during the dial
	ws := dial(t, url, transport.WebSocketOptions{
		PingInterval: 50 * time.Millisecond,
		IdleTimeout:  idle,
		Logger:       slog.New(rec),
	})
	_, err := readWithin(t, ws, testTimeout)
	elapsed := time.Since(start)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Read from a silent peer = %v, want the idle error", err)
	}
	if elapsed < idle {
		t.Errorf("closed after %s, before the idle timeout of %s", elapsed, idle)
	}
	if elapsed > 2*time.Second {
		t.Errorf("closed after %s; want about the idle timeout of %s", elapsed, idle)
	}
	if info := ws.CloseInfo(); !strings.Contains(info.Err, "no frame or pong") {
		t.Errorf("CloseInfo = %+v, want the idle reason in Err", info)
	}
	if _, _, ok := rec.Find("websocket peer silent; closing"); !ok {
		t.Error("the idle close was not logged")
	}
	if err := ws.Write(testCtx(t, testTimeout), []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after the idle close = %v, want ErrClosed", err)
	}
	start = time.Now()
	ws.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close after the idle close took %s", d)
	}
	if err := ws.Write(context.Background(), []byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
}

// Pongs keep a connection alive that carries no messages for longer than
// the idle timeout.
func TestWebSocketPingsKeepAlive(t *testing.T) {
	t.Parallel()
	// Generous for a pong under -race on a busy machine, but short
	// enough that the quiet spell below spans several idle timeouts.
	const idle = 300 * time.Millisecond
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		ctx := c.CloseRead(context.Background()) // answers pings
		select {
		case <-time.After(3 * idle):
			c.Write(context.Background(), websocket.MessageText, []byte("still here"))
		case <-ctx.Done():
			return
		}
		<-ctx.Done()
	})
	ws := dial(t, url, transport.WebSocketOptions{PingInterval: 20 * time.Millisecond, IdleTimeout: idle})
	msg, err := readWithin(t, ws, testTimeout)
	if err != nil || string(msg) != "still here" {
		t.Fatalf("Read = %q, %v; want the message sent after 3 idle timeouts of pings", msg, err)
	}
}

func TestAcceptWebSocket(t *testing.T) {
	t.Parallel()
	streams := make(chan *transport.WebSocket, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := transport.AcceptWebSocket(w, r, transport.WebSocketOptions{PingInterval: -1, Logger: discardLogger})
		if err != nil {
			t.Errorf("AcceptWebSocket: %v", err)
			return
		}
		streams <- s // and return: the stream outlives the handler
	}))
	defer ts.Close()
	client := dial(t, "ws"+strings.TrimPrefix(ts.URL, "http"), transport.WebSocketOptions{})
	server := <-streams
	defer server.Close()
	ctx := testCtx(t, testTimeout)
	for _, m := range []string{"ping 1", "ping 2"} {
		if err := client.Write(ctx, []byte(m)); err != nil {
			t.Fatal(err)
		}
		msg, err := readWithin(t, server, testTimeout)
		if err != nil || string(msg) != m {
			t.Fatalf("server Read = %q, %v; want %q", msg, err, m)
		}
		if err := server.Write(ctx, append([]byte("re: "), msg...)); err != nil {
			t.Fatal(err)
		}
		if msg, err := readWithin(t, client, testTimeout); err != nil || string(msg) != "re: "+m {
			t.Fatalf("client Read = %q, %v; want %q", msg, err, "re: "+m)
		}
	}
	// The client closes: the server reads a clean end.
	closed := make(chan struct{})
	go func() {
		client.Close()
		close(closed)
	}()
	if _, err := readWithin(t, server, testTimeout); !errors.Is(err, io.EOF) {
		t.Errorf("server Read at the client's close = %v, want io.EOF", err)
	}
	<-closed
	if got := server.CloseInfo().WSCode; got != 1000 {
		t.Errorf("server CloseInfo.WSCode = %d, want 1000", got)
	}
}

// A frame of many lines is split as it is read: the stream holds the frame
// and no more, however many messages are left in it, and each message is a
// copy that does not pin the frame. Not parallel, so that the heap measured
// is this test's.
func TestWebSocketSplitFrameMemory(t *testing.T) {
	const lines = 1_000_000 // "{}\n" each: a frame of about 3 MB
	// The bound on the heap's growth halfway through: four times the
	// frame, room for the frame as read (io.ReadAll may hold up to about
	// twice its size) and the connection's buffers. Splitting the whole
	// frame at once into slices costs 24 MB in slice headers alone.
	const bound = 4 * 3 * lines
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		ctx := context.Background()
		if err := c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("{}\n", lines))); err != nil {
			return
		}
		c.Close(websocket.StatusNormalClosure, "")
	})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ws := dial(t, url, transport.WebSocketOptions{PingInterval: -1})
	read := func(n int) {
		t.Helper()
		for i := range n {
			msg, err := ws.Read()
			if err != nil {
				t.Fatalf("Read %d of %d: %v", i+1, lines, err)
			}
			if string(msg) != "{}" || cap(msg) > 16 {
				t.Fatalf("Read %d = %q (capacity %d), want \"{}\" in a buffer of its own", i+1, msg, cap(msg))
			}
		}
	}
	read(lines / 2)
	var mid runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&mid)
	growth := int64(mid.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap halfway through: %d bytes over the start (bound %d)", growth, bound)
	if growth > bound {
		t.Errorf("heap halfway through a frame of %d lines grew by %d bytes, want at most %d", lines, growth, bound)
	}
	read(lines - lines/2)
	if msg, err := readWithin(t, ws, testTimeout); !errors.Is(err, io.EOF) {
		t.Errorf("Read after the %d lines = %q, %v; want io.EOF", lines, msg, err)
	}
}
