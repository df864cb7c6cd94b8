package wire_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// pipes closes the host's ends of the two pipes to a server in this
// process: the server reads EOF, and its writes fail.
type pipes struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p pipes) Close() error {
	p.w.Close()
	p.r.Close()
	return nil
}

// goSDKServer runs a server of the official Go MCP SDK in this process,
// over a pair of pipes, with a tool "block" that runs until its ctx ends
// and then says why on ended, and a tool "echo". It returns a peer on the
// host's end; the test's cleanup closes it and waits for the server's run
// to end.
func goSDKServer(t *testing.T, opts wire.Options) (p *wire.Peer, started <-chan struct{}, ended <-chan error) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "gosdk", Version: "1"}, nil)
	startc, endc := make(chan struct{}, 4), make(chan error, 4)
	mcp.AddTool(srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		startc <- struct{}{}
		<-ctx.Done()
		endc <- ctx.Err()
		return nil, nil, ctx.Err()
	})
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	hostR, srvW := io.Pipe()
	srvR, hostW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx, &mcp.IOTransport{Reader: srvR, Writer: srvW}) }()
	p, _ = newPeer(t, transport.NewLineStream(hostR, hostW, pipes{hostR, hostW}, 0), opts)
	t.Cleanup(func() {
		p.Close()
		cancel()
		select {
		case <-ran:
		case <-time.After(15 * time.Second):
			t.Error("the go-sdk server's run did not end")
		}
	})
	return p, startc, endc
}

// Against the official Go MCP SDK's server: a call this side abandons,
// by its caller's ctx or by its deadline, is cancelled there, so the
// tool handler's ctx ends; the connection goes on.
func TestCancelReachesGoSDKServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []wire.CallOption
		cancel bool
		cause  wire.Cause
	}{
		{"caller gives up", nil, true, wire.CauseCanceled},
		{"deadline", []wire.CallOption{wire.WithTimeout(200 * time.Millisecond)}, false, wire.CauseDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, started, ended := goSDKServer(t, wire.Options{})
			initialize(t, p)
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := callTool(ctx, p, "block", map[string]any{}, tc.opts...)
				errc <- err
			}()
			select {
			case <-started:
			case <-time.After(15 * time.Second):
				t.Fatal("the go-sdk tool did not start")
			}
			if tc.cancel {
				cancel()
			}
			callError(t, <-errc, wire.NoResponse, tc.cause)
			select {
			case err := <-ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the go-sdk handler's ctx ended with %v, want it cancelled", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the go-sdk handler's ctx did not end: the cancellation did not reach it")
			}
			echo(t, p, "after the cancellation")
		})
	}
}
