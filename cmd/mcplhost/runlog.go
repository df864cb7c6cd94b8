package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// runLogHandler is run's log handler: text or JSON lines (--log-format)
// on stderr at level, with the lines the servers write to their stderr
// (which the transport logs at debug) shown at info, so that -v, which
// asks for info, shows them: they are a server's own account of what it
// does, which an operator following a run with -v wants beside the
// host's.
func runLogHandler(stderr io.Writer, format string, level slog.Level) slog.Handler {
	var h slog.Handler = slog.NewTextHandler(stderr, logOptions(level))
	if format == "json" {
		h = slog.NewJSONHandler(stderr, logOptions(level))
	}
	return serverStderrAtInfo{h}
}

// serverStderrAtInfo raises each transport.StderrLineMessage record from
// debug to info before its handler sees it.
type serverStderrAtInfo struct{ h slog.Handler }

func (s serverStderrAtInfo) Enabled(ctx context.Context, l slog.Level) bool {
	// A debug record may be a server's stderr line, which is shown at
	// info: let it be made whenever info is shown, and decide in Handle.
	if l == slog.LevelDebug {
		return s.h.Enabled(ctx, slog.LevelInfo)
	}
	return s.h.Enabled(ctx, l)
}

func (s serverStderrAtInfo) Handle(ctx context.Context, r slog.Record) error {
	// Only a record this handler let through at a level it doesn't show
	// is dropped here: the logger has asked Enabled of every other, and
	// logRecord's are written at every level.
	switch {
	case r.Level == slog.LevelDebug && r.Message == transport.StderrLineMessage:
		r.Level = slog.LevelInfo
	case r.Level == slog.LevelDebug && !s.h.Enabled(ctx, slog.LevelDebug):
		return nil
	}
	return s.h.Handle(ctx, r)
}

func (s serverStderrAtInfo) WithAttrs(as []slog.Attr) slog.Handler {
	return serverStderrAtInfo{s.h.WithAttrs(as)}
}

func (s serverStderrAtInfo) WithGroup(name string) slog.Handler {
	return serverStderrAtInfo{s.h.WithGroup(name)}
}

// logLines is a writer for what run says outside its log (that the status
// page is up, why it could not start) when the log is JSON: each line
// written to it becomes one record, at level, its message the line less
// prefix ("mcplhost run: "), so that with --log-format json every line on
// stderr is JSON. The record is written whatever the log's level: these
// lines are printed at every level in text, and are in JSON too.
type logLines struct {
	h      slog.Handler
	level  slog.Level
	prefix string
}

func (w logLines) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		logRecord(w.h, w.level, strings.TrimPrefix(l, w.prefix))
	}
	return len(b), nil
}

// logRecord writes one record to h, whatever h's level.
func logRecord(h slog.Handler, level slog.Level, msg string, attrs ...slog.Attr) {
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	h.Handle(context.Background(), r)
}

// stderrSink is stderr as mainCode hands it to a command. A command whose
// log is JSON lines (run --log-format json) sets note, so that the line
// mainCode writes after a stop by signal is a JSON record too; nil note
// means plain text.
type stderrSink struct {
	io.Writer
	note func(msg string)
}

// sayStop says how the command was stopped, on w: as a record when the
// command set note, else as a plain line.
func sayStop(w *stderrSink, why string) {
	msg := "stopped (" + why + "); the servers it started are closed"
	if w.note != nil {
		w.note(msg)
		return
	}
	printer{w.Writer}.linef("mcplhost: %s", msg)
}
