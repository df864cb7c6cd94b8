package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/testbin"
	"github.com/mcpl-go/mcpl/internal/testserver"
)

// TestMain removes the built servers, then fails the run if any test left a
// goroutine behind: a connect, a refresh, a session's watcher or redial, a
// server process's wait.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testserver.Cleanup()
		hostile.Cleanup()
		chanserver.Cleanup()
		sdkServer.Cleanup()
		os.Exit(code)
	}))
}

// waitFor bounds every wait on a real server; reaching it fails the test.
const waitFor = 10 * time.Second

// adMCPL is the test server's MCPL advertisement where a test wants an MCPL
// server rather than a plain one.
const adMCPL = `{"version":"0.5","pushEvents":true,"featureSets":{"chat":{"description":"chat events","uses":["pushEvents"]}}}`

// ---- configuration ----

// parse builds a configuration from YAML, as an operator's file would.
func parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yaml, err)
	}
	return cfg
}

// server builds one server's configuration from the YAML of its entry
// (without the leading "- ").
func server(t testing.TB, entry string) config.Server {
	t.Helper()
	cfg := parse(t, "servers:\n  - "+strings.ReplaceAll(strings.TrimSpace(entry), "\n", "\n    ")+"\n")
	if len(cfg.Servers) != 1 {
		t.Fatalf("want one server, got %d", len(cfg.Servers))
	}
	return cfg.Servers[0]
}

// list renders argv as a YAML flow sequence (JSON is YAML).
func list(argv ...string) string {
	b, _ := json.Marshal(argv)
	return string(b)
}

// testserverBin is the test server's program.
func testserverBin(t testing.TB) string { return testserver.Binary(t) }

// ts is the command of the test server with flags.
func ts(t testing.TB, flags ...string) string {
	return list(append([]string{testserver.Binary(t)}, flags...)...)
}

// ---- the host ----

// newHost returns a host logging into a recorder, closed at cleanup.
func newHost(t testing.TB) (*host.Host, *recorder) {
	t.Helper()
	rec := newRecorder()
	h, err := host.New(host.Options{Logger: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, rec
}

// call calls a tool with JSON arguments and returns the result's text, or
// the error's (what a caller reads).
func call(t testing.TB, h *host.Host, name, args string) (string, error) {
	t.Helper()
	res, err := h.CallTool(context.Background(), name, json.RawMessage(args))
	if err != nil {
		var te *host.ToolError
		if !errors.As(err, &te) {
			t.Fatalf("CallTool(%s) = %T %v, want a *host.ToolError", name, err, err)
		}
		return "", err
	}
	return res.Text(), nil
}

// wantOK calls a tool and wants its text.
func wantOK(t testing.TB, h *host.Host, name, args, want string) {
	t.Helper()
	got, err := call(t, h, name, args)
	if err != nil || got != want {
		t.Fatalf("CallTool(%s, %s) = %q, %v; want %q", name, args, got, err, want)
	}
}

// wantRefused calls a tool and wants it to fail with exactly want.
func wantRefused(t testing.TB, h *host.Host, name, args, want string) *host.ToolError {
	t.Helper()
	_, err := call(t, h, name, args)
	if err == nil {
		t.Fatalf("CallTool(%s) succeeded; want %q", name, want)
	}
	if err.Error() != want {
		t.Fatalf("CallTool(%s) reads\n  %q\nwant\n  %q", name, err.Error(), want)
	}
	var te *host.ToolError
	errors.As(err, &te)
	return te
}

// toolNames returns the names Tools lists.
func toolNames(h *host.Host) []string {
	var out []string
	for _, tl := range h.Tools() {
		out = append(out, tl.Name)
	}
	return out
}

// prefixed returns each of names with prefix and "--" before it.
func prefixed(prefix string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + "--" + n
	}
	return out
}

// testserverTools are the test server's tool names, in its order.
func testserverTools() []string {
	var out []string
	for _, tl := range testserver.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// ---- FIFOs ----

// hold makes a FIFO for the test server's -hold-initialize: the server's
// initialize answer waits until release is called. A hold never released
// is released at cleanup, if the server is still waiting on it.
func hold(t testing.TB) (path string, release func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "hold")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			// The server opens the FIFO for reading when initialize
			// arrives; opening it for writing meets it there.
			openFIFO(t, path, os.O_WRONLY)
		})
	}
	t.Cleanup(func() {
		once.Do(func() {
			// Without waiting: the server may be gone, or never have come.
			if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		})
	})
	return path, release
}

// spawned makes a FIFO a wrapper command opens for writing as it starts
// (see wrapped), and returns a func that waits for that: once it returns,
// the host has spawned the server's process.
func spawned(t testing.TB) (path string, wait func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "spawned")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() { t.Helper(); openFIFO(t, path, os.O_RDONLY) }
}

// wrapped is a command that opens signal for writing (meeting spawned's
// wait), then runs argv.
func wrapped(signal string, argv ...string) string {
	return list(append([]string{"sh", "-c", `: > "$0" && exec "$@"`, signal}, argv...)...)
}

// openFIFO opens a FIFO, which waits for the other end, and closes it. It
// fails the test if the other end does not come within waitFor, opening the
// other end itself to end the wait.
func openFIFO(t testing.TB, path string, flag int) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, flag, 0)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitFor):
		other := os.O_RDONLY
		if flag == os.O_RDONLY {
			other = os.O_RDWR
		}
		if f, err := os.OpenFile(path, other|syscall.O_NONBLOCK, 0); err == nil {
			<-done
			f.Close()
		}
		t.Fatalf("nothing opened the other end of %s within %s", path, waitFor)
	}
}

// ---- the official SDK's plain MCP server ----

// sdkServer is internal/mcpsdkserver, built once per test process.
var sdkServer = func() *testbin.Program {
	_, file, _, _ := runtime.Caller(0)
	return &testbin.Program{Dir: filepath.Dir(file), Pkg: "../internal/mcpsdkserver", Name: "mcpsdkserver"}
}()

// sdkBinary returns the built SDK server's path.
func sdkBinary(t testing.TB) string { return sdkServer.Path(t) }

// ---- log capture ----

// recorder captures what a host logs.
type recorder = logtest.Recorder

func newRecorder() *recorder { return logtest.New() }

// logCount counts the records with message msg about server id ("" for
// any).
func logCount(rec *recorder, msg, id string) int {
	return countLogs(rec.All(), msg, id)
}

func countLogs(recs []logtest.Record, msg, id string) int {
	n := 0
	for _, r := range recs {
		if r.Message == msg && (id == "" || r.Attr("server") == id) {
			n++
		}
	}
	return n
}

// waitLog returns once n records with message msg about server id have
// been logged.
func waitLog(t testing.TB, rec *recorder, msg, id string, n int) {
	t.Helper()
	rec.WaitFunc(t, fmt.Sprintf("%d log records %q for %q", n, msg, id), func(recs []logtest.Record) bool {
		return countLogs(recs, msg, id) >= n
	})
}

// Log messages the tests wait for.
const (
	logListed      = "tools listed"
	logLeft        = "server left the registry: its connection ended and it will not reconnect"
	logFailed      = "server failed to connect"
	logReconnected = "reconnected"
)
