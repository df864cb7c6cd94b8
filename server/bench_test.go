package server_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/protocol"
)

// BenchmarkStdioEcho: one tools/call round trip from a session to
// examples/echo, a server written on this SDK, run as a subprocess over
// its stdin and stdout (ServeStdio): the SDK server's side of a round
// trip, with the host's. bench/ measures the host's side alone, against a
// canned server.
func BenchmarkStdioEcho(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "echo")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/echo").CombinedOutput(); err != nil {
		b.Fatalf("go build examples/echo: %v\n%s", err, out)
	}
	var h sessionHost
	sess, err := session.Connect(b.Context(), h.config("echo", func(context.Context) (transport.Stream, error) {
		return transport.Spawn(transport.Command{Argv: []string{bin}}, transport.StdioOptions{Logger: quiet})
	}))
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	params := protocol.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"a short text, about as long as a chat message is"}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var res protocol.CallToolResult
		if err := sess.Call(ctx, protocol.MethodToolsCall, params, &res); err != nil || res.IsError {
			b.Fatal(res, err)
		}
	}
}
