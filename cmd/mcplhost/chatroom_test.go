package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/testbin"
)

// buildChatroom returns examples/chatroom's binary, built once for all
// the tests.
func buildChatroom(t *testing.T) string {
	t.Helper()
	return testbin.Chatroom.Path(t)
}

// TestCallChatroom runs the chat room example, built on the server SDK,
// under the host from a configuration file, over stdio and over WebSocket,
// and calls its tool through the host's one path.
func TestCallChatroom(t *testing.T) {
	bin := buildChatroom(t)
	// A script whose one post comes long after the test, so the room is
	// quiet while it runs.
	script := filepath.Join(t.TempDir(), "quiet.script")
	if err := os.WriteFile(script, []byte("+1h #random alice: much later\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("stdio", func(t *testing.T) {
		cfg := writeConfig(t, "\n  - id: room\n    command: ["+bin+", -q, -script, "+script+"]\n")
		code, stdout, stderr := runCLI("call", "--config", cfg, "room--history", `{"channel":"#general"}`)
		if code != exitOK || stdout != "ok\nNothing has been said in #general yet.\n" {
			t.Fatalf("exit %d, stdout %q\nstderr:\n%s", code, stdout, stderr)
		}
		// A tool's error result reaches the caller in the server's words.
		code, stdout, _ = runCLI("call", "--config", cfg, "room--history", `{"channel":"#nope"}`)
		if code != exitFail || stdout != "error: There is no channel \"#nope\"; the channels are #general, #random, #dev.\n" {
			t.Fatalf("exit %d, stdout %q", code, stdout)
		}
	})

	t.Run("websocket", func(t *testing.T) {
		url, _ := listenRoom(t, bin, "-q", "-script", script)
		cfg := writeConfig(t, "\n  - id: room\n    url: "+url+"\n")
		code, stdout, stderr := runCLI("call", "--config", cfg, "room--history", `{"channel":"#general"}`)
		if code != exitOK || stdout != "ok\nNothing has been said in #general yet.\n" {
			t.Fatalf("exit %d, stdout %q\nstderr:\n%s", code, stdout, stderr)
		}
		code, stdout, _ = runCLI("call", "--config", cfg, "room--nope", `{}`)
		if code != exitFail || !strings.HasPrefix(stdout, `error: The "room" server answered with an error: `) {
			t.Fatalf("an unknown tool: exit %d, stdout %q", code, stdout)
		}
	})
}

// listenRoom runs the chat room over WebSocket on a free loopback port
// (args are its other flags), stopped at the test's end, and returns its
// URL and its stderr, followed line by line.
func listenRoom(t *testing.T, bin string, args ...string) (url string, log *lineLog) {
	t.Helper()
	srv := exec.Command(bin, append(args, "-listen", "127.0.0.1:0")...)
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	log = &lineLog{}
	return log.follow(t, stderr), log
}
