package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
)

// demoFeed puts the demo's two accounts, the room's and the agent's, in
// one order: the order they happened in.
//
// The room (examples/chatroom -transcript) writes its transcript lines to
// a FIFO the demo holds open for reading and writing. The host's
// transcript events come to Write; each is queued, numbered, and its
// number written to the same FIFO as a mark. The reader (one goroutine,
// the only one that prints while the story runs) reads the FIFO in order,
// and prints the host's queued events at their marks. A FIFO keeps the
// order of its writes, and the room writes each line before it answers
// the request that caused it (channels/publish, channels/open, ...), so
// whatever the room wrote before the host heard back, and so before the
// host's event about it, comes out before that event: the order is the
// order of causes, with no clock compared and no delay. (What the room
// is told by notification, typing and streamed text, has no answer: its
// line comes when the room got to it, which may be after the host's next
// events; that is when it happened in the room.) A mark that arrives out
// of its turn prints every queued event up to it, so the host's events
// keep their own order whatever happens.
//
// Decisions:
//   - The FIFO, not the room's stderr: the host keeps a server's stderr for
//     its log (the last lines, on exit), and scraping a log is no interface.
//   - Opened read and write (O_RDWR, which Linux and the BSDs allow on a
//     FIFO), so neither the room's open of its end nor the demo's waits
//     for the other, and a room that never starts leaves no open blocked;
//     the cost is that the room's exit is no end of file: close writes an
//     end mark once the host (and so the room, which the host has stopped)
//     is closed, and the reader stops there, after everything the room
//     wrote.
//   - A mark is "\x1d" (the ASCII group separator, which no room line
//     holds, short of an agent's text carrying one: then that line is
//     misread, and the events stay in order) then the number and a
//     newline. Pipe writes this small are atomic, so a mark never splits;
//     a room line longer than the pipe's atomic size could be split by
//     one, and the reader joins its parts again.
type demoFeed struct {
	path string
	f    *os.File

	mu      sync.Mutex
	buf     []byte // a partial line of the host's transcript
	pending []demoQueued
	seq     int

	story     *demoStory
	done      chan struct{} // closed when the reader has stopped
	closeOnce sync.Once
}

type demoQueued struct {
	seq int
	ev  agent.Event
}

// demoMark starts a mark in the FIFO; demoEnd is the last one.
const (
	demoMark = '\x1d'
	demoEnd  = "end"
)

// openDemoFeed makes the FIFO in dir and opens it.
func openDemoFeed(dir string) (*demoFeed, error) {
	path := filepath.Join(dir, "room.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("the room's transcript: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("the room's transcript: %w", err)
	}
	return &demoFeed{path: path, f: f}, nil
}

// start starts the reader, which tells story what happens.
func (d *demoFeed) start(story *demoStory) {
	d.story = story
	d.done = make(chan struct{})
	go d.read()
}

// close ends the reader after it has read everything written so far, and
// closes the FIFO. The host must be closed first: what it or the room
// writes after is lost.
func (d *demoFeed) close() {
	d.closeOnce.Do(func() {
		if d.done != nil {
			if _, err := d.f.WriteString(string(demoMark) + demoEnd + "\n"); err == nil {
				<-d.done
			}
		}
		d.f.Close()
		os.Remove(d.path)
	})
}

// Write takes the host's transcript, JSON lines (docs/transcript.md): each
// event is queued and marked in the FIFO. The mark is written after the
// lock is let go, as a full pipe waits for the reader, which takes the lock.
func (d *demoFeed) Write(p []byte) (int, error) {
	d.mu.Lock()
	d.buf = append(d.buf, p...)
	var marks []byte
	for {
		i := bytes.IndexByte(d.buf, '\n')
		if i < 0 {
			break
		}
		var ev agent.Event
		if json.Unmarshal(d.buf[:i], &ev) == nil {
			d.seq++
			d.pending = append(d.pending, demoQueued{d.seq, ev})
			marks = fmt.Appendf(marks, "%c%d\n", demoMark, d.seq)
		}
		d.buf = d.buf[i+1:]
	}
	d.mu.Unlock()
	if len(marks) > 0 {
		d.f.Write(marks)
	}
	return len(p), nil
}

// read reads the FIFO until the end mark: room lines go to the story as
// they come, and each mark lets the host's events up to it through.
func (d *demoFeed) read() {
	defer close(d.done)
	r := bufio.NewReader(d.f)
	var cut []byte // the start of a room line a mark split
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			d.release(-1)
			return
		}
		line = line[:len(line)-1]
		if k := bytes.LastIndexByte(line, demoMark); k >= 0 {
			mark := string(line[k+1:])
			n, err := strconv.Atoi(mark)
			if mark == demoEnd || err == nil {
				cut = append(cut, line[:k]...)
				if mark == demoEnd {
					if len(cut) > 0 {
						d.story.room(string(cut))
					}
					d.release(-1)
					return
				}
				d.release(n)
				continue
			}
		}
		d.story.room(string(append(cut, line...)))
		cut = nil
	}
}

// release gives the story the host's queued events up to number n (all of
// them when n is -1).
func (d *demoFeed) release(n int) {
	d.mu.Lock()
	i := len(d.pending)
	if n >= 0 {
		i = 0
		for i < len(d.pending) && d.pending[i].seq <= n {
			i++
		}
	}
	evs := slices.Clone(d.pending[:i])
	d.pending = d.pending[i:]
	d.mu.Unlock()
	for _, q := range evs {
		d.story.event(q.ev)
	}
}

// ANSI styles of the demo's own lines, beside the transcript's.
const (
	styleRoom    = "\x1b[34m" // blue: the room's lines
	styleChannel = "\x1b[35m" // magenta: a channel opening or closing, and why
)

// demoScriptOver is the line examples/chatroom writes once its script has
// played out (its ScriptOver).
const demoScriptOver = "(the script has played out: nobody posts from here on)"

// demoStory prints what happens and watches for the end of the story.
// Everything but ended and end is the feed's reader's; summary fields are
// read after the reader has stopped.
//
// The story is over once the room's script has played out, and, with the
// scripted model, its three turns have ended (they can be counted); with
// a provider's model, once the agent has then been quiet (no turn
// running) for demoQuiet, past the most its debounce can put a turn off
// (demoMaxDelay).
type demoStory struct {
	tp       transcriptPrinter
	scripted bool

	sum        demoSummary
	running    int // turns started and not ended
	scriptOver bool
	quiet      *time.Timer

	ended   chan struct{}
	endOnce sync.Once
}

type demoSummary struct {
	turns, delivered, tools, toolsFailed, notices int
	models                                        []string // the models that answered, as they named themselves
}

func newDemoStory(tp transcriptPrinter, scripted bool) *demoStory {
	return &demoStory{tp: tp, scripted: scripted, ended: make(chan struct{})}
}

func (s *demoStory) end() { s.endOnce.Do(func() { close(s.ended) }) }

// stop stops the quiet timer. Only after the feed's reader has stopped.
func (s *demoStory) stop() {
	if s.quiet != nil {
		s.quiet.Stop()
	}
}

// room prints one line of the room's transcript, "[#channel] what
// happened" (or a line of the room's own, like the script's end), as
// "room #channel what happened": dim when it says the post was not
// delivered. The room's "(open from the start)" is a channel opening, and
// gets its line.
func (s *demoStory) room(line string) {
	style := styleRoom
	if strings.Contains(line, "(not delivered: ") || line == demoScriptOver {
		style = styleShown
	}
	ch, what, ok := strings.Cut(strings.TrimPrefix(line, "["), "] ")
	if !ok || !strings.HasPrefix(line, "[") {
		s.tp.line(style, "  room %s", line)
	} else {
		s.tp.line(style, "  room %s %s", ch, what)
	}
	switch {
	case line == demoScriptOver:
		s.scriptOver = true
		s.check()
	case ok && what == "(open from the start)":
		s.tp.line(styleChannel, "  channel %s is open: the room registers it open from the start", ch)
	}
}

// event prints one of the host's transcript events, then, when it opened
// or closed a channel, a line saying so and why, and counts it.
func (s *demoStory) event(ev agent.Event) {
	s.tp.event(ev)
	s.channel(ev)
	switch ev.Event {
	case agent.EventTurnStart:
		s.running++
	case agent.EventTurnEnd:
		s.running--
		s.sum.turns++
	case agent.EventModel:
		if ev.Model != "" && !slices.Contains(s.sum.models, ev.Model) {
			s.sum.models = append(s.sum.models, ev.Model)
		}
	case agent.EventSpeech:
		if ev.Outcome == "delivered" {
			s.sum.delivered++
		}
	case agent.EventTool:
		s.sum.tools++
		if ev.Outcome != "ok" {
			s.sum.toolsFailed++
		}
	case agent.EventNotice:
		s.sum.notices++
	}
	s.check()
}

// check ends the story when it is over, or, with a provider's model,
// starts (or starts over) the wait for the agent's quiet.
func (s *demoStory) check() {
	switch {
	case !s.scriptOver:
	case s.scripted:
		if s.sum.turns >= demoTurns {
			s.end()
		}
	case s.running > 0:
		if s.quiet != nil {
			s.quiet.Stop()
		}
	case s.quiet == nil:
		s.quiet = time.AfterFunc(demoQuiet+demoMaxDelay, s.end)
	default:
		s.quiet.Reset(demoQuiet + demoMaxDelay)
	}
}

// channel prints the line for a channel the event opened or closed, from
// what the host told the agent: a channel tool's success (its result names
// the channel and its status), or a channels notice (docs/agents.md,
// Notices). Nothing else changes a channel the agent is in: the room's own
// lines show its side.
func (s *demoStory) channel(ev agent.Event) {
	switch {
	case ev.Event == agent.EventTool && ev.Outcome == "ok":
		var res struct {
			ChannelID      string `json:"channelId"`
			Status         string `json:"status"`
			Acknowledged   bool   `json:"acknowledged"`
			Representation string `json:"representation"`
		}
		if json.Unmarshal([]byte(ev.Text), &res) != nil || res.ChannelID == "" {
			return
		}
		switch ev.Tool + ": " + res.Status {
		case "channel_open: opened":
			s.tp.line(styleChannel, "  channel %s opened: %s joined it with channel_open", res.ChannelID, ev.Agent)
		case "channel_open: already open":
			s.tp.line(styleChannel, "  channel %s was open already: %s's channel_open changed nothing", res.ChannelID, ev.Agent)
		case "channel_close: closed":
			s.tp.line(styleChannel, "  channel %s closed: %s left it with channel_close", res.ChannelID, ev.Agent)
		case "channel_close: already closed":
			s.tp.line(styleChannel, "  channel %s was closed already: %s's channel_close changed nothing", res.ChannelID, ev.Agent)
		case "channel_decline: remained closed":
			ack := "without an acknowledgment"
			if res.Acknowledged {
				ack = "acknowledged with " + res.Representation
			}
			s.tp.line(styleChannel, "  channel %s stays closed: %s declined the invitation, %s", res.ChannelID, ev.Agent, ack)
		}
	case ev.Event == agent.EventNotice:
		if rest, ok := strings.CutPrefix(ev.Text, "[channels] Now open: "); ok {
			list, why, _ := strings.Cut(rest, " — ")
			why, _, _ = strings.Cut(why, ". ")
			why = strings.Replace(why, "your own message", ev.Agent+"'s own message", 1)
			s.tp.line(styleChannel, "  channel %s opened: %s", list, strings.TrimSuffix(why, "."))
		} else if rest, ok := strings.CutPrefix(ev.Text, "[channels] Selected for opening by subscription policy: "); ok {
			list, _, _ := strings.Cut(rest, ". ")
			s.tp.line(styleChannel, "  channel %s selected for opening: the subscription policy admits it", strings.TrimSuffix(list, "."))
		} else if rest, ok := strings.CutPrefix(ev.Text, "[channels] Not open: "); ok {
			list, _, _ := strings.Cut(rest, ". ")
			s.tp.line(styleChannel, "  channel %s is not open: a reply into it went out, but opening it failed", list)
		}
	}
}
