package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/treat"
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

A line that is not an event is skipped, and the printing goes on past
it; at the end a line on standard error says how many were skipped and
names the first. A line cut short, as a crash or kill in the middle of a
write leaves one, is expected and is no error; any other unreadable line
means the file is damaged (or is not a transcript).

Exit status: 0, also when lines cut short were skipped; 1 when FILE
can't be read, or a line that is not cut short is not a transcript event
(everything else is still printed); 2 for usage errors.
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
	var skip skippedLines
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		ev, ok := parseEvent(sc.Bytes())
		if !ok {
			skip.add(n, cutShort(sc.Bytes()))
			continue
		}
		if only == "" || ev.Agent == only {
			tp.event(ev)
		}
	}
	code := skip.report(printer{stderr}, file)
	if err := sc.Err(); err != nil {
		printer{stderr}.linef("mcplhost transcript: %s: %v", file, err)
		return exitFail
	}
	return code
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
			if w.Kind == "push" && w.Channel == "" {
				from = append(from, "event "+w.MessageID+" from "+w.Server)
			} else {
				from = append(from, w.MessageID+" in "+w.Channel+" on "+w.Server)
			}
		}
		tp.line(styleTurn, "%s %s turn %d, woken by %s%s", at, ev.Agent, ev.Turn, strings.Join(from, ", "), carriedText(ev.Carried))
	case agent.EventTreated:
		if s := treatedText(ev.Treated); s != "" {
			tp.line("", "  %s read %s", ev.Agent, s)
		}
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
	case agent.EventModelRetry, agent.EventModelFailed:
		n, ms, wait := 0, int64(0), int64(0)
		if a := ev.Attempt; a != nil {
			n, ms, wait = a.N, a.Ms, a.WaitMs
		}
		then := fmt.Sprintf("made again in %.1f s", float64(wait)/1000)
		if ev.Event == agent.EventModelFailed {
			then = "not made again (" + ev.Reason + ")"
		}
		tp.line(styleFailed, "  %s model call attempt %d failed after %.1f s, %s: %s", ev.Agent, n, float64(ms)/1000, then, ev.Text)
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

// parseEvent decodes one transcript line; ok is false for a line that is
// not an event (not JSON, JSON with more after it, or no "event").
func parseEvent(line []byte) (ev agent.Event, ok bool) {
	if err := json.Unmarshal(line, &ev); err != nil || ev.Event == "" {
		return agent.Event{}, false
	}
	return ev, true
}

// cutShort reports whether line, not an event, is the start of a JSON
// object that ends too soon: what a write the host did not finish leaves
// (it crashed or was killed part way through a line), rather than damage.
func cutShort(line []byte) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	var v any
	return errors.Is(json.NewDecoder(bytes.NewReader(line)).Decode(&v), io.ErrUnexpectedEOF)
}

// skippedLines counts the lines runTranscript skipped as not events.
//
// The printer goes on past each: one unreadable line must not hide the
// runs appended after it. A line cut short is expected (a crash leaves
// one, and mcplhost run starts the next run on a line of its own,
// startOwnLine), so it leaves the exit status 0; any other line
// that is not an event means the file is damaged or is not a transcript,
// and makes it 1, once everything else is printed. Either way one line at
// the end, on stderr, says how many were skipped and names the first.
type skippedLines struct {
	n, cut     int
	first      int // the first skipped line's number
	firstBad   int // the first one not cut short, or 0
	firstIsCut bool
}

func (s *skippedLines) add(line int, cut bool) {
	s.n++
	if s.n == 1 {
		s.first, s.firstIsCut = line, cut
	}
	if cut {
		s.cut++
	} else if s.firstBad == 0 {
		s.firstBad = line
	}
}

// report prints the line that says what was skipped, if anything was, and
// returns the exit status.
func (s *skippedLines) report(p printer, file string) int {
	if s.n == 0 {
		return exitOK
	}
	count := plural(s.n, "line")
	if s.cut > 0 && s.cut < s.n {
		count += fmt.Sprintf(" (%d cut short)", s.cut)
	}
	if s.firstBad == 0 {
		p.linef("mcplhost transcript: %s:%d: a line cut short, as a crash or kill in the middle of a write leaves one; %s skipped, every other event printed", file, s.first, count)
		return exitOK
	}
	where := ""
	if s.first != s.firstBad {
		where = fmt.Sprintf(", the first skipped at line %d", s.first)
	}
	p.linef("mcplhost transcript: %s:%d: not a transcript event (not JSON, or JSON that is no event); %s skipped%s, every other event printed; exit status 1: the file is damaged or is not a transcript", file, s.firstBad, count, where)
	return exitFail
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// startOwnLine makes the transcript f, opened at path to append to, end
// in a newline before mcplhost run writes to it: when the last write of a
// run that crashed or was killed was cut short, it writes one, so that
// the new run's first event starts a line of its own instead of being
// glued to the cut one, where mcplhost transcript could read neither. It
// does nothing for an empty file or one it can't read (a FIFO, say).
func startOwnLine(f *os.File, path string) {
	r, err := os.Open(path)
	if err != nil {
		return
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return
	}
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
		f.Write([]byte{'\n'})
	}
}

// carriedText is what a turn carried besides what woke it, as its start
// line ends: "; carried 2 held, 40 batched" ("" for nothing).
func carriedText(c *agent.Carried) string {
	if c == nil {
		return ""
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{c.Held, "held"}, {c.Batched, "batched"}, {c.Ignored, "ignored"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; carried " + strings.Join(parts, ", ")
}

// treatedText says what a read batched and ignored, by server: "40
// batched on chatroom, 2 ignored on ads" ("" when it did neither: what
// woke a turn is on the turn's line).
func treatedText(ts []agent.Treated) string {
	var parts []string
	for _, t := range ts {
		if t.Treat == treat.Wake || t.N == 0 {
			continue
		}
		what := "batched"
		if t.Treat == treat.Ignore {
			what = "ignored"
		}
		parts = append(parts, fmt.Sprintf("%d %s on %s", t.N, what, t.Server))
	}
	return strings.Join(parts, ", ")
}
