// Command echo is the smallest MCPL server: over stdio it offers one tool,
// echo, that answers with the text it is given, and advertises MCPL 0.5 with
// no privileged capabilities. It exits when its stdin closes.
//
//	go run ./cmd/mcplhost probe -- go run ./examples/echo
package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/transport"
	"github.com/mcpl-go/mcpl/wire"
)

var echoTool = protocol.Tool{
	Name:        "echo",
	Description: "Answers with the text it is given.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
}

func main() {
	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodInitialize, func(context.Context, *wire.Request) (any, error) {
		return protocol.InitializeResult{
			ProtocolVersion: protocol.ProtocolVersion,
			Capabilities: protocol.ServerCapabilities{
				Tools:        json.RawMessage(`{}`),
				Experimental: map[string]json.RawMessage{"mcpl": json.RawMessage(`{"version":"0.5"}`)},
			},
			ServerInfo: &protocol.Implementation{Name: "echo", Version: "0.1.0"},
		}, nil
	})
	mux.HandleFunc(protocol.MethodInitialized, func(context.Context, *wire.Request) (any, error) { return nil, nil })
	// The host's initial policy: this server asks for nothing, so it takes
	// whatever it is given.
	mux.HandleFunc("featureSets/update", func(context.Context, *wire.Request) (any, error) {
		return map[string]bool{"accepted": true}, nil
	})
	mux.HandleFunc(protocol.MethodToolsList, func(context.Context, *wire.Request) (any, error) {
		return protocol.ListToolsResult{Tools: []protocol.Tool{echoTool}}, nil
	})
	mux.HandleFunc(protocol.MethodToolsCall, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.CallToolParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &wire.Error{Code: wire.CodeInvalidParams, Message: "tools/call params are not an object with a name"}
		}
		if p.Name != echoTool.Name {
			return nil, &wire.Error{Code: wire.CodeInvalidParams, Message: "there is no tool named " + p.Name + "; the only tool is echo"}
		}
		var args struct {
			Text string `json:"text"`
		}
		json.Unmarshal(p.Arguments, &args)
		return protocol.TextResult(args.Text, false), nil
	})
	peer := wire.NewPeer(transport.NewLineStream(os.Stdin, os.Stdout, nil, 0), wire.Options{
		Name:    "host",
		Handler: mux,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	<-peer.Done()
}
