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

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// The texts for a call its caller abandoned and for an answer that could
// not be decoded into the caller's result (encoding/json's words).
const (
	textCanceled  = `tools/call to "discord": abandoned by its caller before an answer`
	textBadAnswer = `tools/call to "discord": the answer could not be read: json: cannot unmarshal string into Go struct field .N of type int`
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
		ce := callError(t, err, wire.NoResponse, wire.CauseDeadline)
		checkText(t, ce, `slow/op to "discord": no answer within 1s`)
		if ce.Timeout != time.Second || ce.ID != 1 || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("CallError fields: %+v", ce)
		}

		far.mustCancelled(m.ID, reasonWithin1s)
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
		// Stray answers are logged once, then counted (lograte).
		if n := len(rec.Find("answer to no request of ours dropped")); n != 1 {
			t.Errorf("%d stray answers logged, want 1", n)
		}
		if len(rec.Find("answered with an error")) != 0 {
			t.Error("a stray error answer was taken for one of ours")
		}
	})
}

// A deadline is shown as it was set: whole seconds as "60s", anything else
// as a time.Duration prints ("1.5s", "200ms"), never rounded; the log keeps
// the milliseconds. A connection default applies when the call sets none.
func TestDeadlineShownAsSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		def  time.Duration
		opts []wire.CallOption
		d    time.Duration
		text string
		ms   int64
	}{
		{"1500ms", 0, []wire.CallOption{wire.WithTimeout(1500 * time.Millisecond)}, 1500 * time.Millisecond, `tools/call to "discord": no answer within 1.5s`, 1500},
		{"200ms", 0, []wire.CallOption{wire.WithTimeout(200 * time.Millisecond)}, 200 * time.Millisecond, `tools/call to "discord": no answer within 200ms`, 200},
		{"default 2500ms", 2500 * time.Millisecond, nil, 2500 * time.Millisecond, `tools/call to "discord": no answer within 2.5s`, 2500},
		{"override of default", time.Hour, []wire.CallOption{wire.WithTimeout(time.Second)}, time.Second, textDeadline1, 1000},
		{"90s", 0, []wire.CallOption{wire.WithTimeout(90 * time.Second)}, 90 * time.Second, `tools/call to "discord": no answer within 90s`, 90000},
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
		if !errors.Is(ce, context.Canceled) || ce.Timeout != 0 || ce.ID != 1 {
			t.Errorf("CallError fields: %+v (Err %v)", ce, ce.Err)
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
				if a := ce.Answer; a == nil || a.Code != -32042 || a.Message != "Rate limited." || string(a.Data) != `{"retryAfter":5}` {
					t.Errorf("kept %+v", a)
				}
				var pe *jsonrpc.Error
				if !errors.As(err, &pe) || pe.Code != -32042 || pe.Message != "Rate limited." || string(pe.Data) != `{"retryAfter":5}` {
					t.Errorf("errors.As reached %+v", pe)
				}
				checkText(t, ce, `x to "discord": error -32042: Rate limited.`)
				if strings.Contains(ce.Error(), "retryAfter") {
					t.Errorf("the answer's data reached the text: %s", ce.Error())
				}
			}},
		{"string code", `{"jsonrpc":"2.0","id":%s,"error":{"code":"E_CHANNEL","message":"No such channel."}}`,
			func(t *testing.T, _ json.RawMessage, err error) {
				ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
				checkText(t, ce, `x to "discord": error 0: No such channel.`)
				if ce.Answer.Code != 0 || ce.Answer.Message != "No such channel." {
					t.Errorf("kept %+v", ce.Answer)
				}
			}},
		{"error as a string", `{"jsonrpc":"2.0","id":%s,"error":"Server exploded."}`,
			func(t *testing.T, _ json.RawMessage, err error) {
				ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
				checkText(t, ce, `x to "discord": error -32603: Server exploded.`)
				if ce.Answer.Code != jsonrpc.CodeInternalError || ce.Answer.Message != "Server exploded." {
					t.Errorf("kept %+v", ce.Answer)
				}
			}},
		{"error without message", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000}}`,
			func(t *testing.T, _ json.RawMessage, err error) {
				ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
				checkText(t, ce, `x to "discord": error -32000`)
				if ce.Answer.Code != -32000 || ce.Answer.Message != "" || ce.Answer.Data != nil {
					t.Errorf("kept %+v", ce.Answer)
				}
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
	err := <-errc
	ce := callError(t, err, wire.BadResponse, wire.CauseBadAnswer)
	checkText(t, ce, textBadAnswer)
	var jerr *json.UnmarshalTypeError
	if !errors.As(err, &jerr) || ce.ID != 1 || ce.Answer != nil {
		t.Errorf("CallError fields: %+v (Err %v)", ce, ce.Err)
	}
	wantAttrs(t, rec.One(t, "the answer could not be decoded"),
		map[string]any{"method": "tools/call", "id": 1, "error": "json: cannot unmarshal string into Go struct field .N of type int"})
}

// Params that can't be encoded fail the call before anything is written.
func TestUnencodableParams(t *testing.T) {
	p, far, _ := pipePeer(t, wire.Options{})
	err := p.Call(testCtx(t), "x", make(chan int), nil)
	ce := callError(t, err, wire.NotSent, wire.CauseEncodeFailed)
	checkText(t, ce, `x to "discord" not sent: its params could not be encoded: json: unsupported type: chan int`)
	err = p.Notify(testCtx(t), "n", func() {})
	callError(t, err, wire.NotSent, wire.CauseEncodeFailed)
	// Nothing was written: the next message the far end sees is this one.
	if err := p.Notify(testCtx(t), "n2", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if m := far.mustRead(); m.Method != "n2" || m.ID != nil || string(m.Params) != `{"a":1}` {
		t.Fatalf("far end read %s", m.raw)
	}
}

// Noise between real messages is skipped and never closes the connection:
// the first line is logged at warn with its size and an escaped preview,
// the next 19 at debug, then only counted; the total (lines and bytes) is
// logged at info when the connection ends.
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
	for i, r := range skipped {
		want := slog.LevelDebug
		if i == 0 {
			want = slog.LevelWarn
		}
		if r.Level != want || len(r.Attrs["line"].String()) > 80+len("…") || r.Attrs["bytes"].Int64() != int64(len(noise[i])) {
			t.Errorf("noise line %d logged at %v (want %v), %d bytes of preview, bytes=%v", i, r.Level, want, len(r.Attrs["line"].String()), r.Attrs["bytes"])
		}
	}
	if got := skipped[11].Attrs["line"].String(); got != `\x00\x01\x02` {
		t.Errorf("the control characters' line logged as %q, want them escaped", got)
	}
	rec.One(t, "skipping further lines that are not JSON-RPC messages without logging each")
	if w := rec.AtLeast(slog.LevelInfo); len(w) != 1 || w[0].Level != slog.LevelWarn {
		t.Errorf("noise logged at info or above other than the one warning:\n%s", rec.Dump())
	}
	select {
	case <-p.Done():
		t.Fatal("noise closed the connection")
	default:
	}
	// The count is logged when the connection ends.
	far.s.Close()
	waitDone(t, p)
	bytes := 0
	for _, l := range noise {
		bytes += len(l)
	}
	sum := rec.One(t, "lines skipped as not JSON-RPC messages")
	wantAttrs(t, sum, map[string]any{"count": 30, "bytes": bytes})
	if sum.Level != slog.LevelInfo {
		t.Errorf("the count logged at %v, want info", sum.Level)
	}
}

// A message over the size limit closes the connection: the log says so,
// and the pending call reads as a connection this side closed because of
// it (CauseTooLarge), not as its own Close, so whether it reconnects is
// recorded.
func TestOversizeOverPipe(t *testing.T) {
	a, b := transport.Pipe(64)
	p, rec := newPeer(t, a, wire.Options{Reconnecting: func() bool { return true }})
	far := &farEnd{t: t, s: b}
	t.Cleanup(func() { b.Close() })
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "tools/call", nil, nil) }()
	far.mustRead()
	far.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"pad":"` + strings.Repeat("x", 100) + `"}}`)
	ce := callError(t, <-errc, wire.NoResponse, wire.CauseTooLarge)
	checkText(t, ce, textTooLargePending)
	if tl := (*transport.TooLargeError)(nil); !errors.As(ce, &tl) || tl.Limit != 64 {
		t.Errorf("the pending call's error does not carry the TooLargeError: %v", ce.Err)
	}
	if !ce.Reconnecting || !errors.Is(ce, wire.ErrConnClosed) {
		t.Error("the pending call does not record the reconnect")
	}
	waitDone(t, p)
	var tl *transport.TooLargeError
	if !errors.As(p.Err(), &tl) || !p.ClosedHere() {
		t.Errorf("Err = %v, ClosedHere = %v", p.Err(), p.ClosedHere())
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
		map[string]any{"closed_here": true, "unanswered": "[tools/call#1]"})
	err := p.Call(testCtx(t), "tools/call", nil, nil)
	ce = callError(t, err, wire.NotSent, wire.CauseTooLarge)
	checkText(t, ce, textNotSentTooLarge)
	if !ce.Reconnecting {
		t.Error("the call after the close does not record the reconnect")
	}
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
	checkText(t, ce, `break to "discord": the connection closed before an answer`)
	if !errors.Is(err, transport.ErrPartialWrite) || ce.Reconnecting {
		t.Errorf("CallError fields: %+v (Err %v)", ce, ce.Err)
	}
	wantAttrs(t, rec.One(t, "request written in part; the connection is closed"), map[string]any{"method": "break", "id": 1})
	waitDone(t, p)
	if !p.ClosedHere() {
		t.Error("ClosedHere is false after a broken write")
	}
	err = p.Call(testCtx(t), "next", nil, nil)
	checkText(t, callError(t, err, wire.NotSent, wire.CauseClosed), `next to "discord" not sent: the connection is closed`)
}

// Close while many calls are in flight: each fails as closed on this side,
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
		if !ok || ce.Cause != wire.CauseClosedHere {
			t.Fatalf("got %v", err)
		}
		switch ce.Outcome {
		case wire.NoResponse:
			checkText(t, callError(t, err, wire.NoResponse, wire.CauseClosedHere),
				`x to "discord": the connection was closed on this side before an answer`)
		case wire.NotSent:
			checkText(t, callError(t, err, wire.NotSent, wire.CauseClosedHere),
				`x to "discord" not sent: the connection was closed on this side`)
		default:
			t.Fatalf("outcome %v", ce.Outcome)
		}
	}
}

// NotSentError gives a layer between connections the same error a closed
// connection does: not sent, the connection closed, the method named, no id,
// and whether this side is reconnecting recorded but not worded.
func TestNotSentError(t *testing.T) {
	for _, recon := range []bool{true, false} {
		err := error(wire.NotSentError(server, "tools/call", recon))
		ce := callError(t, err, wire.NotSent, wire.CauseClosed)
		checkText(t, ce, textNotSentClosed)
		if ce.Reconnecting != recon || ce.Server != server || ce.Method != "tools/call" || ce.ID != 0 || ce.Err != nil || ce.Answer != nil {
			t.Errorf("NotSentError(%q, %q, %v) = %+v", server, "tools/call", recon, ce)
		}
	}
	checkText(t, wire.NotSentError("", "tools/list", false), `tools/list not sent: the connection is closed`)
	checkText(t, wire.NotSentError(server, "", false), `request to "discord" not sent: the connection is closed`)
}

// A peer with no name is named in no text: the subject is the method alone,
// and the log carries no server attribute.
func TestNamelessPeer(t *testing.T) {
	a, b := transport.Pipe(0)
	t.Cleanup(func() { b.Close() })
	rec := newRecorder()
	p := wire.NewPeer(a, wire.Options{Logger: rec.Logger()})
	t.Cleanup(func() { p.Close() })
	far := &farEnd{t: t, s: b}
	if p.Name() != "" {
		t.Fatalf("Name() = %q", p.Name())
	}

	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "tools/call", nil, nil) }()
	m := far.mustRead()
	far.sendf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"Unknown tool: \"x\"\nTry tools/list."}}`, m.ID)
	ce := callError(t, <-errc, wire.ErrorResponse, wire.CauseErrorAnswer)
	checkText(t, ce, `tools/call: error -32602: Unknown tool: "x" Try tools/list.`)
	if ce.Server != "" || ce.ID != 1 {
		t.Errorf("CallError fields: %+v", ce)
	}
	noAttrs(t, rec.One(t, "answered with an error"), "server")

	p.Close()
	checkText(t, callError(t, p.Call(testCtx(t), "ping", nil, nil), wire.NotSent, wire.CauseClosedHere),
		`ping not sent: the connection was closed on this side`)
	checkText(t, callError(t, p.Notify(testCtx(t), "notifications/cancelled", nil), wire.NotSent, wire.CauseClosedHere),
		`notifications/cancelled not sent: the connection was closed on this side`)
}

// reportingStream is a stream whose owner reports noise itself.
type reportingStream struct{ transport.Stream }

func (reportingStream) ReportsNoise() bool { return true }

// On a stream whose owner reports noise itself (wire.NoiseReporter, as
// mcplhost probe's is), nothing of it is logged above debug, the total
// included.
func TestNoiseReportedByOwner(t *testing.T) {
	a, b := transport.Pipe(0)
	t.Cleanup(func() { b.Close() })
	p, rec := newPeer(t, reportingStream{a}, wire.Options{})
	far := &farEnd{t: t, s: b}
	far.send("banner")
	far.send("more")
	far.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	far.mustRead() // the ping's refusal: both lines were read before it
	far.s.Close()
	waitDone(t, p)
	if got := rec.Find("skipped a line that is not a JSON-RPC message"); len(got) != 2 {
		t.Errorf("%d noise lines logged, want 2", len(got))
	}
	if w := rec.AtLeast(slog.LevelInfo); len(w) != 0 {
		t.Errorf("noise the owner reports logged at info or above:\n%s", rec.Dump())
	}
	wantAttrs(t, rec.One(t, "lines skipped as not JSON-RPC messages"), map[string]any{"count": 2, "bytes": 10})
}
