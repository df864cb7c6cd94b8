package wire_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// padded is a request of about n bytes.
func padded(id int, n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"q","params":{"pad":%q}}`, id, strings.Repeat("x", n))
}

// Inbound messages are bounded in bytes as well as by count: beyond
// MaxQueuedBytes a request is refused with CodeOverloaded, and a message
// the handler holds (Request.Hold) counts until it is released.
func TestInboundBytesBudget(t *testing.T) {
	started, unblock := make(chan struct{}), make(chan struct{})
	var release func()
	held := make(chan struct{})
	h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		switch r.Method {
		case "block":
			close(started)
			<-unblock
		case "hold":
			release = r.Hold()
			close(held)
		case "holdpanic":
			r.Hold()
			panic("after Hold")
		}
		return "ok", nil
	})
	p, far, rec := pipePeer(t, wire.Options{Handler: h, MaxQueuedBytes: 1000})
	far.send(`{"jsonrpc":"2.0","id":1,"method":"block"}`)
	<-started
	far.send(padded(2, 500))
	far.send(padded(3, 500)) // over 1000 bytes with the two before it
	m := far.mustRead()
	if string(m.ID) != "3" || !isCode(m, wire.CodeOverloaded) {
		t.Fatalf("the request over the byte budget was answered %s", m.raw)
	}
	close(unblock)
	for _, id := range []string{"1", "2"} {
		if m := far.mustRead(); string(m.ID) != id || m.Error != nil {
			t.Fatalf("queued request answered %s, want id %s", m.raw, id)
		}
	}
	// A held message keeps its bytes counted after its handler returned.
	far.send(`{"jsonrpc":"2.0","id":4,"method":"hold","params":{"pad":"` + strings.Repeat("y", 800) + `"}}`)
	<-held
	if m := far.mustRead(); string(m.ID) != "4" {
		t.Fatalf("answered %s", m.raw)
	}
	far.send(padded(5, 400))
	if m := far.mustRead(); string(m.ID) != "5" || !isCode(m, wire.CodeOverloaded) {
		t.Fatalf("a request over the budget while one is held was answered %s", m.raw)
	}
	release()
	release() // a second release does nothing
	far.send(padded(6, 400))
	if m := far.mustRead(); string(m.ID) != "6" || m.Error != nil {
		t.Fatalf("after the release, answered %s", m.raw)
	}
	// Nothing held: a message of any size is taken.
	far.send(padded(7, 5000))
	if m := far.mustRead(); string(m.ID) != "7" || m.Error != nil {
		t.Fatalf("a message larger than the budget, with nothing held, was answered %s", m.raw)
	}
	// A handler that panics after Hold does not keep the bytes counted.
	far.send(`{"jsonrpc":"2.0","id":8,"method":"holdpanic","params":{"pad":"` + strings.Repeat("y", 800) + `"}}`)
	if m := far.mustRead(); string(m.ID) != "8" || !isCode(m, jsonrpc.CodeInternalError) {
		t.Fatalf("a panicking handler's request was answered %s", m.raw)
	}
	far.send(padded(9, 900))
	if m := far.mustRead(); string(m.ID) != "9" || m.Error != nil {
		t.Fatalf("after a panic that held bytes, answered %s", m.raw)
	}
	if n := len(rec.Find("inbound queue full; request refused")); n != 1 {
		t.Errorf("%d refusal lines logged, want 1 (then counted)", n)
	}
	p.Close()
	if s := rec.Find("refused 1 requests from server \"discord\" in the last 1 s: the inbound queue was full"); len(s) != 1 {
		t.Errorf("no summary of the counted refusal at close:\n%s", rec.Dump())
	}
}

// A request whose method is empty or not a string is answered -32600
// (Invalid Request), with its id, and never reaches the handler.
func TestInvalidRequestMethod(t *testing.T) {
	reached := make(chan string, 4)
	h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		reached <- r.Method
		return "ok", nil
	})
	_, far, _ := pipePeer(t, wire.Options{Handler: h})
	far.send(`{"jsonrpc":"2.0","id":"a","method":""}`)
	far.send(`{"jsonrpc":"2.0","id":"b","method":42}`)
	far.send(`{"jsonrpc":"2.0","method":{"x":1}}`) // a notification: nothing to answer
	far.send(`{"jsonrpc":"2.0","id":"c","method":"fine"}`)
	// The refusals go out through their own writer: in any order with
	// the handler's answers.
	for range 3 {
		m := far.mustRead()
		switch string(m.ID) {
		case `"a"`, `"b"`:
			if !isCode(m, jsonrpc.CodeInvalidRequest) {
				t.Errorf("answered %s, want -32600", m.raw)
			}
		case `"c"`:
			if m.Error != nil {
				t.Errorf("answered %s", m.raw)
			}
		default:
			t.Fatalf("answered %s", m.raw)
		}
	}
	if got := <-reached; got != "fine" {
		t.Errorf("the handler got %q", got)
	}
}

// A flood of notifications the queue cannot take makes one log line and a
// summary, not a line each; the reader keeps reading meanwhile.
func TestDroppedFloodLogsOnce(t *testing.T) {
	started, unblock := make(chan struct{}), make(chan struct{})
	h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		if r.Method == "block" {
			close(started)
			<-unblock
		}
		return nil, nil
	})
	p, far, rec := pipePeer(t, wire.Options{Handler: h, MaxQueued: 2})
	far.send(`{"jsonrpc":"2.0","id":1,"method":"block"}`)
	<-started
	for range 10_000 {
		far.send(`{"jsonrpc":"2.0","method":"notifications/x"}`)
	}
	// A call is still answered: the reader was never held up.
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "ping", nil, nil) }()
	m := far.mustRead()
	far.sendf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	close(unblock)
	p.Close()
	if n := len(rec.Find("inbound queue full; notification dropped")); n != 1 {
		t.Errorf("%d drop lines logged, want 1", n)
	}
	var summary []string
	for _, r := range rec.All() {
		if strings.HasPrefix(r.Message, "dropped ") {
			summary = append(summary, r.Message)
		}
	}
	if len(summary) != 1 || !strings.HasPrefix(summary[0], "dropped 9,997 notifications from server \"discord\"") {
		t.Errorf("summary lines: %q", summary)
	}
}

// stubborn starts a process that never reads its stdin, with a Peer on
// it whose writes time out after 200ms.
func stubborn(t *testing.T, script string) (*wire.Peer, *recorder) {
	t.Helper()
	proc, err := transport.Spawn(transport.Command{Argv: []string{"sh", "-c", script}},
		transport.StdioOptions{Logger: slog.New(slog.DiscardHandler), StopWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Close() })
	return newPeer(t, proc, wire.Options{
		WriteTimeout: 200 * time.Millisecond,
		Handler: wire.HandlerFunc(func(context.Context, *wire.Request) (any, error) {
			return struct{}{}, nil
		}),
	})
}

// A peer that stops reading: once its pipe is full, a write that it takes
// none of before the deadline closes the connection (CauseStalled, with
// the operator's line), and every call after fails as not sent because of
// it.
func TestStalledNotifyClosesConnection(t *testing.T) {
	p, rec := stubborn(t, "exec sleep 600")
	var err error
	for range 1000 { // 64 KiB of pipe is about 60 of these
		if err = p.Notify(testCtx(t), "notifications/x", map[string]string{"pad": strings.Repeat("z", 1000)}); err != nil {
			break
		}
	}
	ce := callError(t, err, wire.NotSent, wire.CauseStalled)
	if ce.Timeout != 200*time.Millisecond {
		t.Errorf("Timeout = %v", ce.Timeout)
	}
	waitDone(t, p)
	if !p.ClosedHere() {
		t.Error("the connection is not recorded as closed here")
	}
	r := rec.One(t, "the other side took none of a message before its deadline, so it has stopped reading; closing the connection")
	wantAttrs(t, r, map[string]any{"message": "notification", "method": "notifications/x", "waited": "200ms", "closed_here": true})
	err = p.Call(testCtx(t), "tools/call", nil, nil)
	checkText(t, callError(t, err, wire.NotSent, wire.CauseStalled),
		`tools/call to "discord" not sent: this side closed the connection because the peer took none of a message within 200ms`)
	// Both failures carry why this side closed the connection.
	var st *wire.StallError
	if !errors.As(err, &st) || st.After != 200*time.Millisecond || !errors.As(ce, &st) {
		t.Errorf("the calls' errors do not carry the StallError: %v; %v", err, ce)
	}
}

// A server that sends requests and never reads the answers: the answers'
// writes stall once its pipe is full, and the connection closes within the
// write timeout; a call pending meanwhile reads why.
func TestStalledAnswersCloseConnection(t *testing.T) {
	// Bounded: 100,000 pings, then it waits to be killed.
	p, _ := stubborn(t, `i=0; while [ $i -lt 100000 ]; do echo '{"jsonrpc":"2.0","id":1,"method":"ping"}'; i=$((i+1)); done; exec sleep 600`)
	errc := make(chan error, 1)
	go func() { errc <- p.Call(testCtx(t), "tools/call", nil, nil, wire.WithTimeout(20*time.Second)) }()
	start := time.Now()
	var err error
	select {
	case err = <-errc:
	case <-time.After(15 * time.Second):
		t.Fatal("the call was not failed within 15s")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v", took)
	}
	var ce *wire.CallError
	if !errors.As(err, &ce) || ce.Cause != wire.CauseStalled {
		t.Fatalf("err = %v, want CauseStalled", err)
	}
	waitDone(t, p)
}

// A request larger than the pipe's buffer to a peer that stopped reading
// is written in part before its deadline passes: that too is a stall, and
// the call reads as one (this side closed the connection; whether the
// request took effect is unknown), not as a plain deadline.
func TestStalledPartialWrite(t *testing.T) {
	p, rec := stubborn(t, "exec sleep 600")
	err := p.Call(testCtx(t), "tools/call", map[string]string{"pad": strings.Repeat("z", 200_000)}, nil, wire.WithTimeout(300*time.Millisecond))
	ce := callError(t, err, wire.NoResponse, wire.CauseStalled)
	if ce.Timeout != 300*time.Millisecond {
		t.Errorf("Timeout = %v", ce.Timeout)
	}
	waitDone(t, p)
	var st *wire.StallError
	if !errors.As(p.Err(), &st) || !p.ClosedHere() {
		t.Errorf("Err = %v, ClosedHere %v; want a StallError closed here", p.Err(), p.ClosedHere())
	}
	rec.One(t, "the other side took none of a message before its deadline, so it has stopped reading; closing the connection")
}

// A write that finds the other side's end closed (a process that closed
// its stdin) ends the connection at once: the peer reads as closed as
// soon as the call has failed, not when the reader gets to it, and the
// stream is closed, so the connection's end does not wait for a stdout
// that stays open.
func TestWriteFindsPeerClosed(t *testing.T) {
	p, _ := stubborn(t, "exec 0<&-; exec sleep 600")
	var err error
	for range 100 { // the first writes may land before the close
		if err = p.Call(testCtx(t), "tools/call", nil, nil, wire.WithTimeout(time.Second)); errors.Is(err, wire.ErrNotSent) {
			break
		}
	}
	callError(t, err, wire.NotSent, wire.CauseClosed)
	if p.Err() == nil || p.ClosedHere() {
		t.Fatalf("the call failed as not sent on a closed connection, but the peer reads Err %v, ClosedHere %v; want closed by the other side",
			p.Err(), p.ClosedHere())
	}
	// The stream is closed too (the process stopped), so the connection
	// ends although the process never closed its stdout.
	waitDone(t, p)
}
