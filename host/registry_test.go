package host_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
)

// TestStartConnectsConcurrently: Start connects every server at once. One
// whose handshake is held does not hold up the others; one that fails is
// logged and reads as gone; the held one reads as connecting until it is
// done, and Settled waits for it.
func TestStartConnectsConcurrently(t *testing.T) {
	h, rec := newHost(t)
	fifo, release := hold(t)
	h.Start(parse(t, `servers:
  - id: slow
    command: `+ts(t, "-hold-initialize", fifo)+`
  - id: broken
    command: [/nonexistent/mcpl-server]
  - id: quick
    command: `+ts(t, "-mcpl", adMCPL)+`
`))
	// slow is first in the file and held: quick comes up all the same.
	waitLog(t, rec, logListed, "quick", 1)
	wantOK(t, h, "quick--echo", `{"text":"up"}`, "up")
	waitLog(t, rec, logFailed, "broken", 1)
	wantRefused(t, h, "broken--echo", `{}`, textGone("broken", "broken--echo"))
	wantRefused(t, h, "slow--echo", `{}`, textConnecting("slow", "slow--echo"))
	select {
	case <-h.Settled():
		t.Fatal("Settled while a connect is held")
	default:
	}
	if got, want := fmt.Sprint(toolNames(h)), fmt.Sprint(prefixed("quick", testserverTools()...)); got != want {
		t.Errorf("Tools while slow connects = %v, want %v", got, want)
	}

	release()
	select {
	case <-h.Settled():
	case <-time.After(waitFor):
		t.Fatal("not settled once every connect was done")
	}
	wantOK(t, h, "slow--echo", `{"text":"late"}`, "late")
	// Tools come in the file's order, whatever order the connects ended in.
	want := append(prefixed("slow", testserverTools()...), prefixed("quick", testserverTools()...)...)
	if got := toolNames(h); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Tools = %v, want %v", got, want)
	}
	for _, tl := range h.Tools() {
		if tl.Server+"--"+tl.Def.Name != tl.Name {
			t.Errorf("tool %s: server %q, definition %q", tl.Name, tl.Server, tl.Def.Name)
		}
	}
}

// TestConnectInFlight: while a runtime connect's handshake is held, a call
// reads "connecting", and another connect, a restart and a disconnect of
// the id are refused, in the words, before they change anything.
func TestConnectInFlight(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: other\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	fifo, release := hold(t)
	sig, started := spawned(t)
	cfg := server(t, "id: x\ncommand: "+wrapped(sig, testserverBin(t), "-hold-initialize", fifo))
	done := make(chan error, 1)
	go func() { done <- h.Connect(context.Background(), cfg) }()
	started()

	wantRefused(t, h, "x--echo", `{}`, textConnecting("x", "x--echo"))
	moved := cfg
	moved.ToolPrefix = "elsewhere"
	for name, err := range map[string]error{
		"Connect":               h.Connect(t.Context(), cfg),
		"Connect, a new prefix": h.Connect(t.Context(), moved),
		"Restart":               h.Restart(t.Context(), "x", nil),
		"Restart with a config": h.Restart(t.Context(), "x", &moved),
		"Disconnect":            h.Disconnect("x"),
	} {
		var inFlight *host.ServerError
		if !errors.Is(err, host.ErrConnectInFlight) || !errors.As(err, &inFlight) || inFlight.ID != "x" || err.Error() != textInFlight("x") {
			t.Errorf("%s during the connect = %v, want %q", name, err, textInFlight("x"))
		}
	}
	// A prefix the connecting server holds is held against others too.
	err := h.Connect(t.Context(), server(t, "id: y\ntoolPrefix: x\ncommand: "+ts(t)))
	var conflict *config.PrefixConflictError
	if !errors.As(err, &conflict) || conflict.OtherID != "x" || conflict.ID != "y" {
		t.Errorf("a connect into the connecting server's prefix = %v", err)
	}
	// Nothing changed.
	wantRefused(t, h, "x--echo", `{}`, textConnecting("x", "x--echo"))
	if got, want := fmt.Sprint(toolNames(h)), fmt.Sprint(prefixed("other", testserverTools()...)); got != want {
		t.Errorf("Tools = %v, want %v", got, want)
	}

	release()
	if err := <-done; err != nil {
		t.Fatalf("the held connect: %v", err)
	}
	wantOK(t, h, "x--echo", `{"text":"in"}`, "in")
	wantOK(t, h, "other--echo", `{"text":"still"}`, "still")
	if err := h.Connect(t.Context(), cfg); !errors.Is(err, host.ErrAlreadyConnected) || err.Error() != `MCPL server "x" is already connected` {
		t.Errorf("a connect of a registered id = %v", err)
	}
}

// TestRestartWindowReadsConnecting: a restart closes the old connection
// under a call waiting on it, which reads that this host closed it; from
// the moment the restart begins until its connect is done, calls read
// "connecting", never "gone"; the restart can change the server's config,
// and a disconnect is refused meanwhile.
func TestRestartWindowReadsConnecting(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	before := requestCount(t, h, "x--count")
	pending := make(chan error, 1)
	go func() {
		_, err := h.CallTool(context.Background(), "x--hang", nil)
		pending <- err
	}()
	arrived(t, h, "x--count", before)
	fifo, release := hold(t)
	sig, started := spawned(t)
	next := server(t, "id: x\ncommand: "+wrapped(sig, testserverBin(t), "-hold-initialize", fifo, "-name", "second")+
		"\ntools: {disable: [fail]}")
	done := make(chan error, 1)
	go func() { done <- h.Restart(context.Background(), "x", &next) }()
	started()
	// The old connection is closed by now, under the call waiting on it.
	select {
	case err := <-pending:
		if err == nil || err.Error() != textHostClosedPending("x") {
			t.Errorf("the call in flight reads %v, want %q", err, textHostClosedPending("x"))
		}
	case <-time.After(waitFor):
		t.Fatal("the call in flight did not end with the restart's close")
	}
	wantRefused(t, h, "x--echo", `{}`, textConnecting("x", "x--echo"))
	if err := h.Disconnect("x"); err == nil || err.Error() != textInFlight("x") {
		t.Errorf("Disconnect during the restart = %v", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "x--echo", `{"text":"back"}`, "back")
	// The new config holds: its policy, and its server.
	wantRefused(t, h, "x--fail", `{}`, textDenied("x", "x--fail"))
	s, ok := h.Server("x")
	if !ok || s.ServerInfo == nil || s.ServerInfo.Name != "second" {
		t.Errorf("after the restart the session is %v, %v", ok, s)
	}
}

// TestRestartWithACallInFlight: a restart closes the old connection, so a
// call waiting on it reads that this host closed it before it answered;
// the restart's own connect is held by the server, and calls meanwhile
// read "connecting"; then calls reach the new connection.
func TestRestartWithACallInFlight(t *testing.T) {
	f := newFake(t, "echo", "hang")
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: r\nurl: "+f.url)); err != nil {
		t.Fatal(err)
	}
	f.nextConn()
	wantOK(t, h, "r--echo", `{"text":"one"}`, "conn 1: one")

	pending := make(chan error, 1)
	go func() {
		_, err := h.CallTool(context.Background(), "r--hang", nil)
		pending <- err
	}()
	if c := <-f.calls; c != 1 {
		t.Fatalf("hang arrived on connection %d", c)
	}
	release := f.holdInitialize(2)
	restarted := make(chan error, 1)
	go func() { restarted <- h.Restart(context.Background(), "r", nil) }()

	select {
	case err := <-pending:
		if err == nil || err.Error() != textHostClosedPending("r") {
			t.Fatalf("the call in flight reads %v, want %q", err, textHostClosedPending("r"))
		}
	case <-time.After(waitFor):
		t.Fatal("the call in flight did not end with the restart")
	}
	f.nextConn() // the restart's initialize has arrived, and is held
	wantRefused(t, h, "r--echo", `{}`, textConnecting("r", "r--echo"))
	release()
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "r--echo", `{"text":"two"}`, "conn 2: two")
}

// TestRestartRefusals: a restart of an id not registered, one that changes
// the id, and one into a prefix another server holds are refused, and leave
// the server as it was.
func TestRestartRefusals(t *testing.T) {
	h, _ := newHost(t)
	for _, id := range []string{"a", "b"} {
		if err := h.Connect(t.Context(), server(t, "id: "+id+"\ncommand: "+ts(t))); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Restart(t.Context(), "nobody", nil); !errors.Is(err, host.ErrNotConnected) || err.Error() != `MCPL server "nobody" is not connected` {
		t.Errorf("Restart of an unknown id = %v", err)
	}
	renamed := server(t, "id: c\ncommand: "+ts(t))
	if err := h.Restart(t.Context(), "a", &renamed); err == nil || err.Error() != `a restart of "a" cannot change its id to "c"` {
		t.Errorf("Restart that renames = %v", err)
	}
	clash := server(t, "id: a\ntoolPrefix: b\ncommand: "+ts(t))
	err := h.Restart(t.Context(), "a", &clash)
	var conflict *config.PrefixConflictError
	if !errors.As(err, &conflict) || conflict.ID != "a" || conflict.OtherID != "b" {
		t.Errorf("Restart into b's prefix = %v", err)
	}
	// a is untouched: same connection, same prefix (server/discover,
	// initialize, tools/list and the call).
	wantOK(t, h, "a--count", `{}`, "4")
	wantOK(t, h, "b--echo", `{"text":"b"}`, "b")
}

// TestFailedConnects: a connect that fails without reconnect clears the
// mark (the id can be connected again) and its calls read "gone"; so does
// a restart whose new connect fails.
func TestFailedConnects(t *testing.T) {
	h, _ := newHost(t)
	bad := server(t, "id: x\ncommand: [/nonexistent/mcpl-server]")
	if err := h.Connect(t.Context(), bad); err == nil {
		t.Fatal("a connect to a missing program succeeded")
	}
	wantRefused(t, h, "x--echo", `{}`, textGone("x", "x--echo"))
	// A server that exits before it answers initialize.
	crash := server(t, "id: x\ncommand: "+ts(t, "-crash-after", "1"))
	if err := h.Connect(t.Context(), crash); err == nil {
		t.Fatal("a connect to a server that crashes on initialize succeeded")
	}
	wantRefused(t, h, "x--echo", `{}`, textGone("x", "x--echo"))

	good := server(t, "id: x\ncommand: "+ts(t))
	if err := h.Connect(t.Context(), good); err != nil {
		t.Fatalf("a connect after failed ones: %v", err)
	}
	wantOK(t, h, "x--echo", `{"text":"ok"}`, "ok")
	if err := h.Restart(t.Context(), "x", &bad); err == nil {
		t.Fatal("a restart into a missing program succeeded")
	}
	wantRefused(t, h, "x--echo", `{}`, textGone("x", "x--echo"))
	if _, ok := h.Server("x"); ok {
		t.Error("a failed restart left the server registered")
	}
}

// TestCloseEndsAConnectInFlight: Close ends a runtime connect that is
// still in flight, and returns only once it has: nothing of it outlives
// Close. Calls then read "gone", and connects are refused.
func TestCloseEndsAConnectInFlight(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: live\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	fifo, _ := hold(t)
	sig, started := spawned(t)
	done := make(chan error, 1)
	go func() {
		done <- h.Connect(context.Background(), server(t, "id: held\ncommand: "+wrapped(sig, testserverBin(t), "-hold-initialize", fifo)))
	}()
	started()
	h.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a connect ended by Close succeeded")
		}
	case <-time.After(waitFor):
		t.Fatal("Close returned with a connect still in flight")
	}
	wantRefused(t, h, "live--echo", `{}`, textGone("live", "live--echo"))
	if err := h.Connect(t.Context(), server(t, "id: late\ncommand: "+ts(t))); err == nil {
		t.Error("a connect after Close succeeded")
	}
}

// TestReconnectRelists: after a reconnect the host lists the server's
// tools again; here the server that comes back is another program.
func TestReconnectRelists(t *testing.T) {
	h, rec := newHost(t)
	mark := t.TempDir() + "/second"
	cmd := list("sh", "-c", `if [ -e "$0" ]; then exec "$2"; fi; : > "$0"; exec "$1"`, mark, testserverBin(t), sdkBinary(t))
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+cmd+"\nreconnect: {enabled: true, initial: 10ms, max: 10ms}")); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, h, "x--exit", `{}`, textClosedPending("x", true))
	waitLog(t, rec, logListed, "x", 2)
	if got, want := fmt.Sprint(toolNames(h)), fmt.Sprint(prefixed("x", "add", "shout")); got != want {
		t.Errorf("Tools after the reconnect = %v, want %v", got, want)
	}
	wantOK(t, h, "x--shout", `{"text":"back"}`, "BACK")
}

// TestFirstConnectFailsThenLists: with reconnect on, a server whose first
// connect fails stays registered, and when a retry connects, its tools are
// listed and its calls work. The first connect spawns the command twice:
// a process that ends during server/discover is spawned again at once,
// opened with initialize (session/version.go); so it exits on its first
// two runs.
func TestFirstConnectFailsThenLists(t *testing.T) {
	h, rec := newHost(t)
	mark := t.TempDir() + "/runs"
	cmd := list("sh", "-c", `n=$(cat "$0" 2>/dev/null || echo 0); echo $((n+1)) > "$0"; if [ "$n" -ge 2 ]; then exec "$1"; fi; exit 1`, mark, testserverBin(t))
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+cmd+"\nreconnect: {enabled: true, initial: 10ms, max: 10ms}")); err != nil {
		t.Fatalf("a connect that will retry: %v", err)
	}
	waitLog(t, rec, logReconnected, "x", 1)
	waitLog(t, rec, logListed, "x", 1)
	if got, want := fmt.Sprint(toolNames(h)), fmt.Sprint(prefixed("x", testserverTools()...)); got != want {
		t.Errorf("Tools after the retry connected = %v, want %v", got, want)
	}
	wantOK(t, h, "x--echo", `{"text":"at last"}`, "at last")
}

// TestConnectionEndsAsItConnects: a connection that ends, for good, just
// as its handshake is done, before the host has registered the server,
// does not leave a dead server in the registry: either the connect fails,
// or the server leaves the registry as its connection ends.
func TestConnectionEndsAsItConnects(t *testing.T) {
	f := newFake(t)
	f.mu.Lock()
	f.dropInit = true
	f.mu.Unlock()
	h, rec := newHost(t)
	for i := range 20 {
		id := fmt.Sprintf("e%d", i)
		err := h.Connect(t.Context(), server(t, "id: "+id+"\nurl: "+f.url))
		if err == nil {
			waitLog(t, rec, logLeft, id, 1)
		}
		if _, ok := h.Server(id); ok {
			t.Fatalf("%s: a server whose connection ended is registered", id)
		}
		wantRefused(t, h, id+"--echo", `{}`, textGone(id, id+"--echo"))
	}
}

// TestDisconnectWithACallInFlight: a disconnect closes the connection
// under a call waiting on it, which reads that this host closed it before
// the server answered; later calls read "gone".
func TestDisconnectWithACallInFlight(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	before := requestCount(t, h, "x--count")
	pending := make(chan error, 1)
	go func() {
		_, err := h.CallTool(context.Background(), "x--hang", nil)
		pending <- err
	}()
	arrived(t, h, "x--count", before)
	if err := h.Disconnect("x"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-pending:
		if err == nil || err.Error() != textHostClosedPending("x") {
			t.Fatalf("the call in flight reads %v, want %q", err, textHostClosedPending("x"))
		}
	case <-time.After(waitFor):
		t.Fatal("the call in flight did not end with the disconnect")
	}
	wantRefused(t, h, "x--hang", `{}`, textGone("x", "x--hang"))
}

// requestCount is how many requests the test server behind count has
// received, this one included: read before a test sends the request
// arrived waits for, since how many the host's handshake sends is the
// host's business (server/discover made it one more).
func requestCount(t *testing.T, h *host.Host, count string) int {
	t.Helper()
	got, err := call(t, h, count, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(got)
	if err != nil {
		t.Fatalf("count answered %q", got)
	}
	return n
}

// arrived returns once the test server behind count has received one
// request more than the before it had when the test began sending them
// (requestCount): the test server numbers its requests, and count answers
// with how many it has had, itself included. Each try is a round trip,
// never a sleep.
func arrived(t *testing.T, h *host.Host, count string, before int) {
	t.Helper()
	for try := 1; try <= 1000; try++ {
		got, err := call(t, h, count, `{}`)
		switch {
		case err != nil:
			t.Fatal(err)
		case got == fmt.Sprint(before+1+try):
			return
		case got != fmt.Sprint(before+try):
			t.Fatalf("count = %s on try %d, before %d", got, try, before)
		}
	}
	t.Fatal("the request did not arrive")
}

// TestConnectContextEnds: a runtime connect whose ctx ends while the
// handshake is held returns ctx's error and registers nothing, even with
// reconnect on (before, it registered a stub that kept redialing).
func TestConnectContextEnds(t *testing.T) {
	h, _ := newHost(t)
	fifo, _ := hold(t)
	sig, started := spawned(t)
	cfg := server(t, "id: x\nreconnect: {enabled: true, initial: 10ms, max: 20ms}\ncommand: "+wrapped(sig, testserverBin(t), "-hold-initialize", fifo))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Connect(ctx, cfg) }()
	started()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect = %v, want context.Canceled", err)
	}
	if st, ok := h.Server("x"); ok {
		t.Errorf("the server is in the registry: %+v", st)
	}
	wantRefused(t, h, "x--echo", `{}`, textGone("x", "x--echo"))
	// The id is free again.
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "x--echo", `{"text":"back"}`, "back")
}
