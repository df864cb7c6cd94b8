package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/testserver"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	ts := testserver.Binary(t)
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"no command", nil, exitUsage},
		{"unknown command", []string{"nope"}, exitUsage},
		{"probe without server", []string{"probe"}, exitUsage},
		{"call without json", []string{"probe", "--call", "echo", "--", ts}, exitUsage},
		{"bad timeout", []string{"probe", "--timeout", "-1s", "--", ts}, exitUsage},
		{"token-env without url", []string{"probe", "--token-env", "T", "--", ts}, exitUsage},
		{"help", []string{"probe", "--help"}, exitOK},
		{"handshake works", []string{"probe", "--", ts}, exitOK},
		{"handshake works, call fails", []string{"probe", "--call", "fail", `{"message":"no"}`, "--", ts}, exitFail},
		{"handshake works, call fails, json", []string{"probe", "--json", "--call", "fail", `{"message":"no"}`, "--", ts}, exitFail},
		{"handshake works, call succeeds", []string{"probe", "--call", "echo", `{"text":"hi"}`, "--", ts}, exitOK},
		{"command missing", []string{"probe", "--", "/nonexistent/server"}, exitFail},
		{"server exits before answering", []string{"probe", "--", "sh", "-c", "exit 3"}, exitFail},
		{"server dies at initialize", []string{"probe", "--", ts, "-crash-after", "1"}, exitFail},
		{"server dies in a call", []string{"probe", "--call", "exit", `{"code":0}`, "--", ts}, exitFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.want, stderr)
			}
		})
	}
}

func TestDefaultID(t *testing.T) {
	for _, tc := range []struct {
		url  string
		argv []string
		want string
	}{
		{"", []string{"/usr/local/bin/discord-mcpl"}, "discord-mcpl"},
		{"", []string{"./server.py"}, "server"},
		{"", []string{"go", "run", "./examples/echo"}, "echo"},
		{"", []string{"go", "run", "-race", "./examples/chatroom/"}, "chatroom"},
		{"", []string{"node", "dist/index.js", "--port", "1"}, "index"},
		{"", []string{"python3", "-u", "heartbeat_mcpl.py"}, "heartbeat_mcpl"},
		{"", []string{"npx", "-y", "discord-mcpl"}, "discord-mcpl"},
		{"", []string{"go", "run", "."}, "server"},
		{"", []string{"sh", "-c", "exec ./srv --port 1"}, "sh"},
		{"", []string{"bash", "./start-server.sh"}, "start-server"},
		{"", []string{"node", "-e", "require('x')"}, "node"},
		{"ws://127.0.0.1:8080/mcpl", nil, "127.0.0.1"},
		{"wss://chat.example.com/mcpl?x=1", nil, "chat.example.com"},
	} {
		if got := defaultID(tc.url, tc.argv); got != tc.want {
			t.Errorf("defaultID(%q, %q) = %q, want %q", tc.url, tc.argv, got, tc.want)
		}
	}
}

func TestProbeJSON(t *testing.T) {
	ts := testserver.Binary(t)
	code, stdout, stderr := runCLI("probe", "--json", "--id", "chat",
		"--call", "echo", `{"text":"hi"}`,
		"--call", "fail", `{"message":""}`,
		"--", ts, "-mcpl", `{"version":"0.5","pushEvents":true}`)
	// The "fail" call failed: the report is complete, and the exit is 1.
	if code != exitFail {
		t.Fatalf("exit %d, want %d (a --call failed); stderr:\n%s", code, exitFail, stderr)
	}
	var got struct {
		Server map[string]any  `json:"server"`
		MCPL   json.RawMessage `json:"mcpl"`
		Tools  []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Calls []probeResult `json:"calls"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if diff := cmp.Diff(map[string]any{"id": "chat", "name": "testserver", "version": "1.0.0", "protocolVersion": "2024-11-05"}, got.Server); diff != "" {
		t.Errorf("server (-want +got):\n%s", diff)
	}
	var mcpl map[string]any
	if err := json.Unmarshal(got.MCPL, &mcpl); err != nil || mcpl["version"] != "0.5" || mcpl["pushEvents"] != true {
		t.Errorf("mcpl = %s, want the advertisement as sent", got.MCPL)
	}
	if len(got.Tools) != len(testserver.Tools) || got.Tools[0].Name != "echo" {
		t.Errorf("tools = %v, want the test server's %d tools", got.Tools, len(testserver.Tools))
	}
	want := []probeResult{
		{Name: "echo", OK: true, Text: "hi"},
		{Name: "fail", OK: false, Text: `tools/call to "chat": error -32000`},
	}
	if diff := cmp.Diff(want, got.Calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestProbeJSONPlainServer(t *testing.T) {
	code, stdout, stderr := runCLI("probe", "--json", "--", testserver.Binary(t), "-no-server-info")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mcpl", "policy", "grant", "stdoutNoise", "ended"} {
		if string(got[k]) != "null" {
			t.Errorf("%s = %s, want null", k, got[k])
		}
	}
	var server bytes.Buffer
	json.Compact(&server, got["server"])
	if server.String() != `{"id":"testserver"}` {
		t.Errorf("server = %s, want only the id", got["server"])
	}
	if string(got["calls"]) != "[]" {
		t.Errorf("calls = %s, want []", got["calls"])
	}
}

// startWebSocketServer runs the test server on 127.0.0.1 and returns its URL.
func startWebSocketServer(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(testserver.Binary(t), append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's URL: %v", err)
	}
	return strings.TrimSpace(line)
}

func TestProbeWebSocket(t *testing.T) {
	url := startWebSocketServer(t)
	code, stdout, stderr := runCLI("probe", "--url", url,
		"--call", "echo", `{"text":"over websocket"}`,
		"--call", "fail", `{"message":"refused"}`,
		"--call", "exit", `{"code":1}`,
		"--call", "echo", `{"text":"after"}`)
	if code != exitFail {
		t.Fatalf("exit %d, want 1: the server died before the report was complete; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		`server "127.0.0.1": testserver 1.0.0`,
		"call echo: ok\nover websocket\n",
		`call fail: tools/call to "127.0.0.1": error -32000: refused` + "\n",
		`call exit: tools/call to "127.0.0.1": the connection closed before an answer` + "\n",
		`the "127.0.0.1" server ended the connection (transport: websocket connection ended without a close frame`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Count(stdout, "call echo") != 1 {
		t.Errorf("a call was made after the server was gone:\n%s", stdout)
	}
}

// TestProbePrettyWebSocket: a WebSocket server that pretty-prints every
// message (legal JSON over several lines) is read in full, well within
// --timeout: before, probe sat silent until initialize timed out.
func TestProbePrettyWebSocket(t *testing.T) {
	url := startWebSocketServer(t, "-pretty", "-mcpl", `{"version":"0.5","channels":true}`)
	code, stdout, stderr := runCLI("probe", "--timeout", "5s", "--url", url, "--call", "echo", `{"text":"pretty"}`)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"policy: accepted\n", "channels/list: answered with 1\n", "tools (12):\n", "call echo: ok\npretty\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestProbeTokenEnvUnset(t *testing.T) {
	code, _, stderr := runCLI("probe", "--url", "ws://127.0.0.1:1/", "--token-env", "MCPL_TEST_TOKEN_THAT_IS_NOT_SET")
	if code != exitFail || !strings.Contains(stderr, "MCPL_TEST_TOKEN_THAT_IS_NOT_SET, named by --token-env, is not set") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// TestProbeEcho runs the README's main command's server, examples/echo,
// built from source, through probe.
func TestProbeEcho(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "echo")
	build := exec.Command("go", "build", "-o", bin, "../../examples/echo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/echo: %v\n%s", err, out)
	}
	code, stdout, stderr := runCLI("probe", "--call", "echo", `{"text":"hello, echo"}`, "--", bin)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	want := `server "echo": echo 0.1.0 (protocol 2025-11-25)
mcpl: {"version":"0.5"}
policy: accepted
grant: effective: tools
grant: denied by policy: (none)
grant: not implemented by this host: (none)
feature sets (0):
channels: not asked (channels.register is not granted)
tools (1):
  echo: Answers with the text it is given.
call echo: ok
hello, echo
`
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing", stderr)
	}
}

// TestProbeEnvironment checks that the server gets no variable outside the
// base list unless --inherit-env is given.
func TestProbeEnvironment(t *testing.T) {
	t.Setenv("MCPL_PROBE_SECRET", "s3cret")
	ts := testserver.Binary(t)
	code, stdout, stderr := runCLI("probe", "--", ts, "-name-from-env", "MCPL_PROBE_SECRET")
	if code != exitOK || !strings.Contains(stdout, `server "testserver": unset 1.0.0`) {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI("probe", "--inherit-env", "--", ts, "-name-from-env", "MCPL_PROBE_SECRET")
	if code != exitOK || !strings.Contains(stdout, `server "testserver": s3cret 1.0.0`) {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestProbeChannelsListUnanswered is the acceptance: against a server that
// never answers channels/list, the full report is out within 5 s of the
// policy settling (the list is asked for 3 s), though each request may take
// the 60 s default; and probe succeeds.
func TestProbeChannelsListUnanswered(t *testing.T) {
	ts := testserver.Binary(t)
	start := time.Now()
	code, stdout, stderr := runCLI("probe", "--", ts, "-mcpl", `{"version":"0.5","channels":true}`, "-early", "channels/register", "-ignore", "channels/list")
	elapsed := time.Since(start)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"policy: accepted\n", "  general: #general\n", "channels/list: not supported: no answer within 3s\n", "tools (12):\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if elapsed > 5*time.Second {
		t.Errorf("the report took %s, want it within 5s", elapsed)
	}
}
