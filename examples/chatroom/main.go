// Command chatroom is an MCPL server that simulates a chat platform, built
// on the server SDK: channels #general (open from the start), #random and
// #dev, which has threads (its descriptor declares RFC-011 publish target
// exact, the others root); simulated people who post on a schedule from a
// script, some messages addressing the agent (tagged chat:mention), some
// in a thread, some direct messages to the agent (push events naming a DM
// channel the room never registers), most of them ambient. It declares
// two feature sets, chat.messaging, using all seven channel capabilities,
// and chat.direct, for DMs, and registers its channels only when the host
// enables the first. It honours channels/open, channels/close, channels/publish,
// channels/typing, channels/acknowledge and the outgoing stream, writes a
// transcript of the room (the agent's messages, typing and reactions
// included) to stderr, or to the file -transcript names, and exits when
// its stdin closes. README.md describes the script format and the flags.
//
//	go run ./examples/chatroom -speed 4
package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

// version is the chatroom's serverInfo version.
const version = "0.1.0"

//go:embed default.script
var defaultScript []byte

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr))
}

// run is the command: it returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("chatroom", flag.ContinueOnError)
	fs.SetOutput(stderr)
	script := fs.String("script", "", "the script `file` people follow (default: the built-in script)")
	speed := fs.Float64("speed", 1, "play the script this many times as fast")
	loop := fs.Bool("loop", false, "start the script over after its last post")
	listen := fs.String("listen", "", "serve WebSocket on this `address` (host:port) instead of stdio, until SIGINT or SIGTERM")
	verbose := fs.Bool("v", false, "log operator detail (info level) to stderr")
	quiet := fs.Bool("q", false, "write no transcript to stderr")
	transcriptFile := fs.String("transcript", "", "write the transcript to `file` (appended to; a FIFO works) instead of stderr")
	run := fs.String("run", "", "message ids are chatroom-`RUN`-N (chatroom-N when empty: -run=) for every connection, instead of a random RUN for each")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *speed <= 0 || (*quiet && *transcriptFile != "") {
		fmt.Fprintln(stderr, "chatroom: usage: chatroom [-script file] [-speed n>0] [-loop] [-listen addr] [-run id] [-v] [-q | -transcript file]")
		return 2
	}
	src, name := defaultScript, "the built-in script"
	if *script != "" {
		b, err := os.ReadFile(*script)
		if err != nil {
			fmt.Fprintln(stderr, "chatroom:", err)
			return 1
		}
		src, name = b, *script
	}
	posts, err := ParseScript(bytes.NewReader(src), Channels)
	if err != nil {
		fmt.Fprintf(stderr, "chatroom: %s: %v\n", name, err)
		return 1
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	transcript := stderr
	switch {
	case *quiet:
		transcript = io.Discard
	case *transcriptFile != "":
		// Opened before the room starts, so a file that can't be written
		// stops it at once. A FIFO's open waits for its reader: a program
		// that follows the room (mcplhost demo) opens its end first.
		f, err := os.OpenFile(*transcriptFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintln(stderr, "chatroom:", err)
			return 1
		}
		defer f.Close()
		transcript = f
	}
	room := NewRoom(posts, *speed, *loop, transcript, log)
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "run" {
			room.WithRun(*run)
		}
	})
	s := room.Server(version)

	if *listen == "" {
		// stdout carries the protocol; the transcript and logs go to stderr.
		if err := s.ServeStdio(ctx); err != nil {
			log.Error("connection ended", "error", err.Error())
			return 1
		}
		return 0
	}
	return serveWebSocket(ctx, s, *listen, stderr, log)
}

// serveWebSocket serves the room on addr, one connection per WebSocket
// request, until SIGINT or SIGTERM.
func serveWebSocket(ctx context.Context, h interface {
	http.Handler
	Close() error
}, addr string, stderr io.Writer, log *slog.Logger) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "chatroom:", err)
		return 1
	}
	fmt.Fprintf(stderr, "chatroom: serving WebSocket on ws://%s/\n", ln.Addr())
	srv := &http.Server{Handler: h}
	srv.RegisterOnShutdown(func() { h.Close() })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		log.Error("serving stopped", "error", err.Error())
		return 1
	case <-ctx.Done():
	}
	srv.Shutdown(context.Background())
	<-errc
	return 0
}
