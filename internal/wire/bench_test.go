package wire_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	. "github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// The benchmarks compare a Call round trip with the floor: a raw line echo
// over the same stream, with no JSON-RPC at all. docs/performance.md has
// the numbers and the commands that produce them.

// benchMsg is the payload: an MCP tools/call of a short text, about the size
// of a typical tool call.
var benchArgs = json.RawMessage(`{"text":"the quick brown fox jumps over the lazy dog"}`)

func benchRequestLine(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":` + string(benchArgs) + `}}`)
}

// rawEcho sends each message back unchanged until the stream ends.
func rawEcho(s transport.Stream) {
	for {
		msg, err := s.Read()
		if err != nil {
			return
		}
		if s.Write(context.Background(), msg) != nil {
			return
		}
	}
}

// echoServer answers tools/call echo with the text, as the test server does.
func echoServer(s transport.Stream) *Peer {
	return NewPeer(s, Options{Name: "host", Logger: benchDiscard(), Handler: HandlerFunc(func(_ context.Context, r *Request) (any, error) {
		var p protocol.CallToolParams
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return nil, err
		}
		var a struct {
			Text string `json:"text"`
		}
		json.Unmarshal(p.Arguments, &a)
		return protocol.TextResult(a.Text, false), nil
	})})
}

// benchRaw runs the floor: b.N messages echoed, with window in flight.
func benchRaw(b *testing.B, s transport.Stream, window int) {
	msg := benchRequestLine(1)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for ; sent < window && sent < b.N; sent++ {
		if err := s.Write(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
	for got := 0; got < b.N; got++ {
		back, err := s.Read()
		if err != nil {
			b.Fatal(err)
		}
		if len(back) != len(msg) {
			b.Fatalf("echo changed the message: %q", back)
		}
		if sent < b.N {
			if err := s.Write(ctx, msg); err != nil {
				b.Fatal(err)
			}
			sent++
		}
	}
}

// benchCall runs b.N calls with inflight goroutines calling at once.
func benchCall(b *testing.B, p *Peer, inflight int) {
	ctx := context.Background()
	params := protocol.CallToolParams{Name: "echo", Arguments: benchArgs}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per, extra := b.N/inflight, b.N%inflight
	for g := range inflight {
		n := per
		if g < extra {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res protocol.CallToolResult
			for range n {
				if err := p.Call(ctx, protocol.MethodToolsCall, params, &res); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkPipe(b *testing.B) {
	for _, inflight := range []int{1, 64} {
		name := "inflight=" + strconv.Itoa(inflight)
		b.Run("kind=raw/"+name, func(b *testing.B) {
			host, srv := transport.Pipe(0)
			go rawEcho(srv)
			defer host.Close()
			benchRaw(b, host, inflight)
		})
		b.Run("kind=call/"+name, func(b *testing.B) {
			host, srv := transport.Pipe(0)
			server := echoServer(srv)
			defer server.Close()
			p := NewPeer(host, Options{Name: "bench", Logger: benchDiscard()})
			defer p.Close()
			benchCall(b, p, inflight)
		})
	}
}

func BenchmarkStdio(b *testing.B) {
	bin := testserver.Binary(b)
	for _, inflight := range []int{1, 64} {
		name := "inflight=" + strconv.Itoa(inflight)
		b.Run("kind=raw/"+name, func(b *testing.B) {
			s, err := transport.Spawn(transport.Command{Argv: []string{bin, "-raw-echo"}}, transport.StdioOptions{Logger: benchDiscard()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchRaw(b, s, inflight)
		})
		b.Run("kind=hostonly/"+name, func(b *testing.B) {
			s, err := transport.Spawn(transport.Command{Argv: []string{bin, "-canned"}}, transport.StdioOptions{Logger: benchDiscard()})
			if err != nil {
				b.Fatal(err)
			}
			p := NewPeer(s, Options{Name: "bench", Logger: benchDiscard()})
			defer p.Close()
			benchCall(b, p, inflight)
		})
		b.Run("kind=call/"+name, func(b *testing.B) {
			s, err := transport.Spawn(transport.Command{Argv: []string{bin}}, transport.StdioOptions{Logger: benchDiscard()})
			if err != nil {
				b.Fatal(err)
			}
			p := NewPeer(s, Options{Name: "bench", Logger: benchDiscard()})
			defer p.Close()
			benchCall(b, p, inflight)
		})
	}
}

func benchDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
