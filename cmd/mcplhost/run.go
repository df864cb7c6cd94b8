package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

const runUsage = `usage: mcplhost run --config FILE [--transcript FILE] [--log-format text|json] [-v]

Runs the host from a configuration file: opens the store the file names,
starts its agents, connects its servers, and runs until SIGINT or SIGTERM.
Then it stops in order: no new turn starts, the turns in flight have 10s to
end by themselves (then they are cut short and recorded), lifecycle work
in flight finishes, and the servers and the store close. A second signal
exits at once. --transcript appends every agent's turns to FILE as JSON
lines (docs/transcript.md); they are kept in the store too. The log goes
to stderr, as text or JSON lines (--log-format; -v adds operator detail).

Exit status: 128+N after a stop by signal N (130 for SIGINT, 143 for
SIGTERM), 1 when the host can't start, 2 for usage or configuration
errors.
`

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfgPath, transcript string
	verbose, logFormat := false, "text"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return runUsageError(stderr, fmt.Sprintf("unexpected argument %q", a))
		}
		name, next := splitFlag(args, &i)
		switch name {
		case "config":
			v, ok := next()
			if !ok || v == "" {
				return runUsageError(stderr, "--config needs a file")
			}
			cfgPath = v
		case "transcript":
			v, ok := next()
			if !ok || v == "" {
				return runUsageError(stderr, "--transcript needs a file")
			}
			transcript = v
		case "log-format":
			v, ok := next()
			if !ok || (v != "text" && v != "json") {
				return runUsageError(stderr, fmt.Sprintf("--log-format %q is not text or json", v))
			}
			logFormat = v
		case "v", "verbose":
			verbose = true
		case "h", "help":
			printer{stdout}.text(runUsage)
			return exitOK
		default:
			return runUsageError(stderr, "unknown flag "+a)
		}
	}
	if cfgPath == "" {
		return runUsageError(stderr, "--config FILE is required")
	}
	cfg, ok := loadConfig("run", cfgPath, stderr)
	if !ok {
		return exitUsage
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, logOptions(level))
	if logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, logOptions(level))
	}
	log := slog.New(handler)
	var tw io.Writer
	if transcript != "" {
		f, err := os.OpenFile(transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			printer{stderr}.linef("mcplhost run: the transcript: %v", err)
			return exitFail
		}
		defer f.Close()
		tw = f
	}
	st, err := sqlite.Open(cfg.Store, nil)
	if err != nil {
		printer{stderr}.linef("mcplhost run: %v", err)
		return exitFail
	}
	defer st.Close()
	h, err := host.New(host.Options{Logger: log, Store: st, Transcript: tw, ShutdownGrace: runShutdownGrace,
		RefsDir: filepath.Join(filepath.Dir(cfg.Store), "refs")})
	if err != nil {
		printer{stderr}.linef("mcplhost run: %v", err)
		return exitFail
	}
	defer h.Close()
	if err := h.Start(cfg); err != nil {
		printer{stderr}.linef("mcplhost run: %v", err)
		return exitFail
	}
	<-ctx.Done()
	return exitOK
}

// runShutdownGrace is how long run lets turns in flight end at a stop.
const runShutdownGrace = 10 * time.Second

func runUsageError(stderr io.Writer, msg string) int {
	printer{stderr}.usageError(runUsage, "mcplhost run: %s", msg)
	return exitUsage
}
