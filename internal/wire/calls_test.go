package wire_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// Texts the issue does not list, which the package gives for a call its
// caller abandoned and for an answer it could not read.
const (
	textCanceled  = `The request to the "discord" server was abandoned here before it answered, so whether it took effect is unknown: it was not cancelled on the server and may still complete there. Check its effect before trying again.`
	textBadAnswer = `The "discord" server answered in a form this host couldn't read, so whether the request took effect is unknown. Check its effect before trying again.`
)

// A late answer to an abandoned call is dropped with a debug line, a stray
// answer likewise, and neither disturbs the calls after it.
func TestLateAnswerDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, far, rec := pipePeer(t, wire.Options{})
		errc := make(chan error, 1)
		start := time.Now()
		go func() { errc <- p.Call(t.Context(), "slow/op", nil, nil, wire.WithTimeout(time.Second)) }()
		m := far.mustRead()
		err := <-errc
		if took := time.Since(start); took != time.Second {
			t.Errorf("abandoned after %v, want 1s", took)
		}
		checkText(t, callError(t, err, wire.NoResponse, wire.CauseDeadline), textDeadline1)

		far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"late":true}}`, m.ID)
		far.send(`{"jsonrpc":"2.0","id":999,"result":{}}`)
		far.send(`{"jsonrpc":"2.0","id":"not ours","error":{"code":-1,"message":"x"}}`)
		var res map[string]int
		go func() { errc <- p.Call(t.Context(), "next", nil, &res) }()
		if m := far.mustRead(); string(m.ID) != "2" || m.Method != "next" {
			t.Fatalf("far end read %s", m.raw)
		}
		far.send(`{"jsonrpc":"2.0","id":2,"result":{"n":2}}`)
		if err := <-errc; err != nil || res["n"] != 2 {
			t.Fatalf("the call after a late answer: %v, %v", res, err)
		}

		r := rec.One(t, "late answer to an abandoned request dropped")
		wantAttrs(t, r, map[string]any{"id": 1, "server": server})
		if r.Level != slog.LevelDebug {
			t.Errorf("late answer logged at %v", r.Level)
		}
		if n := len(rec.Find("answer to no request of ours dropped")); n != 2 {
			t.Errorf("%d stray answers logged, want 2", n)
		}
		if len(rec.Find("server answered with an error")) != 0 {
			t.Error("a stray error answer was taken for one of ours")
		}
	})
}

// Sub-second and fractional deadlines round up to whole seconds in the
// text; the log keeps the milliseconds. A connection default applies when
// the call sets none.
func TestDeadlineRounding(t *testing.T) {
	for _, tc := range []struct {
		name string
		def  time.Duration
		opts []wire.CallOption
		d    time.Duration
		text string
		ms   int64
	}{
		{"1500ms", 0, []wire.CallOption{wire.WithTimeout(1500 * time.Millisecond)}, 1500 * time.Millisecond, textDeadline2, 1500},
		{"200ms", 0, []wire.CallOption{wire.WithTimeout(200 * time.Millisecond)}, 200 * time.Millisecond, textDeadline1, 200},
		{"default 2500ms", 2500 * time.Millisecond, nil, 2500 * time.Millisecond, textDeadline3, 2500},
		{"override of default", time.Hour, []wire.CallOption{wire.WithTimeout(time.Second)}, time.Second, textDeadline1, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, far, rec := pipePeer(t, wire.Options{Timeout: tc.def})
				start := time.Now()
				errc := make(chan error, 1)
				go func() { errc <- p.Call(t.Context(), "tools/call", nil, nil, tc.opts...) }()
				far.mustRead()
				ce := callError(t, <-errc, wire.NoResponse, wire.CauseDeadline)
				if took := time.Since(start); took != tc.d || ce.Timeout != tc.d {
					t.Errorf("abandoned after %v with Timeout %v, want %v", took, ce.Timeout, tc.d)
				}
				checkText(t, ce, tc.text)
				wantAttrs(t, rec.One(t, "request deadline passed; abandoned here"),
					map[string]any{"method": "tools/call", "id": 1, "ms": tc.ms})
			})
		})
	}
}

// A call whose caller gives up is abandoned here, told apart from a
// deadline, and logged at info.
func TestCallCanceledByCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, far, rec := pipePeer(t, wire.Options{Timeout: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Call(ctx, "tools/call", nil, nil) }()
		far.mustRead()
		cancel()
		ce := callError(t, <-errc, wire.NoResponse, wire.CauseCanceled)
		checkText(t, ce, textCanceled)
		if !errors.Is(ce, context.Canceled) {
			t.Errorf("Err = %v", ce.Err)
		}
		r := rec.One(t, "request abandoned by its caller")
		wantAttrs(t, r, map[string]any{"method": "tools/call", "id": 1})
		if len(rec.Find("request deadline passed; abandoned here")) != 0 {
			t.Error("a cancellation was logged as a deadline")
		}
	})
}

// Error answers in the shapes real peers send: code and data are kept, and
// an "error": null beside a result is no error.
func TestAnswerShapes(t *testing.T) {
	cases := []struct {
		name   string
		answer string // with %s for the id
		check  func(t *testing.T, res json.RawMessage, err error)
	}{
		{"error with data", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32042,"message":"Rate limited.","data":{"retryAfter":5}}}`,
			func(t *testing.T, _ json.RawMessage, err error) {
				ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
				if ce.Code != -32042 || ce.Message != "Rate limited." || string(ce.Data) != `{"retryAfter":5}` {
					t.Errorf("kept %d %q %s", ce.Code, ce.Message, ce.Data)
				}
				checkText(t, ce, textErrorAnswerPrefix+"Rate limited.")
			}},
		{"string code", `{"jsonrpc":"2.0","id":%s,"error":{"code":"E_CHANNEL","message":"No such channel."}}`,
			func(t *testing.T, _ json.RawMessage, err error) {
				ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
				if got := ce.Error(); got != textErrorAnswerPrefix+"No such channel." {
					t.Errorf("text %q", got)
				}
			}},
		{"error as a string", `{"jsonrpc":"2.0","id":%s,"error":"Server exploded."}`,
			func(t *testing.T, _ json.RawMessage, err error) {
				ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
				if got := ce.Error(); got != textErrorAnswerPrefix+"Server exploded." {
					t.Errorf("text %q", got)
				}
			}},
		{"error without message", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000}}`,
			func(t *testing.T, _ json.RawMessage, err error) {
				checkText(t, callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer), textErrorNoWords)
			}},
		{"error null beside a result", `{"jsonrpc":"2.0","id":%s,"result":{"ok":true},"error":null}`,
			func(t *testing.T, res json.RawMessage, err error) {
				if err != nil || string(res) != `{"ok":true}` {
					t.Errorf("got %s, %v", res, err)
				}
			}},
		{"error null alone", `{"jsonrpc":"2.0","id":%s,"error":null}`,
			func(t *testing.T, res json.RawMessage, err error) {
				if err != nil || string(res) != `null` {
					t.Errorf("got %s, %v", res, err)
				}
			}},
		{"result null", `{"jsonrpc":"2.0","id":%s,"result":null}`,
			func(t *testing.T, res json.RawMessage, err error) {
				if err != nil || string(res) != `null` {
					t.Errorf("got %s, %v", res, err)
				}
			}},
		{"id echoed as a string", `{"jsonrpc":"2.0","id":"%s","result":[1,2]}`,
			func(t *testing.T, res json.RawMessage, err error) {
				if err != nil || string(res) != `[1,2]` {
					t.Errorf("got %s, %v", res, err)
				}
			}},
	}
	p, far, _ := pipePeer(t, wire.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var res json.RawMessage
			errc := make(chan error, 1)
			go func() { errc <- p.Call(testCtx(t), "x", nil, &res) }()
			m := far.mustRead()
			far.sendf(c.answer, m.ID)
			c.check(t, res, <-errc)
		})
	}
}

// An answer that can't be decoded into the caller's result is a bad
// response, whose effect is unknown.
func TestBadAnswer(t *testing.T) {
	p, far, rec := pipePeer(t, wire.Options{})
	var res struct{ N int }
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "tools/call", nil, &res) }()
	m := far.mustRead()
	far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"N":"not a number"}}`, m.ID)
	ce := callError(t, <-errc, wire.BadResponse, wire.CauseBadAnswer)
	checkText(t, ce, textBadAnswer)
	wantAttrs(t, rec.One(t, "server's answer could not be decoded"), map[string]any{"method": "tools/call", "id": 1})
}

// Params that can't be encoded fail the call before anything is written.
func TestUnencodableParams(t *testing.T) {
	p, far, _ := pipePeer(t, wire.Options{})
	err := p.Call(testCtx(t), "x", make(chan int), nil)
	var ce *wire.CallError
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	if err := p.Notify(testCtx(t), "n", func() {}); err == nil {
		t.Fatal("a notification with unencodable params was sent")
	}
	// Nothing was written: the next message the far end sees is this one.
	if err := p.Notify(testCtx(t), "n2", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if m := far.mustRead(); m.Method != "n2" || m.ID != nil || string(m.Params) != `{"a":1}` {
		t.Fatalf("far end read %s", m.raw)
	}
}

// Noise between real messages is skipped, logged at debug and boundedly,
// and never closes the connection.
func TestNoiseOverPipe(t *testing.T) {
	mux := wire.NewMux()
	mux.HandleFunc("ping", func(context.Context, *wire.Request) (any, error) { return "pong", nil })
	p, far, rec := pipePeer(t, wire.Options{Handler: mux})
	noise := []string{
		"Starting server v1.2 on stdio...", "null", "42", `"just a string"`, "[1,2]", `{"no":"jsonrpc"}`,
		"", "   ", "{not json", `{"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","id":5}`, "\x00\x01\x02", "true",
		strings.Repeat("x", 500),
	}
	for len(noise) < 30 {
		noise = append(noise, "noise")
	}
	errc := make(chan error, 1)
	var res string
	go func() { errc <- p.Call(testCtx(t), "work", nil, &res) }()
	m := far.mustRead()
	for i, line := range noise {
		far.send(line)
		if i == 10 {
			far.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		}
	}
	far.sendf(`{"jsonrpc":"2.0","id":%s,"result":"done"}`, m.ID)
	if err := <-errc; err != nil || res != "done" {
		t.Fatalf("call among noise: %q, %v", res, err)
	}
	if m := far.mustRead(); string(m.ID) != "1" || string(m.Result) != `"pong"` {
		t.Fatalf("request among noise answered %s", m.raw)
	}

	skipped := rec.Find("skipped a line that is not a JSON-RPC message")
	if len(skipped) != 20 {
		t.Errorf("%d noise lines logged one by one, want the first 20", len(skipped))
	}
	for _, r := range skipped {
		if r.Level != slog.LevelDebug || len(r.Attrs["line"].String()) > 120+len("…") {
			t.Errorf("noise logged at %v, %d bytes", r.Level, len(r.Attrs["line"].String()))
		}
	}
	rec.One(t, "skipping further lines that are not JSON-RPC messages without logging each")
	if w := rec.AtLeast(slog.LevelInfo); len(w) != 0 {
		t.Errorf("noise logged above debug:\n%s", rec.Dump())
	}
	select {
	case <-p.Done():
		t.Fatal("noise closed the connection")
	default:
	}
	// The count is logged when the connection ends.
	far.s.Close()
	waitDone(t, p)
	wantAttrs(t, rec.One(t, "lines skipped as not JSON-RPC messages"), map[string]any{"count": 30})
}

// A message over the size limit closes the connection: the log says so,
// and the pending call reads as a connection that closed, since this host
// did not choose to close it.
func TestOversizeOverPipe(t *testing.T) {
	a, b := transport.Pipe(64)
	p, rec := newPeer(t, a, wire.Options{Reconnecting: func() bool { return true }})
	far := &farEnd{t: t, s: b}
	t.Cleanup(func() { b.Close() })
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "tools/call", nil, nil) }()
	far.mustRead()
	far.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"pad":"` + strings.Repeat("x", 100) + `"}}`)
	ce := callError(t, <-errc, wire.NoResponse, wire.CauseClosed)
	checkText(t, ce, textClosedReconnecting)
	waitDone(t, p)
	var tl *transport.TooLargeError
	if !errors.As(p.Err(), &tl) || !p.ClosedByHost() {
		t.Errorf("Err = %v, ClosedByHost = %v", p.Err(), p.ClosedByHost())
	}
	r := rec.One(t, "message over the size limit; closing the connection")
	if r.Level != slog.LevelError {
		t.Errorf("logged at %v", r.Level)
	}
	wantAttrs(t, r, map[string]any{"limit_bytes": 64, "server": server})
	if r.Attrs["seen_bytes"].Int64() <= 64 {
		t.Errorf("seen_bytes %v", r.Attrs["seen_bytes"])
	}
	wantAttrs(t, rec.One(t, "connection closed with requests pending"),
		map[string]any{"closed_by_host": true, "unanswered": "[tools/call#1]"})
	err := p.Call(testCtx(t), "tools/call", nil, nil)
	checkText(t, callError(t, err, wire.NotSent, wire.CauseClosed), textNotSentReconnect)
}

// breakingStream breaks off a write of a message containing "break", as a
// transport whose write stopped part way does: it closes itself.
type breakingStream struct{ transport.Stream }

func (s *breakingStream) Write(ctx context.Context, msg []byte) error {
	if strings.Contains(string(msg), `"break"`) {
		s.Stream.Close()
		return errors.Join(transport.ErrPartialWrite, io.ErrShortWrite)
	}
	return s.Stream.Write(ctx, msg)
}

// A write that broke off part way may have reached the server: its outcome
// is unknown, and the connection is closed.
func TestPartialWrite(t *testing.T) {
	a, b := transport.Pipe(0)
	t.Cleanup(func() { b.Close() })
	p, rec := newPeer(t, &breakingStream{a}, wire.Options{})
	err := p.Call(testCtx(t), "break", nil, nil)
	ce := callError(t, err, wire.NoResponse, wire.CauseClosed)
	checkText(t, ce, textClosedNoReconnect)
	if !errors.Is(err, transport.ErrPartialWrite) {
		t.Errorf("Err = %v", ce.Err)
	}
	wantAttrs(t, rec.One(t, "request written in part; the connection is closed"), map[string]any{"method": "break", "id": 1})
	waitDone(t, p)
	if !p.ClosedByHost() {
		t.Error("ClosedByHost is false after a broken write")
	}
	err = p.Call(testCtx(t), "next", nil, nil)
	checkText(t, callError(t, err, wire.NotSent, wire.CauseClosed), textNotSentNoReconnect)
}

// Close while many calls are in flight: each fails with a host-close text,
// none hangs, and Close is safe to repeat.
func TestCloseWithManyCallsInFlight(t *testing.T) {
	p, far, _ := pipePeer(t, wire.Options{})
	go func() {
		for {
			if _, err := far.read(); err != nil {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() { errs <- p.Call(testCtx(t), "x", nil, nil) })
	}
	p.Close()
	p.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		ce, ok := err.(*wire.CallError)
		if !ok || ce.Cause != wire.CauseHostClosed {
			t.Fatalf("got %v", err)
		}
		switch ce.Outcome {
		case wire.NoResponse:
			checkText(t, ce, textHostClosedPending)
		case wire.NotSent:
			checkText(t, ce, textNotSentHostClosed)
		default:
			t.Fatalf("outcome %v", ce.Outcome)
		}
	}
}

// NotSentError gives a layer between connections the same words.
func TestNotSentError(t *testing.T) {
	checkText(t, wire.NotSentError(server, true), textNotSentReconnect)
	checkText(t, wire.NotSentError(server, false), textNotSentNoReconnect)
	if ce := wire.NotSentError(server, false); ce.Outcome != wire.NotSent || ce.Cause != wire.CauseClosed {
		t.Errorf("got %+v", ce)
	}
}
