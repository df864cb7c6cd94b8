package transport_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// With TokenParam, the token goes in the dialed URL's query under that
// name and not in an Authorization header; a dial that fails, against a
// server that even quotes the URL it was asked for, shows the token
// nowhere: not in the error, the log or CloseInfo.
func TestWebSocketTokenParam(t *testing.T) {
	t.Parallel()
	const token = "tp-s3cret+/= value"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcpl" || r.URL.Query().Get("token") != token || r.URL.Query().Get("room") != "a" || r.Header.Get("Authorization") != "" {
			// A careless server: its refusal quotes the request.
			http.Error(w, "refused "+r.URL.String()+" "+r.URL.Query().Get("token"), http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		if typ, msg, err := c.Read(ctx); err == nil {
			c.Write(ctx, typ, msg)
		}
		c.Close(websocket.StatusNormalClosure, "")
	}))
	t.Cleanup(ts.Close)
	base := "ws" + strings.TrimPrefix(ts.URL, "http")
	rec := &lineRecorder{}
	log := slog.New(rec)

	ws, err := transport.DialWebSocket(testCtx(t, testTimeout), base+"/mcpl?room=a", transport.WebSocketOptions{Token: token, TokenParam: "token", Logger: log, PingInterval: -1})
	if err != nil {
		t.Fatalf("dial with the token in the query: %v", err)
	}
	if err := ws.Write(testCtx(t, testTimeout), []byte(`{"jsonrpc":"2.0","method":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if msg, err := readWithin(t, ws, testTimeout); err != nil || string(msg) != `{"jsonrpc":"2.0","method":"x"}` {
		t.Fatalf("echo = %s, %v", msg, err)
	}
	ws.Close()
	if info := fmt.Sprint(ws.CloseInfo()); strings.Contains(info, "s3cret") {
		t.Errorf("CloseInfo holds the token: %s", info)
	}

	for _, tc := range []struct{ name, url, param string }{
		{"wrong path", base + "/elsewhere?room=a", "token"},
		{"wrong param", base + "/mcpl?room=a", "key"},
	} {
		_, err := transport.DialWebSocket(testCtx(t, testTimeout), tc.url, transport.WebSocketOptions{Token: token, TokenParam: tc.param, Logger: log})
		if err == nil {
			t.Fatalf("%s: the dial succeeded", tc.name)
		}
		t.Logf("%s: %v", tc.name, err)
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "room=a") {
			t.Errorf("%s: the error shows a secret: %v", tc.name, err)
		}
	}
	assertNoSecretLoggedOrNothing(t, rec, "s3cret")
}

// assertNoSecretLoggedOrNothing is assertNoSecretLogged for a test that
// may log nothing.
func assertNoSecretLoggedOrNothing(t *testing.T, rec *lineRecorder, secret string) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, line := range rec.lines {
		if strings.Contains(line, secret) {
			t.Errorf("log line holds a secret: %s", line)
		}
	}
}
