package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/transport"
)

// TestRunJSONEveryLine: with --log-format json every line run writes to
// stderr is a JSON record, the lines it writes outside its log too: the
// status page's address as it starts, and the stop by SIGINT that
// mainCode says as the process ends. The binary runs as a process, so the
// stop line is the real one.
func TestRunJSONEveryLine(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("store: ./host.db\nservers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hostBinary(t), "run", "--config", cfg, "--log-format", "json", "--status", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "status page at") {
			break // it is up: stop it
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("mcplhost run did not stop within 60s; stderr:\n%s", strings.Join(lines, "\n"))
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d (%v), want 130 after SIGINT", code, err)
	}
	var status, stop bool
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("a stderr line that is not JSON: %s", l)
			continue
		}
		msg, _ := rec["msg"].(string)
		if rec["level"] == nil || rec["time"] == nil {
			t.Errorf("a record without a level or time: %s", l)
		}
		status = status || strings.HasPrefix(msg, "status page at http://127.0.0.1:")
		stop = stop || msg == "stopped (SIGINT); the servers it started are closed"
	}
	if !status || !stop {
		t.Errorf("status page record %v, stop record %v; stderr:\n%s", status, stop, strings.Join(lines, "\n"))
	}
}

// TestRunJSONConfigErrors: a config file that doesn't load is exit 2, and
// with --log-format json each of its problems is a record at error level,
// the file's words in msg.
func TestRunJSONConfigErrors(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(cfg, []byte("stor: x\nservers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"run", "--config", cfg, "--log-format", "json"}, io.Discard, &stderr)
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	var rec map[string]any
	if err := json.Unmarshal(stderr.Bytes(), &rec); err != nil {
		t.Fatalf("stderr is not one JSON record: %q", stderr.String())
	}
	if want := cfg + ":1: stor: unknown key (did you mean store?)"; rec["msg"] != want || rec["level"] != "ERROR" {
		t.Errorf("record %v, want msg %q at ERROR", rec, want)
	}
}

// The handler run logs with shows a server's stderr line at info, and
// leaves every other debug record at debug.
func TestServerStderrAtInfo(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(runLogHandler(&b, "json", slog.LevelInfo)).With("server", "room")
	log.Debug("host detail")
	log.Debug(transport.StderrLineMessage, "line", "hello")
	log.Info("operator detail")
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(got) != 2 || !strings.Contains(got[0], `"level":"INFO","msg":"server stderr","server":"room","line":"hello"`) || !strings.Contains(got[1], `"msg":"operator detail"`) {
		t.Errorf("at info:\n%s", b.String())
	}
	b.Reset()
	log = slog.New(runLogHandler(&b, "text", slog.LevelWarn))
	log.Debug(transport.StderrLineMessage, "line", "hello")
	if b.Len() != 0 {
		t.Errorf("at warn, a server's stderr line was shown: %s", b.String())
	}
	b.Reset()
	log = slog.New(runLogHandler(&b, "text", slog.LevelDebug))
	log.Debug("host detail")
	if !strings.Contains(b.String(), "level=DEBUG msg=\"host detail\"") {
		t.Errorf("at debug: %s", b.String())
	}
}

// run redials by default: a server whose file says nothing about
// reconnect.enabled gets it on, with the file's backoff or the default;
// an explicit false or true is kept.
func TestRunReconnectByDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.yaml")
	src := "servers:\n" +
		"  - {id: plain, command: [sh]}\n" +
		"  - {id: slow, command: [sh], reconnect: {initial: 1s, max: 30s}}\n" +
		"  - {id: off, command: [sh], reconnect: {enabled: false}}\n" +
		"  - {id: on, command: [sh], reconnect: {enabled: true}}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Servers {
		if s.ID != "on" && s.Reconnect.Enabled {
			t.Errorf("%s: loaded with reconnect on; the package's default is off", s.ID)
		}
	}
	reconnectByDefault(cfg)
	want := map[string]config.Reconnect{
		"plain": {Enabled: true, Initial: config.DefaultReconnectInitial, Max: config.DefaultReconnectMax},
		"slow":  {Enabled: true, Initial: time.Second, Max: 30 * time.Second},
		"off":   {Enabled: false, EnabledSet: true, Initial: config.DefaultReconnectInitial, Max: config.DefaultReconnectMax},
		"on":    {Enabled: true, EnabledSet: true, Initial: config.DefaultReconnectInitial, Max: config.DefaultReconnectMax},
	}
	for _, s := range cfg.Servers {
		if got := s.Reconnect; got != want[s.ID] {
			t.Errorf("%s: %+v, want %+v", s.ID, got, want[s.ID])
		}
	}
}
