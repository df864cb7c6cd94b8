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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/status"
)

const runUsage = `usage: mcplhost run --config FILE [--transcript FILE] [--status ADDR] [--log-format text|json] [--log-level L | -v]

Runs the host from a configuration file: opens the store the file names,
starts its agents, connects its servers, and runs until SIGINT, SIGTERM,
SIGHUP or SIGQUIT. Then it stops in order: no new turn starts, the turns in flight have 10s to
end by themselves (then they are cut short and recorded), lifecycle work
in flight finishes, and the servers and the store close. A second signal
exits at once. --transcript appends every agent's turns to FILE as JSON
lines (docs/transcript.md); they are kept in the store too. The log
goes to stderr, as text or JSON lines (--log-format), at warn level and above;
-v (--log-level info) adds operator detail and each line the servers write
to their stderr, --log-level debug the host's own detail too. With
--log-format json every line run writes to stderr once its flags are read
is JSON: what it says outside the log (the status page's address, why it
could not start, a stop by signal) is a record too.

--status ADDR serves a live status page, /healthz, /metrics (Prometheus)
and /api/servers, /api/channels and /api/agents (docs/status.md) at ADDR:
127.0.0.1:PORT, or PORT alone for loopback. It binds beyond loopback only
when ADDR names another address; anyone who can reach it reads what it
shows. 0.0.0.0 binds IPv4 only, [::] IPv6 only. It answers only requests
whose Host header names ADDR (or localhost on loopback), 421 to others.
Off by default.

Exit status: 128+N after a stop by signal N (130 for SIGINT, 143 for
SIGTERM, 129 for SIGHUP, 131 for SIGQUIT), 1 when the host can't start, 2
for usage or configuration errors.
`

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfgPath, transcript, statusAddr string
	level, logFormat := slog.LevelWarn, "text"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return runUsageError(stderr, fmt.Sprintf("unexpected argument %q", a))
		}
		f := splitFlag(args, &i)
		switch f.name {
		case "config":
			v, ok := f.value()
			if !ok || v == "" {
				return runUsageError(stderr, "--config needs a file")
			}
			cfgPath = v
		case "transcript":
			v, ok := f.value()
			if !ok || v == "" {
				return runUsageError(stderr, "--transcript needs a file")
			}
			transcript = v
		case "status":
			v, ok := f.value()
			if !ok {
				return runUsageError(stderr, "--status needs an address (127.0.0.1:PORT)")
			}
			a, err := status.ListenAddr(v)
			if err != nil {
				return runUsageError(stderr, fmt.Sprintf("--status %q: %v", v, err))
			}
			statusAddr = a
		case "log-format":
			v, ok := f.value()
			if !ok || (v != "text" && v != "json") {
				return runUsageError(stderr, fmt.Sprintf("--log-format %q is not text or json", v))
			}
			logFormat = v
		case "log-level":
			v, ok := f.value()
			if !ok || level.UnmarshalText([]byte(v)) != nil {
				return runUsageError(stderr, fmt.Sprintf("--log-level %q is not debug, info, warn or error", v))
			}
		case "v", "verbose":
			// -v asks for info at least: it never hides what --log-level
			// debug shows, whichever comes first.
			on, err := f.on()
			if err != nil {
				return runUsageError(stderr, err.Error())
			}
			if on {
				level = min(level, slog.LevelInfo)
			}
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
	handler := runLogHandler(stderr, logFormat, level)
	log := slog.New(handler)
	// What run says outside its log: plain lines, or with a JSON log
	// records too (logLines), so that every line on stderr is JSON.
	errOut, infoOut := stderr, stderr
	if logFormat == "json" {
		errOut = logLines{h: handler, level: slog.LevelError, prefix: "mcplhost run: "}
		infoOut = logLines{h: handler, level: slog.LevelInfo, prefix: "mcplhost run: "}
		if es, ok := stderr.(*stderrSink); ok {
			es.note = func(msg string) { logRecord(handler, slog.LevelInfo, msg) }
		}
	}
	cfg, ok := loadConfig("run", cfgPath, errOut)
	if !ok {
		return exitUsage
	}
	reconnectByDefault(cfg)
	var tw io.Writer
	if transcript != "" {
		f, err := os.OpenFile(transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			printer{errOut}.linef("mcplhost run: the transcript: %v", err)
			return exitFail
		}
		defer f.Close()
		startOwnLine(f, transcript)
		tw = f
	}
	st, ok := openStore("run", cfg.Store, errOut)
	if !ok {
		return exitFail
	}
	defer st.Close()
	opts := host.Options{Logger: log, Store: st, Transcript: tw, ShutdownGrace: runShutdownGrace,
		RefsDir: filepath.Join(filepath.Dir(cfg.Store), "refs")}
	var reg *prometheus.Registry
	if statusAddr != "" {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		opts.Metrics = reg
	}
	h, err := host.New(opts)
	if err != nil {
		printer{errOut}.linef("mcplhost run: %v", err)
		return exitFail
	}
	defer h.Close()
	if statusAddr != "" {
		srv, err := status.Start(statusAddr, h, reg, log)
		if err != nil {
			printer{errOut}.linef("mcplhost run: the status server: %v", err)
			return exitFail
		}
		defer srv.Close()
		if !srv.Loopback() {
			log.Warn("the status server listens beyond loopback: anyone who can reach it reads the grants, channels and what the agents said", "addr", srv.Addr())
		}
		printer{infoOut}.linef("mcplhost run: status page at %s", srv.URL())
	}
	if err := h.Start(cfg); err != nil {
		printer{errOut}.linef("mcplhost run: %v", err)
		return exitFail
	}
	<-ctx.Done()
	return exitOK
}

// reconnectByDefault turns reconnect on for each server whose file does
// not write reconnect.enabled: run is the daemon, and a server that
// restarts or drops its connection should come back without an operator
// (with the file's backoff, else 5s doubling to 5m). A file's explicit
// enabled: false still wins. The one-shot commands (call, check, probe)
// keep the package's default, off: they report a failure rather than
// wait it out.
func reconnectByDefault(cfg *config.Config) {
	for i := range cfg.Servers {
		if r := &cfg.Servers[i].Reconnect; !r.EnabledSet {
			r.Enabled = true
		}
	}
}

// runShutdownGrace is how long run lets turns in flight end at a stop.
const runShutdownGrace = 10 * time.Second

func runUsageError(stderr io.Writer, msg string) int {
	printer{stderr}.usageError(runUsage, "mcplhost run: %s", msg)
	return exitUsage
}
