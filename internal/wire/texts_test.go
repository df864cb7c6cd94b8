package wire_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// The agent-facing texts, verbatim, for the server "discord". They are
// written out whole here, not built from the package's format strings, so a
// change to a word fails a test.
const (
	textClosedReconnecting = `The connection to the "discord" server closed before it answered, so whether the request took effect is unknown. Check its effect before trying again; this host is reconnecting to it.`
	textClosedNoReconnect  = `The connection to the "discord" server closed before it answered, so whether the request took effect is unknown. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`
	textHostClosedPending  = `The "discord" server didn't answer before this host closed its connection, so whether the request took effect is unknown. Check its effect before trying again.`
	textNotSentReconnect   = `The request wasn't sent: the connection to the "discord" server is closed, so nothing ran. This host is reconnecting to it; try again later.`
	textNotSentNoReconnect = `The request wasn't sent: the connection to the "discord" server is closed, so nothing ran. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`
	textNotSentHostClosed  = `The request wasn't sent: this host closed its connection to the "discord" server, so nothing ran. If calling it again fails, ask whoever runs this host.`
	textNotWritten         = `The request wasn't sent: this host couldn't write it to the "discord" server, so nothing ran. Try again later.`
	textErrorAnswerPrefix  = `The "discord" server answered with an error: `
	textErrorNoWords       = `The "discord" server answered with an error without saying what went wrong, so whether the request took effect is unknown. Check its effect before trying again.`
	textDeadline1          = `The "discord" server didn't answer within 1 second, so whether the request took effect is unknown: it was abandoned here, not cancelled, and may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`
	textDeadline2          = `The "discord" server didn't answer within 2 seconds, so whether the request took effect is unknown: it was abandoned here, not cancelled, and may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`
	textDeadline3          = `The "discord" server didn't answer within 3 seconds, so whether the request took effect is unknown: it was abandoned here, not cancelled, and may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`
)

// checkText asserts the error's text is want, and that it is clean.
func checkText(t *testing.T, ce *wire.CallError, want string) {
	t.Helper()
	if got := ce.Error(); got != want {
		t.Errorf("text:\n got: %s\nwant: %s", got, want)
	}
	assertAgentText(t, ce.Error(), ce)
}

// A server that exits with a call pending: the call's outcome is unknown,
// the text says whether this host reconnects, the log names the exit and the
// unanswered request, and a call afterwards was not sent.
func TestServerDropsWithCallPending(t *testing.T) {
	for _, tc := range []struct {
		name                string
		reconnecting        bool
		args                map[string]any
		pending, notSent    string
		exitCode, signal    string
		notificationNotSent string
	}{
		{"reconnecting", true, map[string]any{"code": 3}, textClosedReconnecting, textNotSentReconnect, "3", "", textNotSentReconnect},
		{"no reconnect", false, map[string]any{"code": 3}, textClosedNoReconnect, textNotSentNoReconnect, "3", "", textNotSentNoReconnect},
		{"killed", false, map[string]any{"signal": "KILL"}, textClosedNoReconnect, textNotSentNoReconnect, "-1", "SIGKILL", textNotSentNoReconnect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			asked := 0
			p, rec := spawnServer(t, wire.Options{Reconnecting: func() bool { asked++; return tc.reconnecting }}, transport.StdioOptions{})
			initialize(t, p)
			echo(t, p, "before the drop")

			_, err := callTool(testCtx(t), p, "exit", tc.args)
			ce := callError(t, err, wire.NoResponse, wire.CauseClosed)
			checkText(t, ce, tc.pending)
			if ce.Reconnecting != tc.reconnecting || ce.Server != server || ce.Method != "tools/call" || ce.ID != 3 {
				t.Errorf("CallError fields: %+v", ce)
			}
			if asked == 0 {
				t.Error("Options.Reconnecting was not asked")
			}

			waitDone(t, p)
			if !errors.Is(p.Err(), io.EOF) || p.ClosedByHost() {
				t.Errorf("Err = %v, ClosedByHost = %v; want EOF, false", p.Err(), p.ClosedByHost())
			}
			r := rec.One(t, "connection closed with requests pending")
			wantAttrs(t, r, map[string]any{
				"server": server, "closed_by_host": false, "unanswered": "[tools/call#3]", "exit_code": tc.exitCode,
			})
			if tc.signal != "" {
				wantAttrs(t, r, map[string]any{"signal": tc.signal})
			} else {
				noAttrs(t, r, "signal")
			}
			if len(rec.Find("this host closed the connection with requests pending")) != 0 {
				t.Error("a server's drop was logged as this host's close")
			}

			_, err = callTool(testCtx(t), p, "echo", map[string]string{"text": "after"})
			checkText(t, callError(t, err, wire.NotSent, wire.CauseClosed), tc.notSent)
			err = p.Notify(testCtx(t), "notifications/progress", nil)
			checkText(t, callError(t, err, wire.NotSent, wire.CauseClosed), tc.notificationNotSent)
		})
	}
}

// This host closes the connection with a call pending: the call's outcome is
// unknown, the log says this host closed it, and a call afterwards says this
// host closed it, whether or not it is reconnecting.
func TestHostClosesWithCallPending(t *testing.T) {
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
	ce := callError(t, <-errc, wire.NoResponse, wire.CauseHostClosed)
	checkText(t, ce, textHostClosedPending)
	select {
	case <-proc.Exited():
	default:
		t.Error("Close returned before the server process exited")
	}
	if !errors.Is(p.Err(), wire.ErrHostClosed) || !p.ClosedByHost() {
		t.Errorf("Err = %v, ClosedByHost = %v", p.Err(), p.ClosedByHost())
	}
	r := rec.One(t, "this host closed the connection with requests pending")
	wantAttrs(t, r, map[string]any{"server": server, "closed_by_host": true, "unanswered": "[tools/call#2]"})
	if len(rec.Find("connection closed with requests pending")) != 0 {
		t.Error("this host's close was logged as the server's")
	}

	_, err := callTool(testCtx(t), p, "echo", map[string]string{"text": "after"})
	checkText(t, callError(t, err, wire.NotSent, wire.CauseHostClosed), textNotSentHostClosed)
	err = p.Notify(testCtx(t), "notifications/progress", nil)
	checkText(t, callError(t, err, wire.NotSent, wire.CauseHostClosed), textNotSentHostClosed)
}

// After the server drops, this host's own Close (as a restart or a removal
// makes) is what a later call reads: this host closed the connection.
func TestCallAfterDropThenHostClose(t *testing.T) {
	p, rec := spawnServer(t, wire.Options{Reconnecting: func() bool { return false }}, transport.StdioOptions{})
	initialize(t, p)
	if err := p.Notify(testCtx(t), "tools/call", map[string]any{"name": "exit", "arguments": map[string]int{"code": 0}}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	_, err := callTool(testCtx(t), p, "echo", map[string]string{"text": "x"})
	checkText(t, callError(t, err, wire.NotSent, wire.CauseClosed), textNotSentNoReconnect)

	p.Close()
	_, err = callTool(testCtx(t), p, "echo", map[string]string{"text": "x"})
	checkText(t, callError(t, err, wire.NotSent, wire.CauseHostClosed), textNotSentHostClosed)
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
			t.Errorf("this host's close with nothing pending logged:\n%s", rec.Dump())
		}
	})
}

// A write the transport refuses: the request was not sent, the log has the
// method, id and the transport's words, and the connection lives on.
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
	if !errors.Is(err, errRefused) {
		t.Errorf("the transport's error is not kept: %v", ce.Err)
	}
	r := rec.One(t, "request not written: the transport refused it")
	wantAttrs(t, r, map[string]any{"server": server, "method": "tools/call", "id": 1, "error": errRefused.Error()})
	if strings.Contains(ce.Error(), "buffer") {
		t.Error("the transport's words reached the agent's text")
	}
	err = p.Notify(testCtx(t), "notifications/progress", nil)
	checkText(t, callError(t, err, wire.NotSent, wire.CauseWriteFailed), textNotWritten)

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

// The server's error answer is shown in its own words, cleaned and bounded;
// with no words, the text says so. The log keeps the method, id, code and
// the words.
func TestErrorAnswer(t *testing.T) {
	p, rec := spawnServer(t, wire.Options{}, transport.StdioOptions{})
	initialize(t, p)
	long := strings.Repeat("ab", 1500) // 3,000 characters
	cases := []struct {
		name    string
		message string
		code    int64
		want    string
		words   bool
	}{
		{"words", "  The channel is archived.  ", 0, textErrorAnswerPrefix + "The channel is archived.", true},
		{"empty", "", 0, textErrorNoWords, false},
		{"whitespace", "   ", 0, textErrorNoWords, false},
		{"whitespace and controls", " \n\t\x07 ", -32050, textErrorNoWords, false},
		{"controls", "first line\nsecond\tpart\x07 \x1b[31mred\r\n", -32050, textErrorAnswerPrefix + "first line second part [31mred", true},
		{"long", long, 0, textErrorAnswerPrefix + strings.Repeat("ab", 999) + "a…", true},
	}
	id := int64(1)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id++
			_, err := callTool(testCtx(t), p, "fail", map[string]any{"message": c.message, "code": c.code})
			ce := callError(t, err, wire.ErrorResponse, wire.CauseErrorAnswer)
			if got := ce.Error(); got != c.want {
				t.Errorf("text:\n got: %q\nwant: %q", got, c.want)
			}
			// Only this host's part of the text is held to the rules: the
			// server's words are its own.
			if c.words {
				assertAgentText(t, textErrorAnswerPrefix, ce)
			} else {
				assertAgentText(t, ce.Error(), ce)
			}
			if c.words && utf8.RuneCountInString(strings.TrimPrefix(ce.Error(), textErrorAnswerPrefix)) > 2000 {
				t.Errorf("the server's words are over 2,000 characters")
			}
			wantCode := c.code
			if wantCode == 0 {
				wantCode = -32000
			}
			if ce.Code != wantCode || ce.Message != c.message || ce.ID != id {
				t.Errorf("CallError keeps code %d message %q id %d; want %d %q %d", ce.Code, ce.Message, ce.ID, wantCode, c.message, id)
			}
			var r logRec
			for _, x := range rec.Find("server answered with an error") {
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
	if ce.Code != wire.CodeMethodNotFound || !strings.HasPrefix(ce.Error(), textErrorAnswerPrefix) {
		t.Errorf("unknown method: code %d, text %q", ce.Code, ce.Error())
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
