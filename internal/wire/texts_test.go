package wire_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// The operator texts, verbatim, for a tools/call to the peer "discord".
// They are written out whole here, not built from the package's format
// strings, so a change to a word fails a test. Whether this side is
// reconnecting changes no word: that is the host's to say.
const (
	textClosedPending     = `tools/call to "discord": the connection closed before an answer`
	textClosedHerePending = `tools/call to "discord": the connection was closed on this side before an answer`
	textNotSentClosed     = `tools/call to "discord" not sent: the connection is closed`
	textNotSentClosedHere = `tools/call to "discord" not sent: the connection was closed on this side`
	textNotWritten        = `tools/call to "discord" not sent: the write failed: write |1: no buffer space available`
	textDeadline1         = `tools/call to "discord": no answer within 1s`
	textDeadline3         = `tools/call to "discord": no answer within 3s`
	textTooLargePending   = `tools/call to "discord": no answer: this side closed the connection because the peer sent a message over the size limit`
	textNotSentTooLarge   = `tools/call to "discord" not sent: this side closed the connection because the peer sent a message over the size limit`
	textStalledPending    = `tools/call to "discord": no answer: this side closed the connection because the peer took none of a message within 2s`
	textNotSentStalled    = `tools/call to "discord" not sent: this side closed the connection because the peer took none of a message within 2s`

	// The same for a notification (which has no id).
	textNotifyNotSentClosed     = `notifications/progress to "discord" not sent: the connection is closed`
	textNotifyNotSentClosedHere = `notifications/progress to "discord" not sent: the connection was closed on this side`
	textNotifyNotWritten        = `notifications/progress to "discord" not sent: the write failed: write |1: no buffer space available`
)

// checkText asserts the error's text is want, and that it is clean.
func checkText(t *testing.T, ce *wire.CallError, want string) {
	t.Helper()
	if got := ce.Error(); got != want {
		t.Errorf("text:\n got: %q\nwant: %q", got, want)
	}
	assertOperatorText(t, ce.Error(), ce)
}

// A server that exits with a call pending: the call's outcome is unknown,
// the error records whether this side reconnects (the text does not say),
// the log names the exit and the unanswered request, and a call and a
// notification afterwards were not sent.
func TestServerDropsWithCallPending(t *testing.T) {
	for _, tc := range []struct {
		name             string
		reconnecting     bool
		args             map[string]any
		exitCode, signal string
	}{
		{"reconnecting", true, map[string]any{"code": 3}, "3", ""},
		{"no reconnect", false, map[string]any{"code": 3}, "3", ""},
		{"killed", false, map[string]any{"signal": "KILL"}, "-1", "SIGKILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			asked := 0
			p, rec := spawnServer(t, wire.Options{Reconnecting: func() bool { asked++; return tc.reconnecting }}, transport.StdioOptions{})
			initialize(t, p)
			echo(t, p, "before the drop")

			_, err := callTool(testCtx(t), p, "exit", tc.args)
			ce := callError(t, err, wire.NoResponse, wire.CauseClosed)
			checkText(t, ce, textClosedPending)
			if ce.Reconnecting != tc.reconnecting || ce.Server != server || ce.Method != "tools/call" || ce.ID != 3 {
				t.Errorf("CallError fields: %+v", ce)
			}
			if ce.Answer != nil || ce.Timeout != 0 {
				t.Errorf("a close filled in an answer or a deadline: %+v", ce)
			}
			if asked == 0 {
				t.Error("Options.Reconnecting was not asked")
			}

			waitDone(t, p)
			if !errors.Is(p.Err(), io.EOF) || p.ClosedHere() {
				t.Errorf("Err = %v, ClosedHere = %v; want EOF, false", p.Err(), p.ClosedHere())
			}
			r := rec.One(t, "connection closed with requests pending")
			wantAttrs(t, r, map[string]any{
				"server": server, "closed_here": false, "unanswered": "[tools/call#3]", "exit_code": tc.exitCode,
			})
			if tc.signal != "" {
				wantAttrs(t, r, map[string]any{"signal": tc.signal})
			} else {
				noAttrs(t, r, "signal")
			}
			if len(rec.Find("this side closed the connection with requests pending")) != 0 {
				t.Error("a server's drop was logged as this side's close")
			}

			_, err = callTool(testCtx(t), p, "echo", map[string]string{"text": "after"})
			ce = callError(t, err, wire.NotSent, wire.CauseClosed)
			checkText(t, ce, textNotSentClosed)
			if ce.Reconnecting != tc.reconnecting || ce.Method != "tools/call" || ce.ID != 4 {
				t.Errorf("CallError fields after the drop: %+v", ce)
			}
			err = p.Notify(testCtx(t), "notifications/progress", nil)
			ce = callError(t, err, wire.NotSent, wire.CauseClosed)
			checkText(t, ce, textNotifyNotSentClosed)
			if ce.Reconnecting != tc.reconnecting || ce.Method != "notifications/progress" || ce.ID != 0 {
				t.Errorf("notification's CallError fields after the drop: %+v", ce)
			}
		})
	}
}

// This side closes the connection with a call pending: the call's outcome
// is unknown, the log says this side closed it, and a call afterwards says
// this side closed it, whether or not it is reconnecting.
func TestClosedHereWithCallPending(t *testing.T) {
	proc := spawnProc(t, transport.StdioOptions{})
	s, hangWritten := writtenWhen(proc, `"hang"`)
	p, rec := newPeer(t, s, wire.Options{Reconnecting: func() bool { return true }})
	initialize(t, p)

	errc := make(chan error, 1)
	go func() {
		_, err := callTool(testCtx(t), p, "hang", nil)
		errc <- err
	}()
	<-hangWritten
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	ce := callError(t, <-errc, wire.NoResponse, wire.CauseClosedHere)
	checkText(t, ce, textClosedHerePending)
	if ce.Reconnecting || ce.Server != server || ce.Method != "tools/call" || ce.ID != 2 {
		t.Errorf("CallError fields: %+v", ce)
	}
	select {
	case <-proc.Exited():
	default:
		t.Error("Close returned before the server process exited")
	}
	if !errors.Is(p.Err(), wire.ErrClosedHere) || !p.ClosedHere() {
		t.Errorf("Err = %v, ClosedHere = %v", p.Err(), p.ClosedHere())
	}
	if got := p.Err().Error(); got != "wire: connection closed on this side" {
		t.Errorf("Err().Error() = %q", got)
	}
	r := rec.One(t, "this side closed the connection with requests pending")
	wantAttrs(t, r, map[string]any{"server": server, "closed_here": true, "unanswered": "[tools/call#2]"})
	if len(rec.Find("connection closed with requests pending")) != 0 {
		t.Error("this side's close was logged as the server's")
	}

	_, err := callTool(testCtx(t), p, "echo", map[string]string{"text": "after"})
	ce = callError(t, err, wire.NotSent, wire.CauseClosedHere)
	checkText(t, ce, textNotSentClosedHere)
	if ce.Reconnecting {
		t.Error("a call after this side's own close records a reconnect")
	}
	err = p.Notify(testCtx(t), "notifications/progress", nil)
	checkText(t, callError(t, err, wire.NotSent, wire.CauseClosedHere), textNotifyNotSentClosedHere)
}

// After the server drops, this side's own Close (as a restart or a removal
// makes) is what a later call reads: closed on this side.
func TestCallAfterDropThenClosedHere(t *testing.T) {
	p, rec := spawnServer(t, wire.Options{Reconnecting: func() bool { return false }}, transport.StdioOptions{})
	initialize(t, p)
	if err := p.Notify(testCtx(t), "tools/call", map[string]any{"name": "exit", "arguments": map[string]int{"code": 0}}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	_, err := callTool(testCtx(t), p, "echo", map[string]string{"text": "x"})
	checkText(t, callError(t, err, wire.NotSent, wire.CauseClosed), textNotSentClosed)

	p.Close()
	_, err = callTool(testCtx(t), p, "echo", map[string]string{"text": "x"})
	checkText(t, callError(t, err, wire.NotSent, wire.CauseClosedHere), textNotSentClosedHere)
	if !errors.Is(p.Err(), io.EOF) {
		t.Errorf("Err = %v after the drop and a later Close, want the drop's EOF", p.Err())
	}
	// Nothing was pending at either close: neither logs.
	if w := rec.AtLeast(slog.LevelWarn); len(w) != 0 {
		t.Errorf("a close with nothing pending logged:\n%s", rec.Dump())
	}
}

// A close with nothing pending logs nothing new, whoever closes.
func TestCloseWithNothingPendingLogsNothing(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		p, rec := spawnServer(t, wire.Options{}, transport.StdioOptions{})
		initialize(t, p)
		echo(t, p, "x")
		// The exit tool called as a notification leaves no call pending.
		if err := p.Notify(testCtx(t), "tools/call", map[string]any{"name": "exit", "arguments": map[string]int{"code": 1}}); err != nil {
			t.Fatal(err)
		}
		waitDone(t, p)
		if w := rec.AtLeast(slog.LevelInfo); len(w) != 0 {
			t.Errorf("a server's close with nothing pending logged:\n%s", rec.Dump())
		}
	})
	t.Run("host", func(t *testing.T) {
		t.Parallel()
		p, rec := spawnServer(t, wire.Options{}, transport.StdioOptions{})
		initialize(t, p)
		echo(t, p, "x")
		p.Close()
		if w := rec.AtLeast(slog.LevelInfo); len(w) != 0 {
			t.Errorf("this side's close with nothing pending logged:\n%s", rec.Dump())
		}
	})
}

// A write the transport refuses: the request was not sent, the text and the
// log have the transport's words, and the connection lives on.
func TestWriteRefused(t *testing.T) {
	a, b := transport.Pipe(0)
	rs := &refusingStream{Stream: a}
	p, rec := newPeer(t, rs, wire.Options{})
	far := &farEnd{t: t, s: b}
	t.Cleanup(func() { b.Close() })

	rs.refuse.Store(true)
	_, err := callTool(testCtx(t), p, "echo", map[string]string{"text": "x"})
	ce := callError(t, err, wire.NotSent, wire.CauseWriteFailed)
	checkText(t, ce, textNotWritten)
	if !errors.Is(err, errRefused) || ce.ID != 1 || ce.Method != "tools/call" || ce.Reconnecting {
		t.Errorf("CallError fields: %+v", ce)
	}
	r := rec.One(t, "request not written: the transport refused it")
	wantAttrs(t, r, map[string]any{"server": server, "method": "tools/call", "id": 1, "error": errRefused.Error()})
	err = p.Notify(testCtx(t), "notifications/progress", nil)
	ce = callError(t, err, wire.NotSent, wire.CauseWriteFailed)
	checkText(t, ce, textNotifyNotWritten)
	if !errors.Is(err, errRefused) || ce.ID != 0 {
		t.Errorf("notification's CallError fields: %+v", ce)
	}
	wantAttrs(t, rec.One(t, "notification not written: the transport refused it"),
		map[string]any{"server": server, "method": "notifications/progress", "error": errRefused.Error()})

	// The connection is still open: the next call goes through.
	rs.refuse.Store(false)
	done := make(chan error, 1)
	go func() { done <- p.Call(testCtx(t), "ping", nil, nil) }()
	m := far.mustRead()
	if m.Method != "ping" || string(m.ID) != "2" {
		t.Fatalf("far end read %s", m.raw)
	}
	far.send(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	if err := <-done; err != nil {
		t.Fatalf("call after a refused write: %v", err)
	}
}

// The server's error answer is shown with its code and its own words, one
// line and bounded to 500 bytes (cut on a character boundary); with no
// words, the code alone. The CallError keeps the answer whole, reachable
// with errors.As; the log keeps the method, id, code and the words.
func TestErrorAnswer(t *testing.T) {
	p, rec := spawnServer(t, wire.Options{}, transport.StdioOptions{})
	initialize(t, p)
	long := strings.Repeat("ab", 1500)         // 3,000 bytes
	longWide := "a" + strings.Repeat("é", 300) // 601 bytes; byte 500 is inside an é
	cases := []struct {
		name    string
		message string
		code    int64
		want    string
	}{
		{"words", "  The channel is archived.  ", 0, `tools/call to "discord": error -32000: The channel is archived.`},
		{"empty", "", 0, `tools/call to "discord": error -32000`},
		{"whitespace", "   ", 0, `tools/call to "discord": error -32000`},
		{"whitespace and controls", " \n\t\x07 ", -32050, `tools/call to "discord": error -32050`},
		{"controls", "first line\nsecond\tpart\x07 \x1b[31mred\r\n", -32050, `tools/call to "discord": error -32050: first line second part [31mred`},
		{"separators", "one\u2028two\u2029three\u0085four", 42, `tools/call to "discord": error 42: one two three four`},
		{"host words are the server's own", "ask whoever runs this host", 0, `tools/call to "discord": error -32000: ask whoever runs this host`},
		{"long", long, 0, `tools/call to "discord": error -32000: ` + strings.Repeat("ab", 250) + "…"},
		{"long, cut inside a character", longWide, -32001, `tools/call to "discord": error -32001: a` + strings.Repeat("é", 249) + "…"},
	}
	id := int64(1)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id++
			_, err := callTool(testCtx(t), p, "fail", map[string]any{"message": c.message, "code": c.code})
			ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
			checkText(t, ce, c.want)
			if !utf8.ValidString(ce.Error()) {
				t.Errorf("text is not valid UTF-8: %q", ce.Error())
			}
			wantCode := c.code
			if wantCode == 0 {
				wantCode = -32000
			}
			if ce.Answer == nil {
				t.Fatalf("CallError has no Answer: %+v", ce)
			}
			if ce.Answer.Code != wantCode || ce.Answer.Message != c.message || ce.Answer.Data != nil || ce.ID != id || ce.Method != "tools/call" || ce.Server != server {
				t.Errorf("CallError keeps code %d message %q data %s id %d; want %d %q none %d",
					ce.Answer.Code, ce.Answer.Message, ce.Answer.Data, ce.ID, wantCode, c.message, id)
			}
			var pe *jsonrpc.Error
			if !errors.As(fmt.Errorf("session: %w", err), &pe) || pe.Code != wantCode || pe.Message != c.message {
				t.Errorf("errors.As through a wrap reached %+v", pe)
			}
			var r logRec
			for _, x := range rec.Find("answered with an error") {
				if x.Attrs["id"].Int64() == id {
					r = x
				}
			}
			if r.Message == "" {
				t.Fatalf("no error-answer log line for id %d:\n%s", id, rec.Dump())
			}
			wantAttrs(t, r, map[string]any{"server": server, "method": "tools/call", "code": wantCode})
			logged := r.Attrs["message"].String()
			if len(c.message) <= 500 && logged != c.message {
				t.Errorf("logged words %q, want %q", logged, c.message)
			}
			if len(c.message) > 500 && (len(logged) > 500+len("…") || !strings.HasPrefix(c.message, strings.TrimSuffix(logged, "…"))) {
				t.Errorf("logged words not bounded: %d bytes", len(logged))
			}
		})
	}
	// An unknown method is the server's -32601, in its own words.
	err := p.Call(testCtx(t), "nope/nothing", nil, nil)
	ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
	checkText(t, ce, `nope/nothing to "discord": error -32601: method not found: nope/nothing`)
	if ce.Answer == nil || ce.Answer.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("unknown method: answer %+v", ce.Answer)
	}
	echo(t, p, "still alive")
}

// A deadline against a real server that never answers: 1 second, and 3
// seconds overriding a 1-second connection default. The call was abandoned
// here; the log has the method, id and milliseconds; the connection lives.
func TestDeadlineRealServer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		def     time.Duration
		opt     []wire.CallOption
		want    time.Duration
		text    string
		wantMS  int64
		wantMax time.Duration
	}{
		{"1s", 0, []wire.CallOption{wire.WithTimeout(time.Second)}, time.Second, textDeadline1, 1000, 5 * time.Second},
		{"3s overrides default", time.Second, []wire.CallOption{wire.WithTimeout(3 * time.Second)}, 3 * time.Second, textDeadline3, 3000, 8 * time.Second},
		{"default 1s", time.Second, nil, time.Second, textDeadline1, 1000, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, rec := spawnServer(t, wire.Options{Timeout: tc.def}, transport.StdioOptions{})
			initialize(t, p)
			start := time.Now()
			_, err := callTool(testCtx(t), p, "hang", nil, tc.opt...)
			took := time.Since(start)
			ce := callError(t, err, wire.NoResponse, wire.CauseDeadline)
			checkText(t, ce, tc.text)
			if !errors.Is(err, context.DeadlineExceeded) || ce.Method != "tools/call" || ce.ID != 2 {
				t.Errorf("CallError fields: %+v", ce)
			}
			if ce.Timeout != tc.want || took < tc.want || took > tc.wantMax {
				t.Errorf("Timeout %v, took %v; want %v", ce.Timeout, took, tc.want)
			}
			r := rec.One(t, "request deadline passed; abandoned here")
			wantAttrs(t, r, map[string]any{"server": server, "method": "tools/call", "id": 2, "ms": tc.wantMS})
			echo(t, p, "after the deadline")
		})
	}
}

// WithTimeout(0) means no deadline, even where the connection has one.
func TestWithTimeoutZeroMeansNone(t *testing.T) {
	p, _ := spawnServer(t, wire.Options{Timeout: 100 * time.Millisecond}, transport.StdioOptions{})
	initialize(t, p)
	res, err := callTool(testCtx(t), p, "sleep", map[string]any{"ms": 400, "text": "slept"}, wire.WithTimeout(0))
	if err != nil || res.Text() != "slept" {
		t.Fatalf("got %q, %v", res.Text(), err)
	}
}
