package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// version is mcplhost's version in clientInfo.
const version = "0.1.0"

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
	ev := &eventLog{out: stdout, json: f.json}
	var dialErr error
	sess, err := session.Connect(ctx, session.Config{
		ID: f.id,
		Dial: func(ctx context.Context) (transport.Stream, error) {
			s, err := openProbeStream(ctx, f, log)
			dialErr = err
			return s, err
		},
		Policy:         grant.Policy{Enable: f.enable, Disable: f.disable},
		RequestTimeout: f.timeout,
		Handler:        probeHandler{},
		OnInbound:      ev.add,
		Logger:         log,
		ClientName:     "mcplhost",
		ClientVersion:  version,
	})
	if dialErr != nil {
		fmt.Fprintf(stderr, "mcplhost probe: %v\n", dialErr)
		return exitFail
	}
	if errors.Is(err, session.ErrRefusedClose) {
		reason := strings.TrimPrefix(err.Error(), session.ErrRefusedClose.Error()+": ")
		fmt.Fprintf(stderr, "mcplhost probe: policy: refused (fallback close), so the connection is closed: %s\n", reason)
		return exitFail
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcplhost probe: the handshake failed: %s\n", handshakeError(err))
		return exitFail
	}
	defer sess.Close()

	st := sess.State()
	rep := newProbeReport(st)
	rep.Tools, err = sess.ListTools(ctx)
	if err != nil {
		rep.ToolsError = err.Error()
	}
	if st.Grant.Has("channels.register") {
		var list json.RawMessage
		if err := sess.Call(ctx, protocol.MethodChannelsList, struct{}{}, &list); err != nil {
			rep.ChannelsError = err.Error()
		} else {
			rep.Channels = list
		}
	}
	if !f.json {
		printHeader(stdout, f.id, rep)
		ev.goLive()
	}
	for _, c := range f.calls {
		res := callTool(ctx, sess, f.id, c)
		rep.Calls = append(rep.Calls, res)
		if !f.json {
			printCall(stdout, res)
		}
	}
	if f.wait > 0 {
		t := time.NewTimer(f.wait)
		<-t.C
	}
	if f.json {
		rep.Events = ev.all()
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

// handshakeError words a failed connect in one line.
func handshakeError(err error) string {
	var ce *wire.CallError
	if errors.As(err, &ce) {
		return ce.Error()
	}
	return err.Error()
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

// caller makes requests: a session, or a bare peer.
type caller interface {
	Call(ctx context.Context, method string, params, result any, opts ...wire.CallOption) error
}

// callTool makes one call and renders its outcome as an agent would read it.
func callTool(ctx context.Context, peer caller, server string, c probeCall) probeResult {
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
			text = host.ToolErrorNoWords(server, c.tool)
		}
		return probeResult{Name: c.tool, Text: text}
	}
	if text == "" && len(res.Content) > 0 {
		b, _ := json.Marshal(res.Content)
		text = string(b)
	}
	return probeResult{Name: c.tool, OK: true, Text: text}
}
