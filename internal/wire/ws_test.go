package wire_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// wsServer starts the test server program on WebSocket (127.0.0.1) and
// dials it.
func wsServer(t *testing.T, opts wire.Options) (*wire.Peer, *recorder, *transport.Process) {
	t.Helper()
	proc := spawnProc(t, transport.StdioOptions{StopWait: 100 * time.Millisecond}, "-listen", "127.0.0.1:0")
	first, err := proc.Read()
	if err != nil {
		t.Fatalf("reading the server's URL: %v", err)
	}
	url := strings.TrimSpace(string(first))
	if !strings.HasPrefix(url, "ws://127.0.0.1:") {
		t.Fatalf("the server printed %q", url)
	}
	ws, err := transport.DialWebSocket(testCtx(t), url, transport.WebSocketOptions{PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	p, rec := newPeer(t, ws, opts)
	return p, rec, proc
}

// Over WebSocket, a call is answered, an error answer reads as the
// server's, and noise frames are skipped.
func TestWebSocketCalls(t *testing.T) {
	p, rec, _ := wsServer(t, wire.Options{})
	initialize(t, p)
	echo(t, p, "over websocket")
	_, err := callTool(testCtx(t), p, "fail", map[string]any{"message": "  The channel is archived.\n"})
	ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
	checkText(t, ce, `tools/call to "discord": error -32000: The channel is archived.`)
	if ce.Answer.Message != "  The channel is archived.\n" {
		t.Errorf("the answer's words are not kept whole: %q", ce.Answer.Message)
	}
	_, err = callTool(testCtx(t), p, "fail", map[string]any{"message": " "})
	checkText(t, callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer), `tools/call to "discord": error -32000`)
	wantAttrs(t, rec.Find("answered with an error")[0], map[string]any{"method": "tools/call", "id": 3, "code": -32000})

	res, err := callTool(testCtx(t), p, "noise", map[string]any{"lines": noiseLines})
	if err != nil || res.Text() != "after noise" {
		t.Fatalf("noise: %q, %v", res.Text(), err)
	}
	if got := skippedLines(rec); len(got) != len(noiseLines) {
		t.Errorf("skipped %q", got)
	}
	echo(t, p, "after noise")
}

// Over WebSocket, a server that exits with a call pending reads as a
// closed connection, and the log says the server closed it.
func TestWebSocketServerDrops(t *testing.T) {
	for _, recon := range []bool{true, false} {
		t.Run(map[bool]string{true: "reconnecting", false: "no reconnect"}[recon], func(t *testing.T) {
			t.Parallel()
			p, rec, proc := wsServer(t, wire.Options{Reconnecting: func() bool { return recon }})
			initialize(t, p)
			_, err := callTool(testCtx(t), p, "exit", map[string]int{"code": 4})
			ce := callError(t, err, wire.NoResponse, wire.CauseClosed)
			checkText(t, ce, textClosedPending)
			if ce.Reconnecting != recon || ce.ID != 2 {
				t.Errorf("CallError fields: %+v", ce)
			}
			waitDone(t, p)
			<-proc.Exited()
			r := rec.One(t, "connection closed with requests pending")
			wantAttrs(t, r, map[string]any{"closed_here": false, "unanswered": "[tools/call#2]"})
			if _, err := callTool(testCtx(t), p, "echo", nil); err == nil {
				t.Fatal("a call on a closed connection succeeded")
			} else {
				ce := callError(t, err, wire.NotSent, wire.CauseClosed)
				checkText(t, ce, textNotSentClosed)
				if ce.Reconnecting != recon {
					t.Errorf("CallError fields: %+v", ce)
				}
			}
		})
	}
}

// Over WebSocket, this side's close with a call pending reads as closed on
// this side.
func TestWebSocketClosedHere(t *testing.T) {
	proc := spawnProc(t, transport.StdioOptions{StopWait: 100 * time.Millisecond}, "-listen", "127.0.0.1:0")
	first, err := proc.Read()
	if err != nil {
		t.Fatal(err)
	}
	ws, err := transport.DialWebSocket(testCtx(t), strings.TrimSpace(string(first)), transport.WebSocketOptions{PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, hangWritten := writtenWhen(ws, `"hang"`)
	p, rec := newPeer(t, s, wire.Options{Reconnecting: func() bool { return true }})
	initialize(t, p)
	errc := make(chan error, 1)
	go func() {
		_, err := callTool(testCtx(t), p, "hang", nil)
		errc <- err
	}()
	<-hangWritten
	p.Close()
	checkText(t, callError(t, <-errc, wire.NoResponse, wire.CauseClosedHere), textClosedHerePending)
	wantAttrs(t, rec.One(t, "this side closed the connection with requests pending"),
		map[string]any{"closed_here": true, "unanswered": "[tools/call#2]"})
	_, err = callTool(testCtx(t), p, "echo", nil)
	checkText(t, callError(t, err, wire.NotSent, wire.CauseClosedHere), textNotSentClosedHere)
}

// A WebSocket peer's own close text stays out of the error's text: the
// close code and reason are log-only detail.
func TestWebSocketCloseReasonStaysOutOfText(t *testing.T) {
	const reason = "bot token revoked; method tools/call id 1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		// Read the host's request, then close instead of answering.
		if _, _, err := c.Read(r.Context()); err != nil {
			c.CloseNow()
			return
		}
		c.Close(4001, reason)
	}))
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server on %s", srv.URL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, err := transport.DialWebSocket(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), transport.WebSocketOptions{PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	p, rec := newPeer(t, ws, wire.Options{})
	err = p.Call(ctx, "tools/call", map[string]string{"name": "x"}, nil)
	ce := callError(t, err, wire.NoResponse, wire.CauseClosed)
	checkText(t, ce, textClosedPending)
	for _, leak := range []string{reason, "bot token", "revoked", "4001", "id 1"} {
		if strings.Contains(ce.Error(), leak) {
			t.Errorf("the peer's close text (%q) reached the error's text: %s", leak, ce.Error())
		}
	}
	waitDone(t, p)
	if !errors.Is(p.Err(), io.EOF) || p.ClosedHere() {
		t.Errorf("Err = %v, ClosedHere = %v; want EOF (a clean close by the peer), false", p.Err(), p.ClosedHere())
	}
	r := rec.One(t, "connection closed with requests pending")
	wantAttrs(t, r, map[string]any{"closed_here": false, "unanswered": "[tools/call#1]", "ws_code": 4001, "ws_reason": reason})
	p.Close()
}
