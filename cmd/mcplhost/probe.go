package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/transport"
	"github.com/mcpl-go/mcpl/wire"
)

// version is mcplhost's version in clientInfo.
const version = "0.1.0"

// probeReport is what probe found, printed as text or as JSON.
type probeReport struct {
	Server     *probeServer    `json:"server"`
	MCPL       json.RawMessage `json:"mcpl"`
	Tools      []protocol.Tool `json:"tools"`
	ToolsError string          `json:"toolsError,omitempty"`
	Calls      []probeResult   `json:"calls"`
}

type probeServer struct {
	Name            string `json:"name,omitempty"`
	Version         string `json:"version,omitempty"`
	ProtocolVersion string `json:"protocolVersion,omitempty"`
}

type probeResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Text string `json:"text"`
}

func runProbe(args []string, stdout, stderr io.Writer) int {
	f, err := parseProbeFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "mcplhost probe: %v\n\n%s", err, probeUsage)
		return exitUsage
	}
	if f.help {
		fmt.Fprint(stdout, probeUsage)
		return exitOK
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx := context.Background()
	stream, err := openProbeStream(ctx, f, log)
	if err != nil {
		fmt.Fprintf(stderr, "mcplhost probe: %v\n", err)
		return exitFail
	}
	peer := wire.NewPeer(stream, wire.Options{Name: f.id, Timeout: f.timeout, Logger: log})
	defer peer.Close()

	var init protocol.InitializeResult
	err = peer.Call(ctx, protocol.MethodInitialize, protocol.InitializeParams{
		ProtocolVersion: protocol.ProtocolVersion,
		Capabilities:    protocol.ClientCapabilities{},
		ClientInfo:      protocol.Implementation{Name: "mcplhost", Version: version},
	}, &init)
	if err != nil {
		fmt.Fprintf(stderr, "mcplhost probe: the handshake failed: %v\n", err)
		return exitFail
	}
	// Some servers read exactly one message after their initialize answer
	// and drop it unless it is this one: it goes first, before anything.
	if err := peer.Notify(ctx, protocol.MethodInitialized, nil); err != nil {
		fmt.Fprintf(stderr, "mcplhost probe: the handshake failed: %v\n", err)
		return exitFail
	}

	rep := probeReport{MCPL: init.Capabilities.MCPL(), Calls: []probeResult{}}
	if init.ServerInfo != nil || init.ProtocolVersion != "" {
		rep.Server = &probeServer{ProtocolVersion: init.ProtocolVersion}
		if init.ServerInfo != nil {
			rep.Server.Name, rep.Server.Version = init.ServerInfo.Name, init.ServerInfo.Version
		}
	}
	rep.Tools, err = listTools(ctx, peer)
	if err != nil {
		rep.ToolsError = err.Error()
	}
	if !f.json {
		printHeader(stdout, f.id, rep)
	}
	for _, c := range f.calls {
		res := callTool(ctx, peer, f.id, c)
		rep.Calls = append(rep.Calls, res)
		if !f.json {
			printCall(stdout, res)
		}
	}
	if f.json {
		if rep.Tools == nil {
			rep.Tools = []protocol.Tool{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "mcplhost probe: %v\n", err)
			return exitFail
		}
	}
	return exitOK
}

func openProbeStream(ctx context.Context, f probeFlags, log *slog.Logger) (transport.Stream, error) {
	if f.url != "" {
		opts := transport.WebSocketOptions{Logger: log}
		if f.tokenEnv != "" {
			tok, ok := os.LookupEnv(f.tokenEnv)
			if !ok || tok == "" {
				return nil, fmt.Errorf("environment variable %s, named by --token-env, is not set", f.tokenEnv)
			}
			opts.Token = tok
		}
		dctx := ctx
		if f.timeout > 0 {
			var cancel context.CancelFunc
			dctx, cancel = context.WithTimeout(ctx, f.timeout)
			defer cancel()
		}
		return transport.DialWebSocket(dctx, f.url, opts)
	}
	return transport.Spawn(transport.Command{Argv: f.command, InheritEnv: f.inheritEnv},
		transport.StdioOptions{Logger: log.With("server", f.id)})
}

// maxToolPages bounds tools/list paging against a server whose cursor never
// ends.
const maxToolPages = 1000

// listTools lists every tool, following nextCursor.
func listTools(ctx context.Context, peer *wire.Peer) ([]protocol.Tool, error) {
	var tools []protocol.Tool
	seen := map[string]bool{}
	cursor := ""
	for range maxToolPages {
		var page protocol.ListToolsResult
		if err := peer.Call(ctx, protocol.MethodToolsList, protocol.ListToolsParams{Cursor: cursor}, &page); err != nil {
			return tools, err
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			return tools, nil
		}
		if seen[page.NextCursor] {
			return tools, fmt.Errorf("the server repeated the tools/list cursor %q; listing stopped", page.NextCursor)
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
	return tools, fmt.Errorf("tools/list went past %d pages; listing stopped", maxToolPages)
}

// callTool makes one call and renders its outcome as an agent would read it.
func callTool(ctx context.Context, peer *wire.Peer, server string, c probeCall) probeResult {
	var res protocol.CallToolResult
	err := peer.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: c.tool, Arguments: c.args}, &res)
	if err != nil {
		var ce *wire.CallError
		if !errors.As(err, &ce) {
			return probeResult{Name: c.tool, Text: err.Error()}
		}
		return probeResult{Name: c.tool, Text: ce.Error()}
	}
	text := res.Text()
	if res.IsError {
		if strings.TrimSpace(text) == "" {
			text = textToolErrorNoWords(server, c.tool)
		}
		return probeResult{Name: c.tool, Text: text}
	}
	if text == "" && len(res.Content) > 0 {
		b, _ := json.Marshal(res.Content)
		text = string(b)
	}
	return probeResult{Name: c.tool, OK: true, Text: text}
}

func printHeader(w io.Writer, id string, rep probeReport) {
	switch {
	case rep.Server == nil:
		fmt.Fprintf(w, "server %q: no serverInfo given\n", id)
	default:
		fmt.Fprintf(w, "server %q: %s %s", id, orDash(rep.Server.Name), rep.Server.Version)
		if rep.Server.ProtocolVersion != "" {
			fmt.Fprintf(w, " (protocol %s)", rep.Server.ProtocolVersion)
		}
		fmt.Fprintln(w)
	}
	if rep.MCPL == nil {
		fmt.Fprintln(w, "mcpl: none (a plain MCP server)")
	} else {
		fmt.Fprintf(w, "mcpl: %s\n", compact(rep.MCPL))
	}
	if rep.ToolsError != "" {
		fmt.Fprintf(w, "tools: error: %s\n", rep.ToolsError)
	}
	fmt.Fprintf(w, "tools (%d):\n", len(rep.Tools))
	for _, t := range rep.Tools {
		if t.Description != "" {
			fmt.Fprintf(w, "  %s: %s\n", t.Name, oneLine(t.Description))
		} else {
			fmt.Fprintf(w, "  %s\n", t.Name)
		}
	}
}

func printCall(w io.Writer, r probeResult) {
	if !r.OK {
		fmt.Fprintf(w, "call %s: error: %s\n", r.Name, r.Text)
		return
	}
	fmt.Fprintf(w, "call %s: ok\n", r.Name)
	if r.Text != "" {
		fmt.Fprintln(w, r.Text)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
