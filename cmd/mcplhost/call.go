package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
)

const callUsage = `usage: mcplhost call --config FILE [--wait D] [-v] TOOL JSON

Starts the host from a configuration file, on the store the file names
(its channel decisions), waits up to D (default 10s; 0 does not wait) for its
servers' connects to settle, calls TOOL with the JSON arguments through the
same path an agent's call takes, prints "ok" and the result or "error: " and
what a caller reads, and shuts down. TOOL is a server's tool
(PREFIX--NAME) or one of the host's own: channel_list, channel_open,
channel_close, channel_decline, channel_publish, and fetch_reference (which
saves payloads in refs/ beside the store). The file's agents are not
started. Flags may come before or after TOOL JSON; after --, nothing is a
flag.

Exit status: 0 when the call succeeded, 1 when it failed, 2 for usage or
configuration errors.
`

func runCall(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		cfgPath string
		wait    = 10 * time.Second
		verbose bool
		rest    []string
	)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			// The tool and its arguments; flags may come after them too
			// (a tool's name and a JSON object never begin with "-").
			rest = append(rest, a)
			continue
		}
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		f := splitFlag(args, &i)
		switch f.name {
		case "config":
			v, ok := f.value()
			if !ok {
				return callUsageError(stderr, "--config needs a file")
			}
			cfgPath = v
		case "wait":
			v, ok := f.value()
			d, err := time.ParseDuration(v)
			if !ok || err != nil || d < 0 {
				return callUsageError(stderr, fmt.Sprintf("--wait %q is not a duration of 0 or more (write it like 10s)", v))
			}
			wait = d
		case "v", "verbose":
			on, err := f.on()
			if err != nil {
				return callUsageError(stderr, err.Error())
			}
			verbose = on
		case "h", "help":
			printer{stdout}.text(callUsage)
			return exitOK
		default:
			return callUsageError(stderr, "unknown flag "+a)
		}
	}
	if cfgPath == "" {
		return callUsageError(stderr, "--config FILE is required")
	}
	if len(rest) != 2 {
		return callUsageError(stderr, "give the tool and its JSON arguments: TOOL JSON")
	}
	tool, rawArgs := rest[0], json.RawMessage(rest[1])
	if !json.Valid(rawArgs) {
		return callUsageError(stderr, fmt.Sprintf("the arguments are not valid JSON: %s", rawArgs))
	}
	cfg, ok := loadConfig("call", cfgPath, stderr)
	if !ok {
		return exitUsage
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	st, ok := openStore("call", cfg.Store, stderr)
	if !ok {
		return exitFail
	}
	defer st.Close()
	h, err := host.New(host.Options{Logger: slog.New(slog.NewTextHandler(stderr, logOptions(level))), Store: st,
		RefsDir: filepath.Join(filepath.Dir(cfg.Store), "refs")})
	if err != nil {
		printer{stderr}.linef("mcplhost call: %v", err)
		return exitFail
	}
	defer h.Close()
	// A call runs no agents: they would answer the servers' traffic
	// meanwhile (mcplhost run is where they run).
	noAgents := *cfg
	noAgents.Agents = nil
	h.Start(&noAgents)
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-h.Settled():
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	res, err := h.CallTool(ctx, tool, rawArgs)
	if err != nil {
		printer{stdout}.linef("error: %s", err)
		return exitFail
	}
	printer{stdout}.linef("ok")
	printer{stdout}.block(h.ResultText(tool, res), "")
	return exitOK
}

// loadConfig loads a configuration file for command, printing each
// problem (or why it can't be read) to stderr.
func loadConfig(command, path string, stderr io.Writer) (*config.Config, bool) {
	cfg, err := config.Load(path)
	if err == nil {
		return cfg, true
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			printer{stderr}.linef("%s", p)
		}
	} else {
		printer{stderr}.linef("mcplhost %s: %v", command, err)
	}
	return nil, false
}

func callUsageError(stderr io.Writer, msg string) int {
	printer{stderr}.usageError(callUsage, "mcplhost call: %s", msg)
	return exitUsage
}
