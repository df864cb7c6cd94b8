package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcpl-go/mcpl/internal/agent"
)

const transcriptUsage = `usage: mcplhost transcript [--agent NAME] [--color auto|always|never] FILE

Prints a transcript, the JSON lines mcplhost run --transcript writes
(docs/transcript.md), for a person: one line for each event, by time,
agent and turn, and what the agent was shown indented below its turn's
start. FILE - reads standard input, so a live transcript can be followed
with tail -f FILE | mcplhost transcript -. --agent keeps one agent's
events (a fork's name, like ada@chat/general, names the fork). Colour is
on when standard output is a terminal (auto), or as --color says.
Everything a server or a model wrote is shown escaped.

Exit status: 0; 1 when FILE can't be read or a line is not a transcript
event (the line's number is named); 2 for usage errors.
`

// ANSI styles of the transcript's lines.
const (
	styleTurn   = "\x1b[1m"  // bold: a turn's start and end
	styleShown  = "\x1b[2m"  // dim: what the agent was shown
	styleSpeech = "\x1b[32m" // green: what the agent said
	styleTool   = "\x1b[36m" // cyan: tool calls and results
	styleNotice = "\x1b[33m" // yellow: notices
	styleFailed = "\x1b[31m" // red: a failure
)

func runTranscript(args []string, stdout, stderr io.Writer) int {
	var file, only string
	color := "auto"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-" || !strings.HasPrefix(a, "-") {
			if file != "" {
				return transcriptUsageError(stderr, fmt.Sprintf("unexpected argument %q: give one FILE", a))
			}
			file = a
			continue
		}
		f := splitFlag(args, &i)
		switch f.name {
		case "agent":
			v, ok := f.value()
			if !ok || v == "" {
				return transcriptUsageError(stderr, "--agent needs an agent's name")
			}
			only = v
		case "color":
			v, ok := f.value()
			if !ok || (v != "auto" && v != "always" && v != "never") {
				return transcriptUsageError(stderr, fmt.Sprintf("--color %q is not auto, always or never", v))
			}
			color = v
		case "h", "help":
			printer{stdout}.text(transcriptUsage)
			return exitOK
		default:
			return transcriptUsageError(stderr, "unknown flag "+a)
		}
	}
	if file == "" {
		return transcriptUsageError(stderr, "give the transcript FILE (- for standard input)")
	}
	in := io.Reader(os.Stdin)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			printer{stderr}.linef("mcplhost transcript: %v", err)
			return exitFail
		}
		defer f.Close()
		in = f
	}
	tp := transcriptPrinter{p: printer{stdout}, color: color == "always" || (color == "auto" && isTerminal(stdout))}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var ev agent.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Event == "" {
			printer{stderr}.linef("mcplhost transcript: %s:%d: not a transcript event", file, n)
			return exitFail
		}
		if only == "" || ev.Agent == only {
			tp.event(ev)
		}
	}
	if err := sc.Err(); err != nil {
		printer{stderr}.linef("mcplhost transcript: %s: %v", file, err)
		return exitFail
	}
	return exitOK
}

func transcriptUsageError(stderr io.Writer, msg string) int {
	printer{stderr}.usageError(transcriptUsage, "mcplhost transcript: %s", msg)
	return exitUsage
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// transcriptPrinter prints events for a person.
type transcriptPrinter struct {
	p     printer
	color bool
}

func (tp transcriptPrinter) line(style, format string, args ...any) {
	if !tp.color {
		style = ""
	}
	tp.p.styled(style, format, args...)
}

// event prints one event: its turn's start with the time, the agent and
// the turn, then the rest indented under it.
func (tp transcriptPrinter) event(ev agent.Event) {
	at := ev.At.Local().Format("15:04:05")
	switch ev.Event {
	case agent.EventTurnStart:
		var from []string
		for _, w := range ev.WokenBy {
			if w.Kind == "push" {
				from = append(from, "event "+w.MessageID+" from "+w.Server)
			} else {
				from = append(from, w.MessageID+" in "+w.Channel+" on "+w.Server)
			}
		}
		tp.line(styleTurn, "%s %s turn %d, woken by %s", at, ev.Agent, ev.Turn, strings.Join(from, ", "))
	case agent.EventShown:
		for _, l := range strings.Split(ev.Text, "\n") {
			tp.line(styleShown, "    | %s", l)
		}
	case agent.EventTyping:
		tp.line("", "  %s typing %s in %s", ev.Agent, ev.Outcome, ev.Channel)
	case agent.EventModel:
		usage := ""
		if ev.Usage != nil {
			usage = fmt.Sprintf(", %d tokens in, %d out", ev.Usage.In, ev.Usage.Out)
		}
		tp.line("", "  %s model %s: %s%s", ev.Agent, ev.Model, ev.Stop, usage)
		for _, c := range ev.Calls {
			tp.line(styleTool, "  %s calls %s %s", ev.Agent, c.Name, string(c.Args))
		}
	case agent.EventTool:
		style := styleTool
		if ev.Outcome != "ok" {
			style = styleFailed
		}
		tp.line(style, "  %s %s: %s: %s", ev.Agent, ev.Tool, ev.Outcome, ev.Text)
	case agent.EventStreamed:
		tp.line("", "  %s streamed to %s: %s", ev.Agent, ev.Channel, ev.Text)
	case agent.EventSpeech:
		style := styleSpeech
		if ev.Outcome != "delivered" {
			style = styleFailed
		}
		where := ev.Channel
		if where == "" {
			where = "no channel"
		}
		tp.line(style, "  %s says in %s (%s): %s", ev.Agent, where, ev.Outcome, ev.Text)
	case agent.EventNotice:
		tp.line(styleNotice, "  %s is told: %s", ev.Agent, ev.Text)
	case agent.EventTurnEnd:
		tp.line(styleTurn, "%s %s turn %d ended: %s", at, ev.Agent, ev.Turn, ev.Reason)
	default:
		tp.line("", "  %s %s: %s", ev.Agent, ev.Event, ev.Text)
	}
}
