package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// messageCases are lines a server may write, with whether they are
// JSON-RPC messages.
var messageCases = []struct {
	line    string
	message bool
}{
	{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, true},
	{`{"jsonrpc":"2.0","method":"notifications/message","params":{"x":[1,{"y":null}]}}`, true},
	{`  {"id":null,"method":"ping"}  `, true},
	{`{"id":7,"result":{}}`, true},
	{`{"id":7,"result":null}`, true},
	{`{"id":7,"error":{"code":-1,"message":"no"}}`, true},
	{`{"id":7,"error":null}`, true},
	{`{"\u0069d":7,"result":1}`, true},
	{`{"method":"\u0070ing"}`, true},
	{`{"id":1,"method":5}`, true},  // wire answers it -32600
	{`{"id":1,"method":""}`, true}, // likewise
	{`{"id":1,"method":"","result":1}`, false},
	{`{"id":1,"method":"","error":null}`, false},
	{`{"id":null,"method":5}`, false},
	{`{"method":""}`, false},
	{`{"method":null}`, false},
	{`{"method":"ping","method":""}`, false},
	{`{"id":7}`, false},
	{`{"result":1}`, false},
	{`{}`, false},
	{`{"no":"jsonrpc"}`, false},
	{`{"ID":1,"Method":"ping"}`, false},
	{`{"method":"ping"} trailing`, false},
	{`{"method":"ping"`, false},
	{`{"method":"ping",}`, false},
	{`Server starting...`, false},
	{`null`, false},
	{`42`, false},
	{`"text"`, false},
	{`[{"method":"ping"}]`, false},
	{`{`, false},
}

// TestIsMessage pins which lines are JSON-RPC messages.
func TestIsMessage(t *testing.T) {
	for _, tc := range messageCases {
		if got := isMessage([]byte(tc.line)); got != tc.message {
			t.Errorf("isMessage(%s) = %v, want %v", tc.line, got, tc.message)
		}
	}
}

// skipCounter counts wire's debug records of a skipped line.
type skipCounter struct{ n *atomic.Int32 }

func (skipCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c skipCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "skipped a line that is not a JSON-RPC message" {
		c.n.Add(1)
	}
	return nil
}
func (c skipCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c skipCounter) WithGroup(string) slog.Handler      { return c }

// TestIsMessageAgreesWithWire holds isMessage to what package wire does
// with each line: a wire.Peer skips exactly the lines isMessage says are
// not messages.
func TestIsMessageAgreesWithWire(t *testing.T) {
	for _, tc := range messageCases {
		var skipped atomic.Int32
		synced := make(chan struct{}, 1)
		ours, theirs := transport.Pipe(0)
		peer := wire.NewPeer(ours, wire.Options{
			Logger: slog.New(skipCounter{&skipped}),
			Handler: wire.HandlerFunc(func(_ context.Context, req *wire.Request) (any, error) {
				if req.Method == "test/sync" {
					synced <- struct{}{}
				}
				return nil, wire.ErrMethodNotFound
			}),
		})
		drained := make(chan struct{})
		go func() { // takes the peer's answers
			defer close(drained)
			for {
				if _, err := theirs.Read(); err != nil {
					return
				}
			}
		}()
		ctx := context.Background()
		if err := theirs.Write(ctx, []byte(tc.line)); err != nil {
			t.Fatal(err)
		}
		// The reader takes lines in order: once this notification is
		// handled, the line before it has been read.
		if err := theirs.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"test/sync"}`)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-synced:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the sync notification was not handled", tc.line)
		}
		peer.Close()
		<-drained
		if wireSkipped := skipped.Load() == 1; wireSkipped == isMessage([]byte(tc.line)) {
			t.Errorf("%s: wire skipped it: %v; isMessage: %v", tc.line, wireSkipped, !wireSkipped)
		}
	}
}

// TestNoiseStream checks the count and the first line kept, cut to
// maxNoiseFirst bytes, and that every line is passed on as it came.
func TestNoiseStream(t *testing.T) {
	ours, theirs := transport.Pipe(0)
	ns := &noiseStream{Stream: ours}
	defer ns.Close()
	if ns.noise() != nil {
		t.Fatalf("noise before any line = %+v, want nil", ns.noise())
	}
	long := strings.Repeat("é", maxNoiseFirst) // 2 bytes each
	lines := []string{`{"jsonrpc":"2.0","method":"ping"}`, long, `{"id":1,"result":{}}`, "log line", `{"no":"jsonrpc"}`}
	for _, l := range lines {
		if err := theirs.Write(context.Background(), []byte(l)); err != nil {
			t.Fatal(err)
		}
		got, err := ns.Read()
		if err != nil || string(got) != l {
			t.Fatalf("Read = %q, %v; want %q", got, err, l)
		}
	}
	want := probeNoise{Lines: 3, First: strings.Repeat("é", maxNoiseFirst/2) + "…"}
	if got := ns.noise(); got == nil || *got != want {
		t.Errorf("noise = %+v, want %+v", got, want)
	}
	theirs.Close()
	if _, err := ns.Read(); err == nil {
		t.Error("Read after the other end closed succeeded")
	}
	if got := ns.noise(); got.Lines != 3 {
		t.Errorf("a failed Read was counted: %d lines", got.Lines)
	}
}

// TestNoiseLine pins the warning's texts, and checks that a hostile first
// line stays within the one escaped line.
func TestNoiseLine(t *testing.T) {
	for _, tc := range []struct {
		n    probeNoise
		want string
	}{
		{probeNoise{Lines: 1, First: "Server starting..."},
			`warning: the server wrote 1 line to stdout that is not a JSON-RPC message ("Server starting..."); it was skipped: on stdio every stdout line must be one whole JSON-RPC message (logs go to stderr)`},
		{probeNoise{Lines: 12, First: `{"level":"info"}`},
			`warning: the server wrote 12 lines to stdout that are not JSON-RPC messages (the first: "{\"level\":\"info\"}"); they were skipped: on stdio every stdout line must be one whole JSON-RPC message (logs go to stderr)`},
	} {
		if got := noiseLine(&tc.n); got != tc.want {
			t.Errorf("noiseLine(%+v) =\n%s\nwant:\n%s", tc.n, got, tc.want)
		}
	}
	for _, h := range hostileStrings {
		var b bytes.Buffer
		printNoise(&b, "mcplhost probe: ", &probeNoise{Lines: 2, First: h})
		out := b.String()
		if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "mcplhost probe: warning: the server wrote 2 lines") {
			t.Errorf("printNoise with %q = %q: not one line", h, out)
		}
		if r := rawControl(out); r >= 0 {
			t.Errorf("printNoise with %q = %q: %U raw", h, out, r)
		}
	}
	var b bytes.Buffer
	printNoise(&b, "", nil)
	if b.Len() != 0 {
		t.Errorf("printNoise(nil) printed %q", b.String())
	}
}

// TestProbeNoiseWebSocket: over WebSocket a frame that is not a JSON-RPC
// message is skipped too, but it is no stdout line: no warning, and
// stdoutNoise is null.
func TestProbeNoiseWebSocket(t *testing.T) {
	url := startWebSocketServer(t)
	code, stdout, stderr := runCLI("probe", "--url", url, "--call", "noise", `{"lines":["not a message"]}`)
	if code != exitOK || !strings.Contains(stdout, "call noise: ok\nafter noise\n") || strings.Contains(stdout+stderr, "warning") {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI("probe", "--json", "--url", url, "--call", "noise", `{"lines":["not a message"]}`)
	if code != exitOK || !strings.Contains(stdout, `"stdoutNoise": null,`) {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
