package hostile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcpl-go/mcpl/internal/hostile"
)

// dial connects to the hostile program over WebSocket.
func dial(t *testing.T, url string) (*websocket.Conn, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dialing %s: %v", url, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	c.SetReadLimit(-1)
	return c, ctx
}

func readFrame(t *testing.T, ctx context.Context, c *websocket.Conn) (websocket.MessageType, []byte) {
	t.Helper()
	typ, data, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return typ, data
}

// Over WebSocket: the same JSON-RPC, a frame holding several lines at the
// moment, and a binary frame after the initialize answer.
func TestWSServe(t *testing.T) {
	url := hostile.StartWS(t, "-ws-binary", "-ws-split", "3", "-at", "initialize", "-evil")
	if !strings.HasSuffix(url, "/mcpl") {
		t.Errorf("URL %q, want one ending /mcpl", url)
	}
	c, ctx := dial(t, url)
	if err := c.Write(ctx, websocket.MessageText, []byte(request(1, "initialize", initParams))); err != nil {
		t.Fatal(err)
	}
	typ, data := readFrame(t, ctx, c)
	lines := strings.Split(string(data), "\n")
	if typ != websocket.MessageText || len(lines) != 3 {
		t.Fatalf("first frame (%v): %q, want 3 lines of text", typ, data)
	}
	for _, l := range lines {
		if l != `{"jsonrpc":"2.0","method":"notifications/x"}` {
			t.Errorf("split frame line %q", l)
		}
	}
	typ, data = readFrame(t, ctx, c)
	m := decode(t, data)
	var init initResult
	unmarshal(t, m.Result, &init)
	if typ != websocket.MessageText || string(m.ID) != "1" || init.ServerInfo.Name != hostile.EvilName {
		t.Fatalf("second frame (%v): %.300s, want the evil initialize answer", typ, data)
	}
	if typ, data = readFrame(t, ctx, c); typ != websocket.MessageBinary || len(data) == 0 {
		t.Fatalf("third frame (%v): %q, want a binary frame", typ, data)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(request(2, "tools/call", `{"name":"echo","arguments":{"text":"hi"}}`))); err != nil {
		t.Fatal(err)
	}
	_, data = readFrame(t, ctx, c)
	var call callResult
	unmarshal(t, decode(t, data).Result, &call)
	if len(call.Content) != 1 || !strings.HasPrefix(call.Content[0].Text, "hi\x1b") {
		t.Errorf("tools/call over WebSocket: %s", data)
	}
}

// -flood over WebSocket: a frame a message, padded with -ws-frame-pad.
func TestWSFloodFramePad(t *testing.T) {
	url := hostile.StartWS(t, "-flood", "push/event", "-count", "3", "-size", "100", "-ws-frame-pad", "50", "-event-id-size", "20")
	c, ctx := dial(t, url)
	for i := 1; i <= 3; i++ {
		typ, data := readFrame(t, ctx, c)
		body, ok := strings.CutSuffix(string(data), strings.Repeat(" ", 50))
		if typ != websocket.MessageText || !ok || strings.HasSuffix(body, " ") {
			t.Fatalf("frame %d (%v): %q, want a message and 50 spaces", i, typ, data)
		}
		m := decode(t, []byte(body))
		var params struct {
			EventID string `json:"eventId"`
			Pad     string `json:"pad"`
		}
		unmarshal(t, m.Params, &params)
		if string(m.ID) != fmt.Sprintf(`"h%d"`, i) || string(m.Method) != `"push/event"` || len(params.Pad) != 100 || len(params.EventID) != 20 {
			t.Errorf("frame %d: %s", i, body)
		}
	}
}

// -ws-no-upgrade takes the connection and the request, and never answers.
func TestWSNoUpgrade(t *testing.T) {
	url := hostile.StartWS(t, "-ws-no-upgrade")
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), "/mcpl")
	conn, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET /mcpl HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	for range 2 { // held, not answered, and still held after more is written
		conn.SetReadDeadline(time.Now().Add(quiet))
		n, err := conn.Read(make([]byte, 512))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read %d bytes, %v: want a timeout on a held connection", n, err)
		}
		if _, err := conn.Write([]byte("more\r\n")); err != nil {
			t.Fatalf("writing to the held connection: %v", err)
		}
	}
}

// -ws-redirect answers the upgrade with 302, recording whether the request
// carried credentials.
func TestWSRedirect(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record")
	const target = "ws://127.0.0.1:1/elsewhere"
	url := hostile.StartWS(t, "-ws-redirect", target, "-record", rec)
	client := &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       waitFor,
	}
	defer client.CloseIdleConnections()
	for _, token := range []string{"secret", ""} {
		req, err := http.NewRequest("GET", "http"+strings.TrimPrefix(url, "ws"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Connection", "Upgrade")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != target {
			t.Errorf("answered %s, Location %q; want 302 to %s", resp.Status, resp.Header.Get("Location"), target)
		}
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]bool
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]bool
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("record line %q: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != 2 || !got[0]["redirect"] || !got[0]["authorization"] || got[1]["authorization"] {
		t.Errorf("recorded %v, want two redirects, the first with authorization", got)
	}
}
