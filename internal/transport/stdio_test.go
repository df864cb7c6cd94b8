package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/protocol"
)

// spawn starts cmd and stops it when the test ends.
func spawn(t *testing.T, cmd transport.Command, opts transport.StdioOptions) *transport.Process {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	p, err := transport.Spawn(cmd, opts)
	if err != nil {
		t.Fatalf("Spawn(%q): %v", cmd.Argv, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func sh(script string, args ...string) transport.Command {
	return transport.Command{Argv: append([]string{"sh", "-c", script}, args...)}
}

// initialize sends an initialize request and returns the server's answer.
func initialize(t *testing.T, s transport.Stream) (id int, serverName, version string) {
	t.Helper()
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"transport-test","version":"0"}}}`,
		protocol.MethodInitialize, protocol.ProtocolVersion)
	if err := s.Write(testCtx(t, testTimeout), []byte(req)); err != nil {
		t.Fatalf("Write initialize: %v", err)
	}
	msg, err := readWithin(t, s, testTimeout)
	if err != nil {
		t.Fatalf("Read initialize answer: %v", err)
	}
	var resp struct {
		ID     int `json:"id"`
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct {
				Name string `json:"name"`
			} `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &resp); err != nil {
		t.Fatalf("initialize answer %q: %v", msg, err)
	}
	return resp.ID, resp.Result.ServerInfo.Name, resp.Result.ProtocolVersion
}

// assertReaped checks that pid is gone: exited and waited for, no zombie.
func assertReaped(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) = %v, want ESRCH: the process is still there (or a zombie)", pid, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/proc/%d still exists (err %v)", pid, err)
	}
}

func TestSpawnInitializeRoundTrip(t *testing.T) {
	t.Parallel()
	p := spawn(t, transport.Command{Argv: []string{testserver.Binary(t), "-name", "round-trip"}}, transport.StdioOptions{})
	id, name, version := initialize(t, p)
	if id != 1 || name != "round-trip" || version != protocol.ProtocolVersion {
		t.Errorf("initialize answer: id %d, server %q, version %q; want 1, \"round-trip\", %q", id, name, version, protocol.ProtocolVersion)
	}
	if p.CloseInfo().Exited {
		t.Errorf("CloseInfo says exited while the server runs: %+v", p.CloseInfo())
	}
}

func TestSpawnEnvironment(t *testing.T) {
	// Not parallel: it sets this process's environment.
	t.Setenv("LC_MCPLTEST", "lc-value")
	t.Setenv("TZ", "Europe/Paris")
	t.Setenv("HOME", "/home/parent")
	t.Setenv("MCPL_TEST_SECRET", "do-not-pass")
	tests := []struct {
		name    string
		inherit bool
		want    map[string]string // "" means absent
	}{
		{"base only", false, map[string]string{
			"LC_MCPLTEST": "lc-value", "TZ": "Europe/Paris", "PATH": os.Getenv("PATH"),
			"HOME": "/srv/override", "MCPL_EXTRA": "extra value", "MCPL_TEST_SECRET": "",
		}},
		{"inherit", true, map[string]string{
			"LC_MCPLTEST": "lc-value", "TZ": "Europe/Paris", "PATH": os.Getenv("PATH"),
			"HOME": "/srv/override", "MCPL_EXTRA": "extra value", "MCPL_TEST_SECRET": "do-not-pass",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := spawn(t, transport.Command{
				Argv:       []string{"env"},
				Env:        []string{"HOME=/srv/override", "MCPL_EXTRA=extra value"},
				InheritEnv: tt.inherit,
			}, transport.StdioOptions{})
			lines, err := readUntilErr(t, p, testTimeout)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("reading env's output: %v", err)
			}
			got := map[string]string{}
			for _, l := range lines {
				name, value, _ := strings.Cut(l, "=")
				if _, dup := got[name]; dup {
					t.Errorf("%s appears twice in the child's environment", name)
				}
				got[name] = value
			}
			for name, want := range tt.want {
				if got[name] != want {
					t.Errorf("child's %s = %q, want %q", name, got[name], want)
				}
			}
			if !tt.inherit {
				for name := range got {
					switch {
					case slices.Contains([]string{"PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "SHELL", "MCPL_EXTRA"}, name),
						strings.HasPrefix(name, "LC_"):
					case name == "PWD" || name == "SHLVL" || name == "_":
						// A shell in between might add these; env itself does not.
					default:
						t.Errorf("child got %s without InheritEnv", name)
					}
				}
			}
		})
	}
}

func TestSpawnDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := spawn(t, transport.Command{Argv: []string{"pwd", "-P"}, Dir: dir}, transport.StdioOptions{})
	msg, err := readWithin(t, p, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(dir)
	if string(msg) != want {
		t.Errorf("child's working directory = %q, want %q", msg, want)
	}
}

func TestSpawnErrors(t *testing.T) {
	t.Parallel()
	if p, err := transport.Spawn(transport.Command{}, transport.StdioOptions{}); err == nil {
		p.Close()
		t.Error("Spawn of an empty command succeeded")
	}
	missing := "mcpl-no-such-program-" + strconv.Itoa(os.Getpid())
	p, err := transport.Spawn(transport.Command{Argv: []string{missing}}, transport.StdioOptions{})
	if err == nil {
		p.Close()
		t.Fatal("Spawn of a missing program succeeded")
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("Spawn error %q does not name the program", err)
	}
}

func TestExitStatusInCloseInfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  transport.Command
		want transport.CloseInfo
	}{
		{"exit 0", sh("exit 0"), transport.CloseInfo{Exited: true, ExitCode: 0}},
		{"exit 7", sh("exit 7"), transport.CloseInfo{Exited: true, ExitCode: 7}},
		{"killed", sh("kill -KILL $$"), transport.CloseInfo{Exited: true, ExitCode: -1, Signal: "SIGKILL"}},
		{"terminated", sh("kill -TERM $$"), transport.CloseInfo{Exited: true, ExitCode: -1, Signal: "SIGTERM"}},
		{"hung up", sh("kill -HUP $$"), transport.CloseInfo{Exited: true, ExitCode: -1, Signal: "SIGHUP"}},
		{"other signal", sh("kill -USR1 $$"), transport.CloseInfo{Exited: true, ExitCode: -1, Signal: "user defined signal 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := spawn(t, tt.cmd, transport.StdioOptions{})
			if _, err := readWithin(t, p, testTimeout); !errors.Is(err, io.EOF) {
				t.Fatalf("Read = %v, want io.EOF", err)
			}
			if diff := cmp.Diff(tt.want, p.CloseInfo()); diff != "" {
				t.Errorf("CloseInfo (-want +got):\n%s", diff)
			}
			select {
			case <-p.Exited():
			default:
				t.Error("Exited() not closed though Read saw the exit")
			}
		})
	}
}

// The real test server, told to end itself.
func TestTestServerExitInCloseInfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, args string
		want       transport.CloseInfo
		wantTail   string
	}{
		{"status", `{"code":5}`, transport.CloseInfo{Exited: true, ExitCode: 5}, "testserver: exiting with status 5 as asked"},
		{"signal", `{"signal":"TERM"}`, transport.CloseInfo{Exited: true, ExitCode: -1, Signal: "SIGTERM"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := spawn(t, transport.Command{Argv: []string{testserver.Binary(t)}}, transport.StdioOptions{})
			req := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exit","arguments":` + tt.args + `}}`
			if err := p.Write(testCtx(t, testTimeout), []byte(req)); err != nil {
				t.Fatal(err)
			}
			if msg, err := readWithin(t, p, testTimeout); !errors.Is(err, io.EOF) {
				t.Fatalf("Read = %q, %v; want io.EOF", msg, err)
			}
			info := p.CloseInfo()
			if !strings.Contains(info.StderrTail, tt.wantTail) {
				t.Errorf("StderrTail = %q, want it to contain %q", info.StderrTail, tt.wantTail)
			}
			info.StderrTail = ""
			if diff := cmp.Diff(tt.want, info); diff != "" {
				t.Errorf("CloseInfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCloseStopsTheServer(t *testing.T) {
	t.Parallel()
	bin := testserver.Binary(t)
	tests := []struct {
		name       string
		args       []string
		stopWait   time.Duration
		wantSignal string
		minTime    time.Duration
	}{
		// A long StopWait: Close must not wait it out when the server
		// exits on its own.
		{"exits on stdin close", nil, 20 * time.Second, "", 0},
		{"needs SIGTERM", []string{"-ignore-stdin-close"}, 200 * time.Millisecond, "SIGTERM", 200 * time.Millisecond},
		{"needs SIGKILL", []string{"-ignore-stdin-close", "-ignore-sigterm"}, 200 * time.Millisecond, "SIGKILL", 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &logRecorder{}
			p := spawn(t, transport.Command{Argv: append([]string{bin}, tt.args...)},
				transport.StdioOptions{StopWait: tt.stopWait, Logger: slog.New(rec)})
			// A round trip first, so the server has set up its signal
			// handling before it is stopped.
			initialize(t, p)
			pid := p.Pid()
			start := time.Now()
			if err := p.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			elapsed := time.Since(start)
			if elapsed < tt.minTime {
				t.Errorf("Close took %s; the server cannot have had its %s of grace", elapsed, tt.minTime)
			}
			if max := tt.minTime + 5*time.Second; elapsed > max {
				t.Errorf("Close took %s, want under %s", elapsed, max)
			}
			info := p.CloseInfo()
			if !info.Exited || info.Signal != tt.wantSignal {
				t.Errorf("CloseInfo = %+v, want exited with signal %q", info, tt.wantSignal)
			}
			if tt.wantSignal == "" && info.ExitCode != 0 {
				t.Errorf("exit code %d, want 0", info.ExitCode)
			}
			assertReaped(t, pid)
			select {
			case <-p.Exited():
			default:
				t.Error("Exited() not closed after Close")
			}
			if _, attrs, ok := rec.Find("server process stopped"); !ok {
				t.Error(`no "server process stopped" log record`)
			} else if tt.wantSignal != "" && attrs["signal"].String() != tt.wantSignal {
				t.Errorf("stop logged with signal %q, want %q", attrs["signal"], tt.wantSignal)
			}
			// Closed means closed.
			if _, err := p.Read(); !errors.Is(err, transport.ErrClosed) {
				t.Errorf("Read after Close = %v, want ErrClosed", err)
			}
			if err := p.Write(context.Background(), []byte("{}")); !errors.Is(err, transport.ErrClosed) {
				t.Errorf("Write after Close = %v, want ErrClosed", err)
			}
			if err := p.Close(); err != nil {
				t.Errorf("second Close = %v", err)
			}
		})
	}
}

func TestCloseStopsTheProcessGroup(t *testing.T) {
	t.Parallel()
	// The shell ignores its stdin closing and waits for its child; both get
	// SIGTERM, as the process group does.
	p := spawn(t, sh("sleep 30 & echo $!; wait"), transport.StdioOptions{StopWait: 100 * time.Millisecond})
	msg, err := readWithin(t, p, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(string(msg))
	if err != nil {
		t.Fatalf("child pid %q: %v", msg, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := p.CloseInfo().Signal; got != "SIGTERM" {
		t.Errorf("shell ended by %q, want SIGTERM", got)
	}
	// The orphaned child is reaped by init, which takes its own time: poll.
	deadline := time.Now().Add(testTimeout)
	for processAlive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's child %d outlived Close", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

func TestCloseUnblocksRead(t *testing.T) {
	t.Parallel()
	p := spawn(t, transport.Command{Argv: []string{testserver.Binary(t)}}, transport.StdioOptions{StopWait: time.Second})
	initialize(t, p)
	done := make(chan error, 1)
	go func() {
		_, err := p.Read()
		done <- err
	}()
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Read across Close = %v, want ErrClosed", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Read still blocked after Close")
	}
}

func TestStderrTailInCloseInfo(t *testing.T) {
	t.Parallel()
	rec := &logRecorder{}
	p := spawn(t, sh(`echo one >&2; echo two >&2; printf 'no newline' >&2; exit 3`), transport.StdioOptions{Logger: slog.New(rec)})
	if _, err := readWithin(t, p, testTimeout); !errors.Is(err, io.EOF) {
		t.Fatalf("Read = %v, want io.EOF", err)
	}
	want := transport.CloseInfo{Exited: true, ExitCode: 3, StderrTail: "one\ntwo\nno newline"}
	if diff := cmp.Diff(want, p.CloseInfo()); diff != "" {
		t.Errorf("CloseInfo (-want +got):\n%s", diff)
	}
	// The exit is logged once, with the tail, at warning level for a
	// failure.
	p.Close()
	lvl, attrs, ok := rec.Find("server process exited")
	if !ok {
		t.Fatal(`no "server process exited" log record`)
	}
	if lvl != slog.LevelWarn || attrs["exit_code"].Int64() != 3 || attrs["stderr_tail"].String() != want.StderrTail {
		t.Errorf("exit logged at %v with %v; want warn, exit_code 3 and the tail", lvl, attrs)
	}
	if _, attrs, _ := rec.Find("server stderr"); attrs["line"].String() != "one" {
		t.Errorf("first stderr line logged as %v, want \"one\"", attrs["line"])
	}
}

func TestStderrTailIsBounded(t *testing.T) {
	t.Parallel()
	p := spawn(t, sh(`i=0; while [ $i -lt 200 ]; do echo "err $i" >&2; i=$((i+1)); done`), transport.StdioOptions{})
	if _, err := readWithin(t, p, testTimeout); !errors.Is(err, io.EOF) {
		t.Fatalf("Read = %v, want io.EOF", err)
	}
	lines := strings.Split(p.CloseInfo().StderrTail, "\n")
	if len(lines) != 64 || lines[0] != "err 136" || lines[63] != "err 199" {
		t.Errorf("tail has %d lines, %q ... %q; want the last 64, err 136 ... err 199", len(lines), lines[0], lines[len(lines)-1])
	}
}

func TestOversizeStdoutLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		n, max int
		tooBig bool
	}{
		{"at the limit", 1000, 1000, false},
		{"one over", 1001, 1000, true},
		{"far over", 5000, 1000, true},
		{"beyond the read buffer, at the limit", 100 << 10, 100 << 10, false},
		{"beyond the read buffer, far over", 300 << 10, 100 << 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := spawn(t, sh(`head -c "$1" /dev/zero | tr '\000' x; echo; echo after`, "sh", strconv.Itoa(tt.n)),
				transport.StdioOptions{MaxMessageSize: tt.max, StopWait: 200 * time.Millisecond})
			msg, err := readWithin(t, p, testTimeout)
			if !tt.tooBig {
				if err != nil || len(msg) != tt.n {
					t.Fatalf("Read = %d bytes, %v; want %d bytes", len(msg), err, tt.n)
				}
				if msg, err := readWithin(t, p, testTimeout); err != nil || string(msg) != "after" {
					t.Errorf("next Read = %q, %v; want \"after\"", msg, err)
				}
				return
			}
			if !tooLarge(err, tt.max) {
				t.Fatalf("Read = %d bytes, %v; want *TooLargeError with limit %d", len(msg), err, tt.max)
			}
			// The rest of the line, or the next one, is not a message.
			if _, err := readWithin(t, p, testTimeout); !tooLarge(err, tt.max) {
				t.Errorf("Read after too large = %v, want the *TooLargeError again", err)
			}
		})
	}
}

// fillStdin writes messages of size bytes to a process that is not reading
// until a write fails, each write bounded by d, and returns that failure and
// how long the failing write took.
func fillStdin(t *testing.T, p *transport.Process, size int, d time.Duration) (error, time.Duration) {
	t.Helper()
	msg := []byte(strings.Repeat("m", size))
	for range 10000 {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		start := time.Now()
		err := p.Write(ctx, msg)
		took := time.Since(start)
		cancel()
		if err != nil {
			return err, took
		}
	}
	t.Fatal("stdin never filled")
	return nil, 0
}

func TestWriteDeadlineWhenChildDoesNotRead(t *testing.T) {
	t.Parallel()
	t.Run("whole message abandoned", func(t *testing.T) {
		t.Parallel()
		p := spawn(t, transport.Command{Argv: []string{"sleep", "30"}}, transport.StdioOptions{StopWait: 100 * time.Millisecond})
		// Messages under PIPE_BUF go into the pipe whole or not at all.
		err, took := fillStdin(t, p, 1000, 200*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transport.ErrPartialWrite) {
			t.Fatalf("Write into a full pipe = %v, want context.DeadlineExceeded alone", err)
		}
		if took > 5*time.Second {
			t.Errorf("the abandoned Write took %s", took)
		}
		// Nothing went part way, so the stream is still open.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := p.Write(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
			t.Errorf("next Write with a canceled context = %v, want context.Canceled", err)
		}
	})
	t.Run("message abandoned part way", func(t *testing.T) {
		t.Parallel()
		p := spawn(t, transport.Command{Argv: []string{"sleep", "30"}}, transport.StdioOptions{StopWait: 100 * time.Millisecond})
		err, took := fillStdin(t, p, 1<<20, 200*time.Millisecond)
		if !errors.Is(err, transport.ErrPartialWrite) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Write of a message larger than the pipe = %v, want ErrPartialWrite and context.DeadlineExceeded", err)
		}
		if took > 5*time.Second {
			t.Errorf("the abandoned Write took %s", took)
		}
		// The framing is lost: the stream has closed itself at once.
		if err := p.Write(context.Background(), []byte("x")); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Write after a partial write = %v, want ErrClosed", err)
		}
		if _, err := p.Read(); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Read after a partial write = %v, want ErrClosed", err)
		}
		select {
		case <-p.Exited():
		case <-time.After(testTimeout):
			t.Error("the process was not stopped after the partial write")
		}
	})
}

// After a write abandoned at its deadline, the next write is not refused
// by a deadline left behind.
func TestWriteAfterAbandonedWrite(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The child reads its stdin only once the test says so.
	p := spawn(t, sh(`read go < "$1"; exec cat >/dev/null`, "sh", fifo), transport.StdioOptions{StopWait: time.Second})
	if err, _ := fillStdin(t, p, 1000, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transport.ErrPartialWrite) {
		t.Fatalf("Write into a full pipe = %v, want context.DeadlineExceeded alone", err)
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("now\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := p.Write(testCtx(t, testTimeout), []byte(strings.Repeat("n", 1000))); err != nil {
			t.Fatalf("Write %d once the child reads = %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if info := p.CloseInfo(); info.Signal != "" || info.ExitCode != 0 {
		t.Errorf("child ended with %+v, want a clean exit on stdin close", info)
	}
}

func TestWriteToExitedProcess(t *testing.T) {
	t.Parallel()
	p := spawn(t, sh("exit 0"), transport.StdioOptions{})
	<-p.Exited()
	err := p.Write(testCtx(t, testTimeout), []byte("{}"))
	if !errors.Is(err, transport.ErrClosed) || !errors.Is(err, syscall.EPIPE) || errors.Is(err, transport.ErrPartialWrite) {
		t.Errorf("Write to an exited process = %v, want ErrClosed with EPIPE", err)
	}
	// Its exit is still for Read to report.
	if _, err := readWithin(t, p, testTimeout); !errors.Is(err, io.EOF) {
		t.Errorf("Read = %v, want io.EOF", err)
	}
	if info := p.CloseInfo(); !info.Exited || info.ExitCode != 0 {
		t.Errorf("CloseInfo = %+v, want exited 0", info)
	}
}

func TestCloseInfoLogAttrs(t *testing.T) {
	info := transport.CloseInfo{Exited: true, ExitCode: -1, Signal: "SIGKILL", StderrTail: "tail", WSCode: 1001, WSReason: "bye", Err: "broken"}
	got := map[string]string{}
	for _, a := range info.LogAttrs() {
		got[a.Key] = a.Value.String()
	}
	want := map[string]string{"exit_code": "-1", "signal": "SIGKILL", "ws_code": "1001", "ws_reason": "bye", "transport_error": "broken"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LogAttrs (-want +got):\n%s", diff)
	}
	if n := len(transport.CloseInfo{}.LogAttrs()); n != 0 {
		t.Errorf("zero CloseInfo has %d attrs, want none", n)
	}
	if n := len((transport.CloseInfo{ExitCode: 3}).LogAttrs()); n != 0 {
		t.Errorf("an exit code not known to be final was logged")
	}
}

// A program is found in the PATH the configured environment gives it.
func TestSpawnLooksUpTheProgramInTheChildsPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := "#!/bin/sh\necho \"found with PATH=$PATH\"\n"
	if err := os.WriteFile(filepath.Join(dir, "mcpl-path-test"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	childPath := dir + ":/usr/bin:/bin"
	p := spawn(t, transport.Command{Argv: []string{"mcpl-path-test"}, Env: []string{"PATH=" + childPath}}, transport.StdioOptions{})
	msg, err := readWithin(t, p, testTimeout)
	if err != nil || string(msg) != "found with PATH="+childPath {
		t.Errorf("Read = %q, %v; want the script's line", msg, err)
	}
	// And not in this process's PATH when the child's lacks it.
	if q, err := transport.Spawn(transport.Command{Argv: []string{"env"}, Env: []string{"PATH=" + dir}}, transport.StdioOptions{}); err == nil {
		q.Close()
		t.Error("Spawn found env outside the child's PATH")
	}
}

// A server that goes at once is reported as exiting on its own, with its
// stderr, though the host closes the stream before the exit is reaped:
// the first write found it gone.
func TestOwnExitBeforeCloseIsNotAStop(t *testing.T) {
	t.Parallel()
	rec := &logRecorder{}
	p := spawn(t, sh(`exec 0<&-; echo "no config found" >&2; sleep 0.3; exit 3`), transport.StdioOptions{Logger: slog.New(rec)})
	deadline := time.Now().Add(testTimeout)
	var err error
	for err == nil && time.Now().Before(deadline) {
		// Until its stdin's end is seen closed: the pipe takes a write or
		// two before the shell has closed it.
		err = p.Write(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`))
	}
	if !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Write = %v, want ErrClosed", err)
	}
	p.Close() // before the process (still sleeping) has exited
	lvl, attrs, ok := rec.Find("server process exited")
	if !ok {
		t.Fatalf(`no "server process exited" log record; stops logged: %d`, len(rec.All("server process stopped")))
	}
	if lvl != slog.LevelWarn || attrs["exit_code"].Int64() != 3 || attrs["stderr_tail"].String() != "no config found" {
		t.Errorf("exit logged at %v with %v; want warn, exit_code 3 and the tail", lvl, attrs)
	}
}
