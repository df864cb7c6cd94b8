package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

const runUsage = `usage: mcplhost run --config FILE [--transcript FILE] [-v]

Runs the host from a configuration file: opens the store the file names,
starts its agents, connects its servers, and runs until SIGINT or SIGTERM,
then stops the agents (a turn in flight is cut short and recorded), closes
the servers and the store. --transcript appends every agent's turns to
FILE as JSON lines (docs/transcript.md); they are kept in the store too.

Exit status: 128+N after a stop by signal N (130 for SIGINT, 143 for
SIGTERM), 1 when the host can't start, 2 for usage or configuration
errors.
`

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfgPath, transcript string
	verbose := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			return runUsageError(stderr, fmt.Sprintf("unexpected argument %q", a))
		}
		next := func() (string, bool) {
			if hasVal {
				return val, true
			}
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
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
	log := slog.New(slog.NewTextHandler(stderr, logOptions(level)))
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
	h, err := host.New(host.Options{Logger: log, Store: st, Transcript: tw,
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

func runUsageError(stderr io.Writer, msg string) int {
	printer{stderr}.usageError(runUsage, "mcplhost run: %s", msg)
	return exitUsage
}
