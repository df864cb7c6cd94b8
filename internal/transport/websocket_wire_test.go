package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// recvWithin receives from ch, failing the test if nothing comes within d or
// ch is closed.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the channel closed first", what)
		}
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing within %s", what, d)
	}
	var zero T
	return zero
}

// rpcFrame is a JSON-RPC message as the test server decodes it.
type rpcFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// Over a real WebSocket, a peer that pretty-prints its messages is
// understood: its request spread over lines reaches the handler and is
// answered, and its answer spread over lines ends the call it answers.
func TestWebSocketPrettyPrintedMessagesEndToEnd(t *testing.T) {
	t.Parallel()
	const prettyRequest = "{\n" +
		"  \"jsonrpc\": \"2.0\",\n" +
		"  \"id\": 7,\n" +
		"  \"method\": \"ping\",\n" +
		"  \"params\": {\n" +
		"    \"n\": 1\n" +
		"  }\n" +
		"}\n"
	// The response uses CRLF line ends and echoes the call's id, whatever
	// it is.
	const prettyResponse = "{\r\n" +
		"  \"jsonrpc\": \"2.0\",\r\n" +
		"  \"id\": %s,\r\n" +
		"  \"result\": {\r\n" +
		"    \"echoed\": \"hi\",\r\n" +
		"    \"lines\": [\r\n" +
		"      1,\r\n" +
		"      2\r\n" +
		"    ]\r\n" +
		"  }\r\n" +
		"}\r\n"

	// The server sends each frame it reads; the channel closes when the
	// handler stops.
	frames := make(chan []byte, 2)
	url := wsServer(t, func(c *websocket.Conn, _ *http.Request) {
		defer close(frames)
		ctx := context.Background()
		if err := c.Write(ctx, websocket.MessageText, []byte(prettyRequest)); err != nil {
			return
		}
		_, answer, err := c.Read(ctx) // the answer to id 7
		if err != nil {
			return
		}
		frames <- answer
		_, call, err := c.Read(ctx) // the peer's call
		if err != nil {
			return
		}
		frames <- call
		var req rpcFrame
		if json.Unmarshal(call, &req) != nil || req.ID == nil {
			return // the test fails on the frame it got
		}
		if err := c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, prettyResponse, req.ID)); err != nil {
			return
		}
		drainConn(c)
	})

	methods := make(chan string, 1)
	ws := dial(t, url, transport.WebSocketOptions{PingInterval: -1})
	p := wire.NewPeer(ws, wire.Options{
		Logger: discardLogger,
		Handler: wire.HandlerFunc(func(_ context.Context, req *wire.Request) (any, error) {
			methods <- req.Method
			return map[string]string{"pong": "yes"}, nil
		}),
	})
	t.Cleanup(func() { p.Close() })

	// The pretty-printed request reaches the handler, once.
	if m := recvWithin(t, methods, testTimeout, "the handler"); m != "ping" {
		t.Errorf("the handler got method %q, want \"ping\"", m)
	}
	// And its answer goes back with its id.
	answerFrame := recvWithin(t, frames, testTimeout, "the answer to id 7")
	var answer rpcFrame
	if err := json.Unmarshal(answerFrame, &answer); err != nil {
		t.Fatalf("the answer %q is not JSON: %v", answerFrame, err)
	}
	if string(answer.ID) != "7" || answer.JSONRPC != "2.0" || answer.Error != nil {
		t.Errorf("the answer %s: want jsonrpc 2.0, id 7 and no error", answerFrame)
	}
	var pong map[string]string
	if err := json.Unmarshal(answer.Result, &pong); err != nil || pong["pong"] != "yes" {
		t.Errorf("the answer's result %s, want {\"pong\":\"yes\"}", answer.Result)
	}

	// A call the server answers pretty-printed returns that result.
	type echoResult struct {
		Echoed string `json:"echoed"`
		Lines  []int  `json:"lines"`
	}
	var res echoResult
	callErr := make(chan error, 1)
	ctx := testCtx(t, testTimeout)
	go func() {
		callErr <- p.Call(ctx, "echo", map[string]string{"text": "hi"}, &res)
	}()
	callFrame := recvWithin(t, frames, testTimeout, "the peer's call")
	var call rpcFrame
	if err := json.Unmarshal(callFrame, &call); err != nil {
		t.Fatalf("the call %q is not JSON: %v", callFrame, err)
	}
	var params map[string]string
	if call.Method != "echo" || call.ID == nil || json.Unmarshal(call.Params, &params) != nil || params["text"] != "hi" {
		t.Errorf("the call %s: want method echo, an id and params {\"text\":\"hi\"}", callFrame)
	}
	if err := recvWithin(t, callErr, testTimeout, "Call"); err != nil {
		t.Fatalf("Call answered pretty-printed = %v", err)
	}
	if diff := cmp.Diff(echoResult{Echoed: "hi", Lines: []int{1, 2}}, res); diff != "" {
		t.Errorf("Call's result (-want +got):\n%s", diff)
	}
}
