package wire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// barrierID is the id of the request the fuzz test sends after the input,
// to know the peer has read all of it.
const barrierID = `"fuzz-barrier-6b1f0c"`

// FuzzPeer feeds arbitrary bytes, line by line, into a Peer. It must never
// panic, must answer every request that reached its handler exactly once
// (and write nothing else), must not end the connection, and must still
// answer a real call afterwards. When the input is all noise, nothing
// reaches the handler and nothing is written but the real call.
func FuzzPeer(f *testing.F) {
	for _, seed := range []string{
		"",
		"\n\n",
		"null\n42\n\"just a string\"\n[1,2]\n{\"no\":\"jsonrpc\"}",
		"Starting server...\n{broken",
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":"1","method":"x","params":[1]}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}` + "\n" + `{"id":{},"method":"y"}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":null}`,
		`{"id":-1,"error":"words"}` + "\n" + `{"id":9223372036854775807,"result":1}`,
		`{"method":"","id":1}` + "\r\n" + `{"METHOD":"x","ID":1}`,
		"\xff\xfe{\"id\":1}\x00",
		`[{"jsonrpc":"2.0","id":1,"method":"batch"}]`,
		`{"jsonrpc":"2.0","id":1e400,"result":1}`,
		`{"jsonrpc":"2.0","id":2,"method":"panic"}` + "\n" + `{"jsonrpc":"2.0","id":3,"method":"defer"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		a, b := transport.Pipe(0)
		defer b.Close()
		var (
			mu       sync.Mutex
			requests int // requests of the input the handler saw
			notified int
		)
		barrier := make(chan struct{})
		h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
			if string(r.ID()) == barrierID {
				close(barrier)
				return "barrier", nil
			}
			mu.Lock()
			if r.IsNotification() {
				notified++
			} else {
				requests++
			}
			mu.Unlock()
			switch r.Method {
			case "panic":
				panic("fuzz")
			case "defer":
				reply := r.Defer()
				go func() { reply(nil, nil); reply(1, nil) }()
				return nil, nil
			}
			return nil, wire.ErrMethodNotFound
		})
		p := wire.NewPeer(a, wire.Options{Name: server, Handler: h, MaxQueued: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
		defer p.Close()
		lines := bytes.Split(input, []byte("\n"))
		allNoise := true
		for _, line := range lines {
			var v map[string]json.RawMessage
			if json.Unmarshal(line, &v) == nil && v != nil {
				allNoise = false // an object: it may be a message
			}
		}

		// The far end reads everything the peer writes.
		reads := make(chan []byte, 1024)
		go func() {
			defer close(reads)
			for {
				msg, err := b.Read()
				if err != nil {
					return
				}
				reads <- msg
			}
		}()
		for _, line := range lines {
			if err := b.Write(context.Background(), line); err != nil {
				t.Fatalf("write: %v", err)
			}
		}
		if err := b.Write(context.Background(), []byte(`{"jsonrpc":"2.0","id":`+barrierID+`,"method":"barrier"}`)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-barrier:
		case <-time.After(10 * time.Second):
			t.Fatal("the peer did not read past the input")
		}
		// Everything before the barrier has been dispatched, in order.
		mu.Lock()
		wantAnswers := requests
		if allNoise && requests+notified > 0 {
			t.Errorf("noise reached the handler as %d requests and %d notifications", requests, notified)
		}
		mu.Unlock()

		// A real call is answered.
		errc := make(chan error, 1)
		var res string
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errc <- p.Call(ctx, "after/fuzz", nil, &res)
		}()
		answers, sawBarrier, sawCall := 0, false, false
		for !sawBarrier || !sawCall || answers < wantAnswers+1 {
			var msg []byte
			select {
			case msg = <-reads:
			case <-time.After(10 * time.Second):
				t.Fatalf("waiting: %d of %d answers, barrier %v", answers, wantAnswers, sawBarrier)
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(msg, &m); err != nil {
				t.Fatalf("the peer wrote a line that is not JSON: %q", msg)
			}
			switch {
			case m.Method == "after/fuzz":
				if err := b.Write(context.Background(), []byte(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":"ok"}`)); err != nil {
					t.Fatal(err)
				}
				sawCall = true
				continue
			case string(m.ID) == barrierID:
				sawBarrier = true
			case bytes.Contains(m.Error, []byte(`-32600`)):
				// An invalid request (no valid method) is refused by
				// the reader, never handled: not one of the answers
				// counted.
				continue
			case m.Result == nil && m.Error == nil:
				t.Fatalf("the peer wrote neither a request of its own nor an answer: %s", msg)
			}
			answers++
		}
		if err := <-errc; err != nil || res != "ok" {
			t.Fatalf("a real call after the input: %q, %v", res, err)
		}
		if answers != wantAnswers+1 {
			t.Fatalf("%d answers for %d requests and the barrier", answers, wantAnswers)
		}
		select {
		case <-p.Done():
			t.Fatalf("the input ended the connection: %v", p.Err())
		default:
		}
		p.Close()
		for msg := range reads {
			// A -32600 refusal goes out through its own writer, so it
			// may come after the handler's answers.
			if !bytes.Contains(msg, []byte(`"code":-32600`)) {
				t.Errorf("an extra message after the barrier: %s", msg)
			}
		}
	})
}
