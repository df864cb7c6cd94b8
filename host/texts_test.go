package host_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// The texts a caller reads, written out here as the issue gives them, so a
// change to any of them fails a test. <s> is the server id, <tool> the name
// the caller used.

func textGone(s, tool string) string {
	return `The "` + s + `" server that provides ` + tool + ` isn't connected, and this host won't reconnect to it on its own, so the call didn't run. If you need it, ask whoever runs this host.`
}

func textConnecting(s, tool string) string {
	return `This host is connecting to the "` + s + `" server that provides ` + tool + `, so the call didn't run. Try again in a moment.`
}

func textDenied(s, tool string) string {
	return tool + ` isn't allowed by this host's policy for the "` + s + `" server, so the call didn't run, and calling it again won't change that. If you need it, ask whoever runs this host.`
}

func textNoWords(s, tool string) string {
	return `The "` + s + `" server reported an error for ` + tool + ` without saying what went wrong. Whether it did anything is unknown: check before calling it again.`
}

func textInFlight(id string) string {
	return `MCPL server "` + id + `" has a connect in flight; try again once it settles`
}

// textNoSuchTool is this host's own: the issue gives none.
func textNoSuchTool(name string) string {
	return `This host has no tool named ` + name + `, so the call didn't run. Call one of the tools this host lists.`
}

// Package wire's texts, for a request that failed.

func textClosedPending(s string, reconnecting bool) string {
	if reconnecting {
		return `The connection to the "` + s + `" server closed before it answered, so whether the request took effect is unknown. Check its effect before trying again; this host is reconnecting to it.`
	}
	return `The connection to the "` + s + `" server closed before it answered, so whether the request took effect is unknown. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`
}

func textNotSentClosed(s string, reconnecting bool) string {
	if reconnecting {
		return `The request wasn't sent: the connection to the "` + s + `" server is closed, so nothing ran. This host is reconnecting to it; try again later.`
	}
	return `The request wasn't sent: the connection to the "` + s + `" server is closed, so nothing ran. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.`
}

func textHostClosedPending(s string) string {
	return `The "` + s + `" server didn't answer before this host closed its connection, so whether the request took effect is unknown. Check its effect before trying again.`
}

func textErrorAnswer(s, words string) string {
	return `The "` + s + `" server answered with an error: ` + words
}

func textErrorAnswerNoWords(s string) string {
	return `The "` + s + `" server answered with an error without saying what went wrong, so whether the request took effect is unknown. Check its effect before trying again.`
}

func textDeadline(s, d string) string {
	return `The "` + s + `" server didn't answer within ` + d + `, so whether the request took effect is unknown: it was abandoned here, and the server was asked to cancel it, but it may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`
}

// wantCallError checks that a refusal carries the request's failure with
// the outcome it names.
func wantCallError(t *testing.T, err error, outcome wire.Outcome) {
	t.Helper()
	var ce *wire.CallError
	if !errors.As(err, &ce) || ce.Outcome != outcome {
		t.Fatalf("the refusal wraps %#v, want a *wire.CallError with outcome %s", err, outcome)
	}
}

// TestGoneAfterAFailedConnect: a server whose connect failed, with
// reconnect off, never joins the registry, and its calls read that it is
// gone: not that the host knows no such tool.
func TestGoneAfterAFailedConnect(t *testing.T) {
	h, rec := newHost(t)
	h.Start(parse(t, `servers:
  - id: dead
    command: [/nonexistent/mcpl-server]
`))
	<-h.Settled()
	if n := logCount(rec, logFailed, "dead"); n != 1 {
		t.Fatalf("%d %q log lines for dead, want 1: %v", n, logFailed, rec.All())
	}
	wantRefused(t, h, "dead--echo", `{}`, textGone("dead", "dead--echo"))
	if _, ok := h.Server("dead"); ok {
		t.Error("a server whose connect failed is in the registry")
	}
	if got := h.Tools(); len(got) != 0 {
		t.Errorf("Tools = %v, want none", got)
	}
}

// TestGoneAfterDisconnect: an operator's disconnect leaves the server's
// calls reading that it is gone.
func TestGoneAfterDisconnect(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "x--echo", `{"text":"hi"}`, "hi")
	if err := h.Disconnect("x"); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, h, "x--echo", `{"text":"hi"}`, textGone("x", "x--echo"))
	if got := h.Tools(); len(got) != 0 {
		t.Errorf("Tools after the disconnect = %v, want none", toolNames(h))
	}
	if err := h.Disconnect("x"); !errors.Is(err, host.ErrNotConnected) || err.Error() != `MCPL server "x" is not connected` {
		t.Errorf("a second Disconnect = %v", err)
	}
}

// TestGoneAfterTheConnectionEnds: a server whose connection ends, with
// reconnect off, leaves the registry; the call under way reads wire's
// closed text, and later calls that the server is gone.
func TestGoneAfterTheConnectionEnds(t *testing.T) {
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	te := wantRefused(t, h, "x--exit", `{"code":0}`, textClosedPending("x", false))
	wantCallError(t, te.Err, wire.NoResponse)
	waitLog(t, rec, logLeft, "x", 1)
	wantRefused(t, h, "x--echo", `{}`, textGone("x", "x--echo"))
	if _, ok := h.Server("x"); ok {
		t.Error("the server is still in the registry")
	}
	if got := h.Tools(); len(got) != 0 {
		t.Errorf("Tools = %v, want none", toolNames(h))
	}
}

// TestConnectingWhileStartIsHeld: Start marks each id before it returns, so
// a call made at once reads that the host is connecting, whatever tool it
// names, until the handshake is done.
func TestConnectingWhileStartIsHeld(t *testing.T) {
	h, _ := newHost(t)
	fifo, release := hold(t)
	h.Start(parse(t, "servers:\n  - id: x\n    command: "+ts(t, "-hold-initialize", fifo)+"\n"))
	wantRefused(t, h, "x--echo", `{}`, textConnecting("x", "x--echo"))
	wantRefused(t, h, "x--no_such_tool", `{}`, textConnecting("x", "x--no_such_tool"))
	if got := h.Tools(); len(got) != 0 {
		t.Errorf("Tools while connecting = %v, want none", toolNames(h))
	}
	release()
	<-h.Settled()
	wantOK(t, h, "x--echo", `{"text":"up"}`, "up")
}

// TestDeniedByPolicy: tools the policy disables are neither listed nor
// called; the call never reaches the server.
func TestDeniedByPolicy(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t)+"\ntools: {disable: [fail, \"h*\"]}")); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range testserverTools() {
		if n != "fail" && n != "hang" {
			want = append(want, "x--"+n)
		}
	}
	if got := toolNames(h); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Tools = %v, want %v", got, want)
	}
	// server/discover, initialize, tools/list and this call: 4.
	wantOK(t, h, "x--count", `{}`, "4")
	te := wantRefused(t, h, "x--fail", `{"message":"ran"}`, textDenied("x", "x--fail"))
	if te.Err != nil || te.Result != nil {
		t.Errorf("a refusal before the call carries %v, %v", te.Err, te.Result)
	}
	wantRefused(t, h, "x--hang", `{}`, textDenied("x", "x--hang"))
	// Neither refused call reached the server.
	wantOK(t, h, "x--count", `{}`, "5")
}

// TestDeniedByAllowlist: with tools.enable, only what it names is listed
// and called; an empty allowlist allows nothing.
func TestDeniedByAllowlist(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t)+"\ntools: {enable: [echo, \"c*\"]}")); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(h); fmt.Sprint(got) != fmt.Sprint([]string{"x--echo", "x--count"}) {
		t.Errorf("Tools = %v", got)
	}
	wantOK(t, h, "x--echo", `{"text":"allowed"}`, "allowed")
	wantRefused(t, h, "x--sleep", `{"ms":1}`, textDenied("x", "x--sleep"))

	if err := h.Connect(t.Context(), server(t, "id: y\ncommand: "+ts(t)+"\ntools: {enable: []}")); err != nil {
		t.Fatal(err)
	}
	for _, tl := range h.Tools() {
		if tl.Server == "y" {
			t.Errorf("an empty allowlist listed %s", tl.Name)
		}
	}
	wantRefused(t, h, "y--echo", `{}`, textDenied("y", "y--echo"))
}

// TestErrorResults: an isError result reads as its text, or, with no text
// or only whitespace, as the host's words for an error without words.
func TestErrorResults(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ text, want string }{
		{"", textNoWords("x", "x--tool_error")},
		{" \n\t ", textNoWords("x", "x--tool_error")},
		{"the disk is full", "the disk is full"},
	} {
		args := fmt.Sprintf(`{"text":%q}`, tc.text)
		te := wantRefused(t, h, "x--tool_error", args, tc.want)
		if te.Result == nil || !te.Result.IsError || te.Err != nil {
			t.Errorf("%s: the error carries result %+v, err %v; want the isError result and no request failure", args, te.Result, te.Err)
		}
	}
}

// TestWireFailures: a request that failed reads as package wire words it.
func TestWireFailures(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t)+"\nrequestTimeout: 100ms")); err != nil {
		t.Fatal(err)
	}
	te := wantRefused(t, h, "x--fail", `{"message":"no such room"}`, textErrorAnswer("x", "no such room"))
	wantCallError(t, te.Err, wire.ErrorResponse)
	wantRefused(t, h, "x--fail", `{"message":"  "}`, textErrorAnswerNoWords("x"))
	te = wantRefused(t, h, "x--hang", `{}`, textDeadline("x", "1 second"))
	wantCallError(t, te.Err, wire.NoResponse)
	// The connection is still good.
	wantOK(t, h, "x--echo", `{"text":"still here"}`, "still here")
}

// TestReconnectingTexts: with reconnect on, a server whose connection ends
// stays registered, and its calls read wire's reconnecting texts.
func TestReconnectingTexts(t *testing.T) {
	h, _ := newHost(t)
	cfg := server(t, "id: x\ncommand: "+ts(t)+"\nreconnect: {enabled: true, initial: 1h, max: 1h}")
	if err := h.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, h, "x--exit", `{"code":1}`, textClosedPending("x", true))
	te := wantRefused(t, h, "x--echo", `{}`, textNotSentClosed("x", true))
	wantCallError(t, te.Err, wire.NotSent)
	if _, ok := h.Server("x"); !ok {
		t.Error("a reconnecting server left the registry")
	}
}

// TestReconnectingStub: with reconnect on, a server whose first connect
// fails stays registered while its session retries, and its calls read
// wire's reconnecting not-sent text, not "connecting" nor "gone". (Its
// program exists and exits at once: one that does not exist is not
// retried, session.missingProgram.)
func TestReconnectingStub(t *testing.T) {
	h, rec := newHost(t)
	h.Start(parse(t, `servers:
  - id: later
    command: [/bin/sh, -c, "exit 1"]
    reconnect: {enabled: true, initial: 1h, max: 1h}
`))
	<-h.Settled()
	if n := logCount(rec, logFailed, "later"); n != 0 {
		t.Errorf("a connect that goes on retrying logged %q", logFailed)
	}
	if _, ok := h.Server("later"); !ok {
		t.Fatal("the stub is not in the registry")
	}
	wantRefused(t, h, "later--echo", `{}`, textNotSentClosed("later", true))
	if got := h.Tools(); len(got) != 0 {
		t.Errorf("Tools = %v, want none", toolNames(h))
	}
	// An operator can remove it; then it is gone.
	if err := h.Disconnect("later"); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, h, "later--echo", `{}`, textGone("later", "later--echo"))
}

// TestNoSuchTool: a name no server's prefix matches.
func TestNoSuchTool(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"y--echo", "x--", "x-echo", "echo", ""} {
		wantRefused(t, h, name, `{}`, textNoSuchTool(name))
	}
}

// TestGoneGivesWayToANewServer: a gone server's prefix does not hold its
// tool names against a server connected later with a prefix that meets
// it: calls then reach the new server.
func TestGoneGivesWayToANewServer(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: old\ntoolPrefix: chat\ncommand: [/nonexistent/mcpl-server]")); err == nil {
		t.Fatal("a connect to a missing program succeeded")
	}
	wantRefused(t, h, "chat--echo", `{}`, textGone("old", "chat--echo"))
	if err := h.Connect(t.Context(), server(t, "id: new\ntoolPrefix: chat\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "chat--echo", `{"text":"new"}`, "new")
	if err := h.Disconnect("new"); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, h, "chat--echo", `{}`, textGone("new", "chat--echo"))
}
