package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildChatroom builds examples/chatroom into a temporary directory.
func buildChatroom(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chatroom")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/chatroom").CombinedOutput(); err != nil {
		t.Fatalf("go build examples/chatroom: %v\n%s", err, out)
	}
	return bin
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
		srv := exec.Command(bin, "-q", "-script", script, "-listen", "127.0.0.1:0")
		out, err := srv.StderrPipe()
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
		url := readURL(t, out)
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

// readURL finds the ws:// URL the chat room prints when it listens.
func readURL(t *testing.T, r interface{ Read([]byte) (int, error) }) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "ws://"); i >= 0 {
				found <- strings.Fields(sc.Text()[i:])[0]
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("the chat room printed no ws:// URL")
		return ""
	}
}
