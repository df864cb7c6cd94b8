package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/protocol"
)

// The official Go SDK's server at every MCP revision it serves, pinned by
// protocolVersion, through the Host: it negotiates that revision, calls
// work, a structured result is checked against its outputSchema (from
// 2025-06-18, where structured output begins), and a tool list change
// re-lists (on 2026-07-28 through subscriptions/listen, before it as the
// server's notification).
func TestSDKServerEveryVersion(t *testing.T) {
	for _, v := range protocol.Versions {
		t.Run(v, func(t *testing.T) {
			h, rec := newHost(t)
			cfg := fmt.Sprintf("id: sdk\nprotocolVersion: %q\ncommand: %s", v, list(sdkBinary(t), "-more"))
			if err := h.Connect(t.Context(), server(t, cfg)); err != nil {
				t.Fatal(err)
			}
			st, _ := h.Server("sdk")
			if st.ProtocolVersion != v || st.Stateless != protocol.Modern(v) {
				t.Errorf("protocol %q stateless %v, want %s", st.ProtocolVersion, st.Stateless, v)
			}
			wantOK(t, h, "sdk--add", `{"a":1,"b":2}`, "3")
			wantOK(t, h, "sdk--measure", `{"n":7}`, `{"value":7}`)
			if v >= protocol.Version20250618 {
				wantRefused(t, h, "sdk--bad_measure", `{}`, textOutputSchemaBroken("sdk", "sdk--bad_measure"))
			} else {
				// The revision has no structured output: the text is the answer.
				wantOK(t, h, "sdk--bad_measure", `{}`, `{"value":"high"}`)
			}
			wantOK(t, h, "sdk--grow", `{}`, "grew")
			waitLog(t, rec, logListed, "sdk", 2)
			wantOK(t, h, "sdk--grown", `{}`, "grown")
		})
	}
}

// textOutputSchemaBroken is the text of a structured result that breaks
// its tool's outputSchema, pinned here verbatim.
func textOutputSchemaBroken(server, tool string) string {
	return fmt.Sprintf(`The "%s" server answered %s, but its structured result does not match the output schema the tool declares, so this host did not use it. The call ran and may have taken effect: check before calling it again.`, server, tool)
}

// A long call's progress, as the Go SDK's server reports it against the
// host's progressToken, is kept with the call while it runs (and shown on
// the status page from there); the call leaves the list when it ends.
func TestSDKProgress(t *testing.T) {
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: sdk\ncommand: "+list(sdkBinary(t), "-more"))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan error, 1)
	go func() {
		_, err := h.CallTool(ctx, "sdk--progress", json.RawMessage(`{"steps":3}`))
		ended <- err
	}()
	rec.WaitFunc(t, "the third progress report", func(recs []logtest.Record) bool {
		for _, r := range recs {
			if r.Message == "tool progress" && r.Attr("progress") == "3" {
				return true
			}
		}
		return false
	})
	st, _ := h.Server("sdk")
	if len(st.Calls) != 1 {
		t.Fatalf("calls in flight = %+v, want the progress call", st.Calls)
	}
	if c := st.Calls[0]; c.Tool != "progress" || c.Progress != 3 || c.Total != 3 || c.Message != "step 3" || c.Updated.IsZero() || c.Started.IsZero() {
		t.Errorf("call in flight = %+v", c)
	}
	cancel()
	if err := <-ended; err == nil {
		t.Error("the cancelled call succeeded")
	}
	if st, _ := h.Server("sdk"); len(st.Calls) != 0 {
		t.Errorf("calls in flight after the call ended = %+v", st.Calls)
	}
}

// A call the host abandons (its deadline passed) is cancelled on the
// server: the Go SDK's handler sees its context end, and the agent reads
// that the server was asked to cancel it.
func TestSDKCancelled(t *testing.T) {
	h, _ := newHost(t)
	logPath := t.TempDir() + "/cancelled"
	if err := h.Connect(t.Context(), server(t, "id: sdk\nrequestTimeout: 1s\ncommand: "+list(sdkBinary(t), "-more", "-cancel-log", logPath))); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, h, "sdk--block", `{}`, `The "sdk" server didn't answer within 1 second, so whether the request took effect is unknown: it was abandoned here, and the server was asked to cancel it, but it may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`)
	waitFile(t, logPath, "cancelled: ")
	wantOK(t, h, "sdk--add", `{"a":2,"b":2}`, "4")
}

// sdkHTTPProcess runs internal/mcpsdkserver over Streamable HTTP on
// 127.0.0.1 as a real process and returns its URL.
func sdkHTTPProcess(t *testing.T, flags ...string) string {
	t.Helper()
	cmd := exec.Command(sdkBinary(t), append([]string{"-more", "-http", "127.0.0.1:0"}, flags...)...)
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
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("the server said %q, %v", line, err)
	}
	return url
}

// The Go SDK's server over Streamable HTTP, as a real process: stateful,
// it is met at 2025-11-25 through initialize (its discover over HTTP is
// refused with the versions it serves there); stateless, at 2026-07-28.
// Either way calls work, structured results are checked and a list change
// re-lists. A call the host abandons ends the handler's context on the
// stateful server (notifications/cancelled in its session); the
// stateless one has no session to route it by, and the host ends the
// call's POST instead, which this SDK's stateless handler does not pass
// on to the handler (so that case checks only that the host goes on).
func TestSDKServerOverHTTP(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		flags         []string
	}{
		{"stateful", protocol.Version20251125, nil},
		{"stateful-json", protocol.Version20251125, []string{"-json-response"}},
		{"stateless", protocol.Version20260728, []string{"-stateless"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := t.TempDir() + "/cancelled"
			url := sdkHTTPProcess(t, append(tc.flags, "-cancel-log", logPath)...)
			h, rec := newHost(t)
			if err := h.Connect(t.Context(), server(t, "id: web\nrequestTimeout: 1s\nurl: "+url)); err != nil {
				t.Fatal(err)
			}
			if st, _ := h.Server("web"); st.ProtocolVersion != tc.version || st.Stateless != protocol.Modern(tc.version) {
				t.Errorf("protocol %q stateless %v, want %s", st.ProtocolVersion, st.Stateless, tc.version)
			}
			wantOK(t, h, "web--add", `{"a":1,"b":2}`, "3")
			wantOK(t, h, "web--measure", `{"n":5}`, `{"value":5}`)
			wantRefused(t, h, "web--bad_measure", `{}`, textOutputSchemaBroken("web", "web--bad_measure"))
			wantOK(t, h, "web--grow", `{}`, "grew")
			waitLog(t, rec, logListed, "web", 2)
			wantOK(t, h, "web--grown", `{}`, "grown")
			if _, err := call(t, h, "web--block", `{}`); err == nil {
				t.Fatal("block answered")
			}
			if !protocol.Modern(tc.version) {
				waitFile(t, logPath, "cancelled: ")
			}
			wantOK(t, h, "web--add", `{"a":2,"b":3}`, "5")
		})
	}
}

// waitFile waits for path to start with prefix: the server's own file is
// the only signal it gives.
func waitFile(t *testing.T, path, prefix string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.HasPrefix(string(b), prefix) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start with %q within 30s (%q)", path, prefix, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
