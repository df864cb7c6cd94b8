package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

const demoUsage = `usage: mcplhost demo [--color auto|always|never]

Runs the whole thing on its own, offline: builds examples/chatroom (a
simulated chat platform, an MCPL server) and runs it as a subprocess, with
a scripted agent (no API key, no network) and a SQLite store in a fresh
temporary folder, and shows what happens as it happens: who said what
where, the channels the agent joins and declines, its tool calls and their
outcomes, what it is told. It ends by itself, within 30 seconds, with a
summary and the paths of its transcript and store.

It needs the Go toolchain and this repository's source (go run
./cmd/mcplhost demo from a clone).

Exit status: 0 when the story ran through; 1 when it could not start or
did not finish in time.
`

// The demo's room: each post after the first waits for the agent's answer.
const demoRoom = `+1s #general alice @agent: morning! what did we decide about the release date?
+agent #dev dave @agent: can you review PR 12? it touches the retry logic
+agent #random carol @agent: settle this for us: tabs or spaces?
`

// The demo's agent: it answers alice, joins #dev when invited (and trips
// over a channel that doesn't exist on the way), and declines #random
// with an acknowledgment.
const demoScript = `steps:
  - say: Morning, alice! We settled on Thursday for the release.
  - call:
      - {tool: channel_open, args: {channelId: "chatroom:#dev", serverId: room}}
      - {tool: room--history, args: {channel: "#nope"}}
  - say: "Joined #dev. Looking at PR 12 now; the retry logic is the part to check."
  - call: [{tool: channel_decline, args: {channelId: "chatroom:#random", serverId: room, messageId: chatroom-3, acknowledge: "👀"}}]
  - silent: true
`

// demoTurns is how many turns the story has.
const demoTurns = 3

// demoDeadline bounds the demo.
const demoDeadline = 30 * time.Second

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	color := "auto"
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--color", "-color":
			if i+1 >= len(args) || (args[i+1] != "auto" && args[i+1] != "always" && args[i+1] != "never") {
				return demoUsageError(stderr, "--color takes auto, always or never")
			}
			color = args[i+1]
			i++
		case "-h", "--help":
			printer{stdout}.text(demoUsage)
			return exitOK
		default:
			return demoUsageError(stderr, "unknown argument "+a)
		}
	}
	out := printer{stdout}
	dir, err := os.MkdirTemp("", "mcplhost-demo-")
	if err != nil {
		printer{stderr}.linef("mcplhost demo: %v", err)
		return exitFail
	}
	out.linef("mcplhost demo: building examples/chatroom in %s …", dir)
	room, err := buildDemoRoom(ctx, dir)
	if err != nil {
		printer{stderr}.linef("mcplhost demo: building the chat room: %v", err)
		return exitFail
	}
	files := map[string]string{"room.script": demoRoom, "ada.yaml": demoScript}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			printer{stderr}.linef("mcplhost demo: %v", err)
			return exitFail
		}
	}
	cfgText := fmt.Sprintf(`store: ./demo.db
servers:
  - id: room
    command: [%q, -q, -script, ./room.script]
    channels: {acknowledgeSeen: "👀"}
agents:
  - name: ada
    model: {provider: scripted, script: ./ada.yaml}
    system: You are Ada, in the team's chat room.
`, room)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		printer{stderr}.linef("mcplhost demo: %v", err)
		return exitFail
	}
	cfg, ok := loadConfig("demo", cfgPath, stderr)
	if !ok {
		return exitFail
	}
	return playDemo(ctx, cfg, dir, color == "always" || (color == "auto" && isTerminal(stdout)), stdout, stderr)
}

// playDemo runs the host on cfg until the story's turns have ended, and
// sums it up.
func playDemo(ctx context.Context, cfg *config.Config, dir string, color bool, stdout, stderr io.Writer) int {
	out := printer{stdout}
	transcriptPath := filepath.Join(dir, "transcript.jsonl")
	tf, err := os.OpenFile(transcriptPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		printer{stderr}.linef("mcplhost demo: %v", err)
		return exitFail
	}
	defer tf.Close()
	st, err := sqlite.Open(cfg.Store, nil)
	if err != nil {
		printer{stderr}.linef("mcplhost demo: %v", err)
		return exitFail
	}
	defer st.Close()
	acct := &demoAccount{tp: transcriptPrinter{p: out, color: color}, ended: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(stderr, logOptions(slog.LevelWarn)))
	h, err := host.New(host.Options{Logger: log, Store: st, Transcript: io.MultiWriter(tf, acct), RefsDir: filepath.Join(dir, "refs")})
	if err != nil {
		printer{stderr}.linef("mcplhost demo: %v", err)
		return exitFail
	}
	out.linef("mcplhost demo: the chat room has #general (open), #dev and #random; ada is a scripted agent")
	out.linef("")
	if err := h.Start(cfg); err != nil {
		h.Close()
		printer{stderr}.linef("mcplhost demo: %v", err)
		return exitFail
	}
	t := time.NewTimer(demoDeadline)
	defer t.Stop()
	code := exitOK
	select {
	case <-acct.ended:
	case <-t.C:
		printer{stderr}.linef("mcplhost demo: the story did not finish within %s", demoDeadline)
		code = exitFail
	case <-ctx.Done():
		code = exitFail
	}
	h.Close()
	s := acct.summary()
	out.linef("")
	out.linef("mcplhost demo: %d turns, %d replies delivered, %d tool calls (%d failed), %d notices", s.turns, s.delivered, s.tools, s.toolsFailed, s.notices)
	out.linef("  transcript: %s (mcplhost transcript %s)", transcriptPath, transcriptPath)
	out.linef("  store:      %s (mcplhost channels --store %s)", cfg.Store, cfg.Store)
	return code
}

// buildDemoRoom builds examples/chatroom into dir and returns the binary:
// from this repository's source, found beside this file.
func buildDemoRoom(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "chatroom")
	_, file, _, ok := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "examples", "chatroom")
	if _, err := os.Stat(src); !ok || err != nil {
		return "", fmt.Errorf("this repository's examples/chatroom is not here (%s): run the demo from a clone, with go run ./cmd/mcplhost demo", src)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, b)
	}
	return bin, nil
}

// demoAccount is the transcript's reader: it prints each event for a
// person as it is written, counts, and says when the story's turns have
// all ended.
type demoAccount struct {
	tp transcriptPrinter

	mu      sync.Mutex
	buf     []byte
	sum     demoSummary
	ended   chan struct{}
	endOnce sync.Once
}

type demoSummary struct {
	turns, delivered, tools, toolsFailed, notices int
}

func (a *demoAccount) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buf = append(a.buf, p...)
	for {
		i := bytes.IndexByte(a.buf, '\n')
		if i < 0 {
			break
		}
		var ev agent.Event
		if json.Unmarshal(a.buf[:i], &ev) == nil {
			a.tp.event(ev)
			a.count(ev)
		}
		a.buf = a.buf[i+1:]
	}
	return len(p), nil
}

func (a *demoAccount) count(ev agent.Event) {
	switch ev.Event {
	case agent.EventTurnEnd:
		a.sum.turns++
		if a.sum.turns >= demoTurns {
			a.endOnce.Do(func() { close(a.ended) })
		}
	case agent.EventSpeech:
		if ev.Outcome == "delivered" {
			a.sum.delivered++
		}
	case agent.EventTool:
		a.sum.tools++
		if ev.Outcome != "ok" {
			a.sum.toolsFailed++
		}
	case agent.EventNotice:
		a.sum.notices++
	}
}

func (a *demoAccount) summary() demoSummary {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sum
}

func demoUsageError(stderr io.Writer, msg string) int {
	printer{stderr}.usageError(demoUsage, "mcplhost demo: %s", msg)
	return exitUsage
}
