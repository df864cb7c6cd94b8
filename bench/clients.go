package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpl-go/mcpl/bench/internal/canned"
	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// A client makes tools/call round trips to its own echo server process.
type client interface {
	// Run makes n round trips with up to inflight of them outstanding at
	// once, and checks every answer. It gives up when ctx ends.
	Run(ctx context.Context, n, inflight int) error
	// ServerPID is the id of the client's server process.
	ServerPID() int
	// Close ends the client and its server process, and waits for the
	// process to be gone.
	Close() error
}

// clientNames are the clients, in the order a round starts from.
var clientNames = []string{"raw", "wire", "session", "host", "gosdk"}

// server says how to start an echo server.
type server struct {
	bin    string // the echoserver binary
	mcpl   bool   // advertise MCPL
	pidDir string // where each server writes its pid
}

// argv is the command line of the server for the named client.
func (s server) argv(name string) []string {
	a := []string{s.bin, "-pidfile", s.pidFile(name)}
	if s.mcpl {
		a = append(a, "-mcpl")
	}
	return a
}

// checkMCPL says whether a session or host saw what the server was
// started to be: with -mcpl, an MCPL server whose policy it accepted (the
// policy exchange ran, as with a real MCPL server); without, a plain MCP
// server.
func (s server) checkMCPL(advertised, accepted bool) error {
	switch {
	case s.mcpl && !(advertised && accepted):
		return fmt.Errorf("the echo server was started with -mcpl, but the policy exchange did not end accepted (advertised %v)", advertised)
	case !s.mcpl && advertised:
		return errors.New("the echo server was started as plain MCP, but advertised MCPL")
	}
	return nil
}

func (s server) pidFile(name string) string { return filepath.Join(s.pidDir, name+".pid") }

// pid reads the pid the named client's server wrote at its start. The host
// client calls it once its first round trip is done, so the file is there.
func (s server) pid(name string) (int, error) {
	b, err := os.ReadFile(s.pidFile(name))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// startClient starts the named client and its server, and makes one round
// trip to check it answers.
func startClient(ctx context.Context, name string, srv server) (client, error) {
	var (
		c   client
		err error
	)
	switch name {
	case "raw":
		c, err = startRaw(srv)
	case "wire":
		c, err = startWire(ctx, srv)
	case "session":
		c, err = startSession(ctx, srv)
	case "host":
		c, err = startHost(ctx, srv)
	case "gosdk":
		c, err = startGoSDK(ctx, srv)
	default:
		return nil, fmt.Errorf("no client %q (the clients: %s)", name, strings.Join(clientNames, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.Run(ctx, 1, 1); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: first call: %w", name, err)
	}
	return c, nil
}

// discard is the logger of every client: a benchmark logs nothing.
var discard = slog.New(slog.DiscardHandler)

// callParams is what every MCPL-side client sends.
var callParams = protocol.CallToolParams{Name: canned.Tool, Arguments: json.RawMessage(canned.Args)}

// runCalls makes n calls with inflight goroutines calling at once (each
// making its share), and checks that each answer carries the canned text.
// It returns the first failure.
func runCalls(ctx context.Context, n, inflight int, call func(context.Context) (string, error)) error {
	one := func(ctx context.Context) error {
		text, err := call(ctx)
		if err != nil {
			return err
		}
		if text != canned.Text {
			return fmt.Errorf("answer text %q, want the canned text", text)
		}
		return nil
	}
	if inflight <= 1 {
		for range n {
			if err := one(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	per, extra := n/inflight, n%inflight
	for g := range inflight {
		k := per
		if g < extra {
			k++
		}
		wg.Go(func() {
			for range k {
				if err := one(ctx); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// rawClient is the floor: a line written to the server's stdin and the
// same line read back from its stdout, with no JSON at all. Its server
// echoes a line that does not begin with '{' unchanged; the line is a
// tools/call request with '#' in front, so it is the size of the others.
type rawClient struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	r     *bufio.Reader
	line  []byte     // what is sent, newline included
	done  chan error // the result of cmd.Wait
	close sync.Once
}

func startRaw(srv server) (*rawClient, error) {
	argv := srv.argv("raw")
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &rawClient{
		cmd:   cmd,
		stdin: stdin,
		r:     bufio.NewReaderSize(stdout, 64<<10),
		line:  []byte(`#{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + canned.Tool + `","arguments":` + canned.Args + "}}\n"),
		done:  make(chan error, 1),
	}
	go func() { c.done <- cmd.Wait() }()
	return c, nil
}

// Run writes the line and reads it back, from one goroutine: with a window
// of inflight, it writes that many first, then writes one more each time
// one comes back. Each line is its own write(2), as each message is on the
// other clients' streams; the reads are buffered, as theirs are.
func (c *rawClient) Run(ctx context.Context, n, inflight int) error {
	// A read of a pipe can't be abandoned: when ctx ends, the server is
	// killed, and the read ends.
	stop := context.AfterFunc(ctx, func() { c.cmd.Process.Kill() })
	defer stop()
	send := func() error {
		_, err := c.stdin.Write(c.line)
		return err
	}
	sent := 0
	for ; sent < inflight && sent < n; sent++ {
		if err := send(); err != nil {
			return errors.Join(ctx.Err(), err)
		}
	}
	for range n {
		back, err := c.r.ReadSlice('\n')
		if err != nil {
			return errors.Join(ctx.Err(), err)
		}
		if !bytes.Equal(back, c.line) {
			return fmt.Errorf("the echo changed the line: %q", back)
		}
		if sent < n {
			if err := send(); err != nil {
				return errors.Join(ctx.Err(), err)
			}
			sent++
		}
	}
	return nil
}

func (c *rawClient) ServerPID() int { return c.cmd.Process.Pid }

// Close closes the server's stdin, which ends it; it is killed if it has
// not gone within 5 seconds.
func (c *rawClient) Close() error {
	var err error
	c.close.Do(func() {
		c.stdin.Close()
		select {
		case err = <-c.done:
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
			err = <-c.done
		}
	})
	return err
}

// spawn starts the named client's server with the project's transport.
func spawn(srv server, name string) (*transport.Process, error) {
	return transport.Spawn(transport.Command{Argv: srv.argv(name)}, transport.StdioOptions{Logger: discard})
}

// wireClient calls through a bare wire.Peer over transport.Spawn: the
// JSON-RPC peer alone, after a plain MCP initialize.
type wireClient struct {
	peer *wire.Peer
	pid  int
}

func startWire(ctx context.Context, srv server) (*wireClient, error) {
	proc, err := spawn(srv, "wire")
	if err != nil {
		return nil, err
	}
	c := &wireClient{peer: wire.NewPeer(proc, wire.Options{Name: "echo", Logger: discard}), pid: proc.Pid()}
	params := protocol.InitializeParams{
		ProtocolVersion: protocol.ProtocolVersion,
		ClientInfo:      protocol.Implementation{Name: "mcplbench", Version: "0.1.0"},
	}
	var init protocol.InitializeResult
	if err := c.peer.Call(ctx, protocol.MethodInitialize, params, &init); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.peer.Notify(ctx, protocol.MethodInitialized, nil); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *wireClient) Run(ctx context.Context, n, inflight int) error {
	return runToolCalls(ctx, n, inflight, c.peer)
}

// caller is what wire.Peer and session.Session share: Call.
type caller interface {
	Call(ctx context.Context, method string, params, result any, opts ...wire.CallOption) error
}

// runToolCalls makes n tools/call calls through c, inflight at once.
func runToolCalls(ctx context.Context, n, inflight int, c caller) error {
	return runCalls(ctx, n, inflight, func(ctx context.Context) (string, error) {
		var res protocol.CallToolResult
		err := c.Call(ctx, protocol.MethodToolsCall, callParams, &res)
		return res.Text(), err
	})
}

func (c *wireClient) ServerPID() int { return c.pid }
func (c *wireClient) Close() error   { return c.peer.Close() }

// sessionClient calls through internal/session: the handshake, with
// MCPL's policy exchange when the server advertises MCPL, then
// Session.Call.
type sessionClient struct {
	s   *session.Session
	pid int
}

func startSession(ctx context.Context, srv server) (*sessionClient, error) {
	var pid int
	s, err := session.Connect(ctx, session.Config{
		ID: "echo",
		Dial: func(ctx context.Context) (transport.Stream, error) {
			p, err := spawn(srv, "session")
			if err == nil {
				pid = p.Pid()
			}
			return p, err
		},
		Logger: discard,
	})
	if err != nil {
		return nil, err
	}
	st := s.State()
	if err := srv.checkMCPL(st.Advertisement != nil, st.Policy != nil && st.Policy.Outcome == grant.OutcomeAccepted); err != nil {
		s.Close()
		return nil, err
	}
	return &sessionClient{s: s, pid: pid}, nil
}

func (c *sessionClient) Run(ctx context.Context, n, inflight int) error {
	return runToolCalls(ctx, n, inflight, c.s)
}

func (c *sessionClient) ServerPID() int { return c.pid }

func (c *sessionClient) Close() error {
	err := c.s.Close()
	c.s.Wait()
	return err
}

// hostClient calls through the host: a config with the echo server as its
// one server, Start, then CallTool of "echo--echo", the path every caller
// of a server's tool takes.
type hostClient struct {
	h    *host.Host
	srv  server
	tool string
	pid  int
}

func startHost(ctx context.Context, srv server) (*hostClient, error) {
	argv, err := json.Marshal(srv.argv("host"))
	if err != nil {
		return nil, err
	}
	// A JSON array is a YAML flow sequence.
	yaml := "servers:\n  - id: echo\n    command: " + string(argv) + "\n"
	cfg, err := config.Parse([]byte(yaml), "bench.yaml", srv.pidDir)
	if err != nil {
		return nil, err
	}
	h, err := host.New(host.Options{Logger: discard})
	if err != nil {
		return nil, err
	}
	c := &hostClient{h: h, srv: srv, tool: "echo--" + canned.Tool}
	if err := h.Start(cfg); err != nil {
		c.Close()
		return nil, err
	}
	select {
	case <-h.Settled():
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
	if !slices.ContainsFunc(h.Tools(), func(t host.Tool) bool { return t.Name == c.tool }) {
		c.Close()
		return nil, fmt.Errorf("the host lists no tool %s: did the server connect?", c.tool)
	}
	st, _ := h.Server("echo")
	if err := srv.checkMCPL(st.Advertisement != nil, st.Policy == grant.OutcomeAccepted); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *hostClient) Run(ctx context.Context, n, inflight int) error {
	args := json.RawMessage(canned.Args)
	err := runCalls(ctx, n, inflight, func(ctx context.Context) (string, error) {
		res, err := c.h.CallTool(ctx, c.tool, args)
		return res.Text(), err
	})
	if err == nil && c.pid == 0 {
		c.pid, err = c.srv.pid("host")
	}
	return err
}

func (c *hostClient) ServerPID() int { return c.pid }
func (c *hostClient) Close() error   { return c.h.Close() }

// goSDKClient calls through the official Go SDK's client over its
// CommandTransport: Connect (which tries server/discover, then falls back
// to initialize), then ClientSession.CallTool.
type goSDKClient struct {
	cs  *mcp.ClientSession
	pid int
}

func startGoSDK(ctx context.Context, srv server) (*goSDKClient, error) {
	argv := srv.argv("gosdk")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	cl := mcp.NewClient(&mcp.Implementation{Name: "mcplbench", Version: "0.1.0"}, nil)
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		return nil, err
	}
	return &goSDKClient{cs: cs, pid: cmd.Process.Pid}, nil
}

func (c *goSDKClient) Run(ctx context.Context, n, inflight int) error {
	args := json.RawMessage(canned.Args)
	return runCalls(ctx, n, inflight, func(ctx context.Context) (string, error) {
		res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: canned.Tool, Arguments: args})
		if err != nil {
			return "", err
		}
		if len(res.Content) != 1 {
			return "", fmt.Errorf("%d content blocks", len(res.Content))
		}
		t, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			return "", fmt.Errorf("content of type %T", res.Content[0])
		}
		return t.Text, nil
	})
}

func (c *goSDKClient) ServerPID() int { return c.pid }
func (c *goSDKClient) Close() error   { return c.cs.Close() }
