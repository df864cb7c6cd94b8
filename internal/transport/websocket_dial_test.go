package transport_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// The secret parts of the URLs the tests below dial, none of which may
// appear in an error.
var dialSecrets = []string{"s3cret", "user:", "token=abc", "abc"}

// secretURL is ws://user:s3cret@<hostport>/x?token=abc.
func secretURL(hostport string) string {
	return "ws://user:s3cret@" + hostport + "/x?token=abc"
}

func assertNoSecrets(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("the dial succeeded; want an error")
	}
	t.Logf("dial error: %v", err)
	for _, s := range dialSecrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the dial error holds %q: %q", s, err)
		}
	}
}

// hangServer accepts TCP connections on 127.0.0.1, reads the HTTP request
// from each and sends it on reqs, then never answers: it reads until the
// client goes. The cleanup closes the listener and every connection and
// waits for its goroutines.
func hangServer(t *testing.T) (addr string, reqs <-chan *http.Request) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *http.Request, 4)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() {
				br := bufio.NewReader(conn)
				if req, err := http.ReadRequest(br); err == nil {
					select {
					case ch <- req:
					default:
					}
				}
				io.Copy(io.Discard, br)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		waitGroupWithin(t, &wg, testTimeout)
	})
	return ln.Addr().String(), ch
}

// dialWithin runs DialWebSocket in a goroutine and fails the test unless it
// returns within d; it closes a stream that should not have been opened.
func dialWithin(t *testing.T, ctx context.Context, url string, opts transport.WebSocketOptions, d time.Duration) error {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	type result struct {
		ws  *transport.WebSocket
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ws, err := transport.DialWebSocket(ctx, url, opts)
		ch <- result{ws, err}
	}()
	select {
	case r := <-ch:
		if r.ws != nil {
			r.ws.Close()
		}
		return r.err
	case <-time.After(d):
		t.Fatalf("DialWebSocket did not return within %s", d)
		return nil
	}
}

// A server that takes the connection and never answers the upgrade fails
// the dial after ConnectTimeout, though ctx has no deadline, and the error
// says so.
func TestDialWebSocketUpgradeTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	addr, reqs := hangServer(t)
	start := time.Now()
	err := dialWithin(t, context.Background(), secretURL(addr), transport.WebSocketOptions{ConnectTimeout: timeout}, testTimeout)
	took := time.Since(start)
	assertNoSecrets(t, err)
	if !strings.Contains(err.Error(), "no WebSocket upgrade answer within 300ms") {
		t.Errorf("the dial error %q does not say the upgrade went unanswered", err)
	}
	if want := "transport: dial ws://REDACTED@" + addr + "/x?REDACTED: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("the dial error %q does not begin %q", err, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the dial error %v does not wrap context.DeadlineExceeded", err)
	}
	if took < timeout || took > timeout+3*time.Second {
		t.Errorf("the dial failed after %s, want about %s", took, timeout)
	}
	// The server did get the upgrade request: it was the answer that hung.
	if req := recvWithin(t, reqs, testTimeout, "the upgrade request"); req.Header.Get("Upgrade") != "websocket" {
		t.Errorf("the server got %v, want a WebSocket upgrade", req.Header)
	}
}

// With no ConnectTimeout, the default of 10s applies, and a ctx that ends
// first ends the dial with its own error.
func TestDialWebSocketCanceledWhileWaiting(t *testing.T) {
	t.Parallel()
	addr, reqs := hangServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-reqs // the request is out: now give up
		cancel()
	}()
	err := dialWithin(t, ctx, secretURL(addr), transport.WebSocketOptions{}, testTimeout)
	assertNoSecrets(t, err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("the dial error %v does not wrap context.Canceled", err)
	}
	if strings.Contains(err.Error(), "within") {
		t.Errorf("the dial error %q blames the connect timeout for a canceled ctx", err)
	}
}

// ConnectTimeout bounds the TCP connection too, and a caller's client is
// used without being changed.
func TestDialWebSocketConnectTimeout(t *testing.T) {
	t.Parallel()
	dialed := make(chan struct{}, 1)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		dialed <- struct{}{}
		<-ctx.Done() // a connection that never completes
		return nil, ctx.Err()
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	err := dialWithin(t, context.Background(), "ws://127.0.0.1:1/x?token=abc",
		transport.WebSocketOptions{HTTPClient: client, ConnectTimeout: 200 * time.Millisecond}, testTimeout)
	assertNoSecrets(t, err)
	if !strings.Contains(err.Error(), "could not connect within 200ms") {
		t.Errorf("the dial error %q does not say the connection was not made in time", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the dial error %v does not wrap context.DeadlineExceeded", err)
	}
	recvWithin(t, dialed, testTimeout, "the client's dialer")
	if client.CheckRedirect != nil || client.Transport != tr {
		t.Error("DialWebSocket changed the caller's http.Client")
	}
	if http.DefaultClient.CheckRedirect != nil {
		t.Error("DialWebSocket changed http.DefaultClient")
	}
}

// seenServer is an httptest server that counts the requests it gets and
// keeps their Authorization headers, then hands them to handler.
type seenServer struct {
	*httptest.Server
	count atomic.Int32
	mu    sync.Mutex
	auth  []string
}

func newSeenServer(t *testing.T, handler http.HandlerFunc) *seenServer {
	t.Helper()
	s := &seenServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count.Add(1)
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *seenServer) hostport() string { return strings.TrimPrefix(s.URL, "http://") }

// A redirect to another origin (another port of 127.0.0.1) is refused:
// that origin never hears of the request, so never sees the token.
func TestDialWebSocketRedirectToOtherOriginRefused(t *testing.T) {
	t.Parallel()
	other := newSeenServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "should not be here", http.StatusTeapot)
	})
	for _, tc := range []struct {
		name, location, shown string
	}{
		{"http, 302", other.URL + "/y?token=abc", "http://" + other.hostport() + "/y?REDACTED"},
		{"ws scheme", "ws://" + other.hostport() + "/y?token=abc", "http://" + other.hostport() + "/y?REDACTED"},
		{"userinfo", "http://user:s3cret@" + other.hostport() + "/y", "http://REDACTED@" + other.hostport() + "/y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			origin := newSeenServer(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tc.location, http.StatusFound)
			})
			err := dialWithin(t, testCtx(t, testTimeout), secretURL(origin.hostport()),
				transport.WebSocketOptions{Token: "tok3n"}, testTimeout)
			assertNoSecrets(t, err)
			want := "transport: dial ws://REDACTED@" + origin.hostport() + "/x?REDACTED: refused a redirect to another origin (" + tc.shown + ")"
			if err.Error() != want {
				t.Errorf("the dial error = %q\nwant %q", err, want)
			}
			origin.mu.Lock()
			defer origin.mu.Unlock()
			if len(origin.auth) != 1 || origin.auth[0] != "Bearer tok3n" {
				t.Errorf("the origin got Authorization %q, want one \"Bearer tok3n\"", origin.auth)
			}
		})
	}
	t.Cleanup(func() {
		// After the subtests: the other origin was never asked.
		other.Close()
		if n := other.count.Load(); n != 0 {
			t.Errorf("the other origin got %d requests (Authorization %q), want none", n, other.auth)
		}
	})
}

// A redirect within the origin (another path) is followed, the token with
// it.
func TestDialWebSocketRedirectSameOrigin(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	defer waitGroupWithin(t, &wg, testTimeout)
	s := newSeenServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ws" {
			http.Redirect(w, r, "/ws?n=1", http.StatusTemporaryRedirect)
			return
		}
		wg.Add(1)
		defer wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("Accept: %v", err)
			return
		}
		defer c.CloseNow()
		c.Write(context.Background(), websocket.MessageText, []byte(`{"at":"`+r.URL.String()+`"}`))
		drainConn(c)
	})
	defer s.Close()
	ws := dial(t, "ws://"+s.hostport()+"/start", transport.WebSocketOptions{Token: "tok3n", PingInterval: -1})
	msg, err := readWithin(t, ws, testTimeout)
	if err != nil || string(msg) != `{"at":"/ws?n=1"}` {
		t.Fatalf("Read = %q, %v; want the message from /ws?n=1", msg, err)
	}
	ws.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.auth) != 2 || s.auth[0] != "Bearer tok3n" || s.auth[1] != "Bearer tok3n" {
		t.Errorf("the server got Authorization %q on the first request and the redirect, want \"Bearer tok3n\" on both", s.auth)
	}
}

// No dial error holds the URL's userinfo or query, however the dial fails.
func TestDialWebSocketErrorsRedactURL(t *testing.T) {
	t.Parallel()
	t.Run("refused port", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		err = dialWithin(t, testCtx(t, testTimeout), secretURL(addr), transport.WebSocketOptions{}, testTimeout)
		assertNoSecrets(t, err)
		if !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "ws://REDACTED@"+addr+"/x?REDACTED") {
			t.Errorf("the dial error %q should name the redacted URL and the refusal", err)
		}
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Errorf("the dial error %v does not wrap the *net.OpError", err)
		}
	})
	t.Run("403", func(t *testing.T) {
		t.Parallel()
		s := newSeenServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "go away: "+r.URL.String(), http.StatusForbidden)
		})
		err := dialWithin(t, testCtx(t, testTimeout), secretURL(s.hostport()), transport.WebSocketOptions{}, testTimeout)
		assertNoSecrets(t, err)
		if !strings.Contains(err.Error(), "403") {
			t.Errorf("the dial error %q should give the status", err)
		}
	})
	t.Run("redirect", func(t *testing.T) {
		t.Parallel()
		other := newSeenServer(t, func(w http.ResponseWriter, r *http.Request) {})
		s := newSeenServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/y?token=abc", http.StatusFound)
		})
		err := dialWithin(t, testCtx(t, testTimeout), secretURL(s.hostport()), transport.WebSocketOptions{}, testTimeout)
		assertNoSecrets(t, err)
		if !strings.Contains(err.Error(), "refused a redirect to another origin") {
			t.Errorf("the dial error %q should say the redirect was refused", err)
		}
	})
	t.Run("same-origin redirect loop", func(t *testing.T) {
		t.Parallel()
		s := newSeenServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/x?token=abc&s3cret", http.StatusFound)
		})
		err := dialWithin(t, testCtx(t, testTimeout), secretURL(s.hostport()), transport.WebSocketOptions{}, testTimeout)
		assertNoSecrets(t, err)
		if !strings.Contains(err.Error(), "stopped after 10 redirects") {
			t.Errorf("the dial error %q should say the redirects were stopped", err)
		}
	})
	t.Run("hang past ConnectTimeout", func(t *testing.T) {
		t.Parallel()
		addr, _ := hangServer(t)
		err := dialWithin(t, context.Background(), secretURL(addr), transport.WebSocketOptions{ConnectTimeout: 100 * time.Millisecond}, testTimeout)
		assertNoSecrets(t, err)
		if !strings.Contains(err.Error(), "within 100ms") {
			t.Errorf("the dial error %q should give the timeout", err)
		}
	})
	t.Run("unparsable", func(t *testing.T) {
		t.Parallel()
		err := dialWithin(t, testCtx(t, testTimeout), "ws://user:s3cret/x@127.0.0.1:1/x?token=abc", transport.WebSocketOptions{}, testTimeout)
		assertNoSecrets(t, err)
		if want := "transport: dial (unparsable URL): not a valid WebSocket URL"; err.Error() != want {
			t.Errorf("the dial error = %q, want %q", err, want)
		}
	})
	t.Run("scheme", func(t *testing.T) {
		t.Parallel()
		err := dialWithin(t, testCtx(t, testTimeout), "ftp://user:s3cret@127.0.0.1:1/x?token=abc", transport.WebSocketOptions{}, testTimeout)
		assertNoSecrets(t, err)
		if !strings.Contains(err.Error(), `unsupported URL scheme "ftp"`) {
			t.Errorf("the dial error %q should name the scheme", err)
		}
	})
}
