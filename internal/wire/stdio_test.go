package wire_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// noiseLines are what real servers print on stdout besides messages.
var noiseLines = []string{
	"Starting discord-mcpl v0.4.2 on stdio",
	"null",
	"42",
	`"just a string"`,
	"[1,2]",
	`{"no":"jsonrpc"}`,
	"{broken json",
	`{"jsonrpc":"2.0","id":7}`,
}

// skippedLines returns the lines logged as skipped noise, in order.
func skippedLines(rec *recorder) []string {
	var out []string
	for _, r := range rec.Find("skipped a line that is not a JSON-RPC message") {
		out = append(out, r.Attrs["line"].String())
	}
	return out
}

// A server that prints a banner of noise before its first message is
// still spoken to; the noise is logged line by line, the first at warn
// and the rest at debug.
func TestBannerNoise(t *testing.T) {
	var args []string
	for _, l := range noiseLines {
		args = append(args, "-banner", l)
	}
	p, rec := spawnServer(t, wire.Options{}, transport.StdioOptions{}, args...)
	res := initialize(t, p)
	if res.ServerInfo == nil || res.ServerInfo.Name != "testserver" {
		t.Fatalf("initialize answered %+v", res)
	}
	echo(t, p, "after the banner")
	if got := skippedLines(rec); strings.Join(got, "\n") != strings.Join(noiseLines, "\n") {
		t.Errorf("skipped lines logged:\n%q\nwant:\n%q", got, noiseLines)
	}
	if w := rec.AtLeast(slog.LevelInfo); len(w) != 1 || w[0].Level != slog.LevelWarn || w[0].Attrs["line"].String() != noiseLines[0] {
		t.Errorf("noise logged at info or above other than one warning for the first line:\n%s", rec.Dump())
	}
}

// Noise written between messages (the noise tool writes it before its
// answer) is skipped, and the call's answer still arrives.
func TestNoiseBetweenMessages(t *testing.T) {
	p, rec := spawnServer(t, wire.Options{}, transport.StdioOptions{})
	initialize(t, p)
	for range 2 {
		res, err := callTool(testCtx(t), p, "noise", map[string]any{"lines": noiseLines})
		if err != nil || res.Text() != "after noise" {
			t.Fatalf("noise tool: %q, %v", res.Text(), err)
		}
		echo(t, p, "between")
	}
	// Two rounds of noise, each line logged; a third passes 20, after
	// which a single line says the rest are not logged.
	got := skippedLines(rec)
	if len(got) != 2*len(noiseLines) || got[len(noiseLines)] != noiseLines[0] {
		t.Errorf("skipped lines logged: %q", got)
	}
	res, err := callTool(testCtx(t), p, "noise", map[string]any{"lines": noiseLines})
	if err != nil || res.Text() != "after noise" {
		t.Fatalf("noise tool: %q, %v", res.Text(), err)
	}
	if n := len(skippedLines(rec)); n != 20 {
		t.Errorf("%d noise lines logged one by one, want 20", n)
	}
	rec.One(t, "skipping further lines that are not JSON-RPC messages without logging each")
	p.Close()
	wantAttrs(t, rec.One(t, "lines skipped as not JSON-RPC messages"), map[string]any{"count": 3 * len(noiseLines)})
}

// A message over the configured limit closes the connection, with an
// operator log line saying so; one under it passes.
func TestOversizeMessage(t *testing.T) {
	var (
		mu       sync.Mutex
		notified int
	)
	h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		if r.Method == "notifications/message" {
			mu.Lock()
			notified = len(r.Params)
			mu.Unlock()
		}
		return nil, wire.ErrMethodNotFound
	})
	p, rec := spawnServer(t, wire.Options{Handler: h}, transport.StdioOptions{MaxMessageSize: 4096})
	initialize(t, p)

	res, err := callTool(testCtx(t), p, "oversize", map[string]int{"bytes": 3000})
	if err != nil || res.Text() != "after oversize" {
		t.Fatalf("a message under the limit: %q, %v", res.Text(), err)
	}
	// The notification came before the answer; a barrier behind it is
	// reached once the handler has had it (an answer is routed by the
	// reader, not the dispatcher, so a later call's answer proves nothing).
	if err := p.Sync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if notified < 3000 {
		t.Errorf("the message under the limit reached the handler with %d bytes of params", notified)
	}
	mu.Unlock()

	_, err = callTool(testCtx(t), p, "oversize", map[string]int{"bytes": 10000})
	checkText(t, callError(t, err, wire.NoResponse, wire.CauseTooLarge), textTooLargePending)
	waitDone(t, p)
	var tl *transport.TooLargeError
	if !errors.As(p.Err(), &tl) || tl.Limit != 4096 || !p.ClosedHere() {
		t.Errorf("Err = %v, ClosedHere = %v", p.Err(), p.ClosedHere())
	}
	r := rec.One(t, "message over the size limit; closing the connection")
	if r.Level != slog.LevelError {
		t.Errorf("logged at %v", r.Level)
	}
	wantAttrs(t, r, map[string]any{"server": server, "limit_bytes": 4096})
	if r.Attrs["seen_bytes"].Int64() <= 4096 {
		t.Errorf("seen_bytes = %v", r.Attrs["seen_bytes"])
	}
	closeLog := rec.One(t, "connection closed with requests pending")
	wantAttrs(t, closeLog, map[string]any{"closed_here": true, "unanswered": "[tools/call#3]"})
	if !strings.Contains(closeLog.Attrs["error"].String(), "exceeds the limit of 4096 bytes") {
		t.Errorf("the close's log line does not say why: %v", closeLog.Attrs)
	}
	_, err = callTool(testCtx(t), p, "echo", map[string]string{"text": "x"})
	checkText(t, callError(t, err, wire.NotSent, wire.CauseTooLarge), textNotSentTooLarge)
}

// The default limit (16 MiB) takes a message of a few MiB.
func TestDefaultSizeLimitTakesLargeMessages(t *testing.T) {
	p, rec := spawnServer(t, wire.Options{}, transport.StdioOptions{})
	initialize(t, p)
	res, err := callTool(testCtx(t), p, "oversize", map[string]int{"bytes": 3 << 20})
	if err != nil || res.Text() != "after oversize" {
		t.Fatalf("a 3 MiB message: %q, %v", res.Text(), err)
	}
	if len(rec.Find("message over the size limit; closing the connection")) != 0 {
		t.Error("a 3 MiB message was refused")
	}
}

// The server's own request to the host, with an id that collides with
// ours, is answered by the host's handler and not taken for an answer.
func TestServerRequestWithCollidingID(t *testing.T) {
	asked := make(chan string, 1)
	mux := wire.NewMux()
	mux.HandleFunc("roots/list", func(_ context.Context, r *wire.Request) (any, error) {
		asked <- string(r.ID())
		return map[string]any{"roots": []any{}}, nil
	})
	p, rec := spawnServer(t, wire.Options{Handler: mux}, transport.StdioOptions{})
	initialize(t, p) // id 1
	// Our ask_host calls are ids 2 and 3; each time the server asks the
	// host with the very id of the call still waiting for its answer.
	for _, id := range []int{2, 3} {
		res, err := callTool(testCtx(t), p, "ask_host", map[string]any{"method": "roots/list", "id": id})
		if err != nil || res.Text() != "asked" {
			t.Fatalf("ask_host: %q, %v", res.Text(), err)
		}
		if got := <-asked; got != []string{"", "", "2", "3"}[id] {
			t.Errorf("the handler saw id %s, want %d", got, id)
		}
	}
	echo(t, p, "after")
	if w := rec.AtLeast(slog.LevelWarn); len(w) != 0 {
		t.Errorf("logged:\n%s", rec.Dump())
	}
}
