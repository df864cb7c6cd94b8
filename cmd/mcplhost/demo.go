package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

const demoUsage = `usage: mcplhost demo [--color auto|always|never] [--scripted] [--chatroom FILE]

Runs the whole thing on its own: builds examples/chatroom (a simulated
chat platform, an MCPL server) and runs it as a subprocess, with an agent,
ada, and a SQLite store in a fresh temporary folder, and shows what happens
as it happens, the room's side and the agent's in the order they happened:
who said what where (and what never reached the agent), the channels
opening and closing and why, the agent typing and streaming, its tool
calls and their outcomes, what it is told. It ends by itself, within 30
seconds, with a summary and the paths of its transcript and store.

ada runs on a scripted model (no API key, no network) that plays its part
of the story: it answers alice in #general, joins #dev when dave asks
(tripping over a channel that doesn't exist on the way), answers frank
in his thread of #dev and bob's direct message privately, and declines
carol's #random with a 👀. With ANTHROPIC_API_KEY set it runs on
Anthropic's claude-haiku-4-5 instead, or, with OPENAI_API_KEY set and no
Anthropic key, on OpenAI's gpt-4.1-mini; the demo then ends once the
room's script has played out and ada has been quiet for 2s.
ANTHROPIC_BASE_URL and OPENAI_BASE_URL, when set, are the providers' base
URLs (a compatible server, or a local fake).

  --color auto|always|never   colour the account (auto: when stdout is a terminal)
  --scripted                  run ada on the scripted model even with a key set
  --chatroom FILE             run this examples/chatroom binary instead of building one

It needs the Go toolchain and this repository's source (go run
./cmd/mcplhost demo from a clone), unless --chatroom names a binary.

Exit status: 0 when the story ran through; 1 when it could not start or
did not finish in time; 2 for usage errors.
`

// The demo's room. Each post of the story after the first waits for the
// agent's answer (+agent), so the story is five turns whatever the
// machine's speed: alice in #general, dave in #dev, frank in a thread of
// #dev (answered in the thread), bob's direct message (answered
// privately), carol in #random. The chatter around it (bob's and erin's posts) goes to
// channels that are closed when it is posted, #random (never opened) and
// #dev (before the agent joins it), so the reader sees ordinary traffic
// that never reaches the agent, and the story stays deterministic: a post
// in an open channel wakes the agent (docs/agents.md), which would take a
// turn, and a step of the scripted model, the story doesn't have. A post's
// id counts every post, delivered or not, DMs included: carol's is
// chatroom-7 (the room runs with -run=, ids without a run part, as the
// demo's store is new each time).
const demoRoom = `+500ms #random bob: has anyone tried the new coffee machine?
+500ms #general alice @agent: morning! what did we decide about the release date?
+agent #dev erin: CI is green on main again
+0s #dev dave @agent: can you review PR 12? it touches the retry logic
+agent #dev/pr-12 frank @agent: is the retry backoff in PR 12 capped?
+agent @dm bob: between us, is PR 12 safe to merge before the release?
+agent #random carol @agent: settle this for us: tabs or spaces?
+500ms #random bob: spaces, obviously
`

// The demo's scripted agent: it answers alice, joins #dev when invited
// (and trips over a channel that doesn't exist on the way), answers frank
// in his thread and bob in his DM (the host places both replies: its say
// steps name no channel), and declines #random with an acknowledgment.
const demoScript = `steps:
  - say: Morning, alice! We settled on Thursday for the release.
  - call:
      - {tool: channel_open, args: {channelId: "chatroom:#dev", serverId: room}}
      - {tool: room--history, args: {channel: "#nope"}}
  - say: "Joined #dev. Looking at PR 12 now; the retry logic is the part to check."
  - say: "Yes, frank: the backoff doubles from 1s and is capped at 30s."
  - say: "Between us, bob: yes, once CI is green; the retry change is small."
  - call: [{tool: channel_decline, args: {channelId: "chatroom:#random", serverId: room, messageId: chatroom-7, acknowledge: "👀"}}]
  - silent: true
`

// demoTurns is how many turns the scripted story has.
const demoTurns = 5

// The demo agent's debounce and its bound, shorter than the defaults: the
// room posts each line once the agent has answered the one before, so
// there is no burst for a debounce to fold, and the story stays brisk.
const (
	demoDebounce = 300 * time.Millisecond
	demoMaxDelay = time.Second
)

// demoDeadline bounds the demo.
const demoDeadline = 30 * time.Second

// demoQuiet is how long an agent on a provider's model must have been
// quiet (no turn running) after the room's script has played out for the
// demo to end: its turns can't be counted in advance, and a message it
// has not yet read wakes it within milliseconds, so a quiet this long
// means it is done. A variable so tests can shorten it.
var demoQuiet = 2 * time.Second

// The providers' models the demo runs on when their key is set: each
// provider's fast, low-cost current model, as the demo must fit in its 30
// seconds with several model calls a turn.
const (
	demoAnthropicModel = "claude-haiku-4-5"
	demoOpenAIModel    = "gpt-4.1-mini"
)

// demoModel is the model the demo's agent runs on.
type demoModel struct {
	provider string // config.ProviderScripted, Anthropic or OpenAI
	name     string // the provider's model name; "" when scripted
	keyEnv   string // the variable holding the key
	baseURL  string // "" for the provider's own
}

// pickDemoModel picks the agent's model: the scripted one when scripted
// is set or no key is; else Anthropic's when ANTHROPIC_API_KEY is set
// (not empty), else OpenAI's. A provider's *_BASE_URL variable, when set,
// is its baseURL: the providers read no environment beyond their key
// (internal/model/anthropic, openai), so the demo passes it on itself.
func pickDemoModel(scripted bool, getenv func(string) string) demoModel {
	set := func(name string) bool { return strings.TrimSpace(getenv(name)) != "" }
	switch {
	case scripted:
	case set("ANTHROPIC_API_KEY"):
		return demoModel{config.ProviderAnthropic, demoAnthropicModel, "ANTHROPIC_API_KEY", getenv("ANTHROPIC_BASE_URL")}
	case set("OPENAI_API_KEY"):
		return demoModel{config.ProviderOpenAI, demoOpenAIModel, "OPENAI_API_KEY", getenv("OPENAI_BASE_URL")}
	}
	return demoModel{provider: config.ProviderScripted}
}

func (m demoModel) scripted() bool { return m.provider == config.ProviderScripted }

// yaml is the agent's model configuration, a YAML flow mapping (JSON
// strings are YAML's double-quoted ones).
func (m demoModel) yaml() string {
	if m.scripted() {
		return "{provider: scripted, script: ./ada.yaml}"
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	s := fmt.Sprintf("{provider: %s, model: %s, apiKeyEnv: %s", m.provider, q(m.name), m.keyEnv)
	if m.baseURL != "" {
		s += ", baseURL: " + q(m.baseURL)
	}
	return s + "}"
}

// describe says which model the agent runs on, and why that one.
func (m demoModel) describe() string {
	if m.scripted() {
		return "the scripted model (no key, no network), which plays its part of the story"
	}
	at := ""
	if m.baseURL != "" {
		at = " at " + m.baseURL
	}
	return fmt.Sprintf("%s's %s%s (%s is set; --scripted runs the scripted model instead)", m.provider, m.name, at, m.keyEnv)
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	color, scripted, room := "auto", false, ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return demoUsageError(stderr, fmt.Sprintf("unexpected argument %q", a))
		}
		f := splitFlag(args, &i)
		switch f.name {
		case "color":
			v, ok := f.value()
			if !ok || (v != "auto" && v != "always" && v != "never") {
				return demoUsageError(stderr, "--color takes auto, always or never")
			}
			color = v
		case "scripted":
			on, err := f.on()
			if err != nil {
				return demoUsageError(stderr, err.Error())
			}
			scripted = on
		case "chatroom":
			v, ok := f.value()
			if !ok || v == "" {
				return demoUsageError(stderr, "--chatroom needs the chat room's binary")
			}
			room = v
		case "h", "help":
			printer{stdout}.text(demoUsage)
			return exitOK
		default:
			return demoUsageError(stderr, "unknown flag "+a)
		}
	}
	out, errOut := printer{stdout}, printer{stderr}
	model := pickDemoModel(scripted, os.Getenv)
	if room != "" {
		// Checked here: a server that can't start leaves the demo waiting
		// for a story that never comes.
		abs, err := filepath.Abs(room)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			errOut.linef("mcplhost demo: --chatroom: %v", err)
			return exitFail
		}
		room = abs
	}
	dir, err := os.MkdirTemp("", "mcplhost-demo-")
	if err != nil {
		errOut.linef("mcplhost demo: %v", err)
		return exitFail
	}
	if room == "" {
		out.linef("mcplhost demo: building examples/chatroom in %s …", dir)
		if room, err = buildDemoRoom(ctx, dir); err != nil {
			errOut.linef("mcplhost demo: building the chat room: %v", err)
			return exitFail
		}
	}
	files := map[string]string{"room.script": demoRoom, "ada.yaml": demoScript}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			errOut.linef("mcplhost demo: %v", err)
			return exitFail
		}
	}
	feed, err := openDemoFeed(dir)
	if err != nil {
		errOut.linef("mcplhost demo: %v", err)
		return exitFail
	}
	// The room writes its transcript to the feed's FIFO (-transcript),
	// not to its stderr, which the host keeps for its log.
	cfgText := fmt.Sprintf(`store: ./demo.db
servers:
  - id: room
    command: [%q, -run=, -script, ./room.script, -transcript, %q]
    channels: {acknowledgeSeen: "👀"}
agents:
  - name: ada
    model: %s
    system: You are Ada, in the team's chat room.
    wake: {debounce: %s, maxDelay: %s}
`, room, feed.path, model.yaml(), demoDebounce, demoMaxDelay)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		feed.close()
		errOut.linef("mcplhost demo: %v", err)
		return exitFail
	}
	cfg, ok := loadConfig("demo", cfgPath, stderr)
	if !ok {
		feed.close()
		return exitFail
	}
	colored := color == "always" || (color == "auto" && isTerminal(stdout))
	return playDemo(ctx, cfg, dir, model, feed, colored, stdout, stderr)
}

// playDemo runs the host on cfg until the story is over (demoStory says
// when), and sums it up. It closes feed.
func playDemo(ctx context.Context, cfg *config.Config, dir string, model demoModel, feed *demoFeed, color bool, stdout, stderr io.Writer) int {
	out, errOut := printer{stdout}, printer{stderr}
	story := newDemoStory(transcriptPrinter{p: out, color: color}, model.scripted())
	defer story.stop()
	defer feed.close()
	transcriptPath := filepath.Join(dir, "transcript.jsonl")
	tf, err := os.OpenFile(transcriptPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		errOut.linef("mcplhost demo: %v", err)
		return exitFail
	}
	defer tf.Close()
	st, err := sqlite.Open(cfg.Store, nil)
	if err != nil {
		errOut.linef("mcplhost demo: %v", err)
		return exitFail
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(stderr, logOptions(slog.LevelWarn)))
	h, err := host.New(host.Options{Logger: log, Store: st, Transcript: io.MultiWriter(tf, feed), RefsDir: filepath.Join(dir, "refs")})
	if err != nil {
		errOut.linef("mcplhost demo: %v", err)
		return exitFail
	}
	out.linef("mcplhost demo: the chat room has #general (open), #dev and #random, and people who post on a script")
	out.linef("mcplhost demo: ada runs on %s", model.describe())
	out.linef("")
	feed.start(story) // from here until feed.close, only the feed prints
	if err := h.Start(cfg); err != nil {
		h.Close()
		errOut.linef("mcplhost demo: %v", err)
		return exitFail
	}
	t := time.NewTimer(demoDeadline)
	defer t.Stop()
	code := exitOK
	select {
	case <-story.ended:
	case <-t.C:
		if model.scripted() {
			errOut.linef("mcplhost demo: the story did not finish within %s", demoDeadline)
		} else {
			errOut.linef("mcplhost demo: the story did not finish within %s: the room's script had not played out (each post after the first waits for ada to answer the one before), or ada was not quiet for %s after it", demoDeadline, demoQuiet)
		}
		code = exitFail
	case <-ctx.Done():
		code = exitFail
	}
	h.Close()
	feed.close() // everything the host and the room wrote is printed
	s := story.sum
	out.linef("")
	out.linef("mcplhost demo: %d turns, %d replies delivered, %d tool calls (%d failed), %d notices", s.turns, s.delivered, s.tools, s.toolsFailed, s.notices)
	ran := strings.Join(s.models, ", ")
	switch {
	case ran == "":
		ran = "none answered"
	case !model.scripted():
		ran += " on " + model.provider
	}
	out.linef("  model:      %s", ran)
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
		return "", fmt.Errorf("this repository's examples/chatroom is not here (%s): run the demo from a clone, with go run ./cmd/mcplhost demo, or give a built one with --chatroom", src)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, b)
	}
	return bin, nil
}

func demoUsageError(stderr io.Writer, msg string) int {
	printer{stderr}.usageError(demoUsage, "mcplhost demo: %s", msg)
	return exitUsage
}
