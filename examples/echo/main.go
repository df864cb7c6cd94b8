// Command echo is the smallest MCPL server: over stdio it offers one tool,
// echo, that answers with the text it is given, and advertises MCPL 0.5 with
// no privileged capabilities. It exits when its stdin closes.
//
//	go run ./cmd/mcplhost probe -- go run ./examples/echo
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

type echoArgs struct {
	Text string `json:"text"`
}

func main() {
	// It asks for nothing, so the SDK accepts whatever policy it is given.
	s := server.New("echo", "0.1.0", &server.Options{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	server.AddTool(s, server.Tool{Name: "echo", Description: "Answers with the text it is given."},
		func(_ context.Context, in echoArgs) (protocol.CallToolResult, error) {
			return server.TextResult(in.Text), nil
		})
	if err := s.ServeStdio(context.Background()); err != nil {
		slog.Error("echo: " + err.Error())
		os.Exit(1)
	}
}
