package main

// The fault table's WebSocket-only rows (acceptance E): a server that
// never answers the upgrade, one that redirects elsewhere, one that sends a
// binary frame, one that sends a million messages in one frame. The host
// starts no process for a WebSocket server: each run checks that the
// mcplhost subprocess itself has exited within its bound.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/hostile"
)

var wsOnly = []string{"ws"}

// faultToken is the bearer token the redirect rows send; it must never
// be printed.
const faultToken = "fault-s3cret-token"

// redirectTo starts a second hostile server and returns the flags that
// make the server under test redirect to it and record what it receives.
// The second server records the request line of any request that reaches
// it (-ws-no-upgrade holds every connection and records its request).
func redirectTo(t *testing.T, dir string) []string {
	target := hostile.StartWS(t, "-ws-no-upgrade", "-record", filepath.Join(dir, "target.rec"))
	return []string{"-ws-redirect", target, "-record", filepath.Join(dir, "redirector.rec")}
}

// wantRedirectRecord checks that the redirector saw one upgrade request,
// with the Authorization header when a token was set, and that the server
// it redirected to received nothing; and that the token was not printed.
func wantRedirectRecord(authorization string) func(*testing.T, string, hostRun) {
	return func(t *testing.T, dir string, r hostRun) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "redirector.rec"))
		if err != nil {
			t.Fatalf("the redirector's record: %v", err)
		}
		if want := `{"authorization":` + authorization + `,"redirect":true}` + "\n"; string(b) != want {
			t.Errorf("the redirector recorded %q, want %q", b, want)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "target.rec")); err == nil && len(b) > 0 {
			t.Errorf("the server redirected to received:\n%s", b)
		}
		if strings.Contains(r.stdout+r.stderr, faultToken) {
			t.Errorf("the token was printed")
		}
	}
}

// TestFaultTableWebSocket is acceptance E's WebSocket-only rows.
func TestFaultTableWebSocket(t *testing.T) {
	t.Parallel()
	runFaultCases(t, []faultCase{
		{
			// The upgrade is never answered: --timeout bounds the dial.
			// (What it says is TestFaultNoUpgradeTextUnderTimeout's.)
			name: "no upgrade/timeout 3s", transports: wsOnly, cmd: "probe",
			server: []string{"-ws-no-upgrade"},
			args:   []string{"--timeout", "3s"},
			code:   exitFail, within: 5 * time.Second, inProcess: true,
			stderr: []string{"mcplhost probe: could not connect: transport: dial ws://127.0.0.1:"},
			check:  wantFailedAfter(3 * time.Second),
		},
		{
			// --timeout 0 waits on nothing but the 10 s connect bound.
			name: "no upgrade/timeout 0", transports: wsOnly, cmd: "probe",
			server: []string{"-ws-no-upgrade"},
			args:   []string{"--timeout", "0"},
			code:   exitFail, within: 12 * time.Second, inProcess: true,
			stderr: []string{"mcplhost probe: could not connect: transport: dial ws://127.0.0.1:", "/mcpl: no WebSocket upgrade answer within 10s\n"},
			check:  wantFailedAfter(10 * time.Second),
		},
		{
			// A redirect to another origin (another port) is refused, so
			// the token went to the redirector only.
			name: "redirect elsewhere/probe", transports: wsOnly, cmd: "probe",
			prepare: redirectTo,
			args:    []string{"--token-env", "MCPL_FAULT_TOKEN"},
			env:     []string{"MCPL_FAULT_TOKEN=" + faultToken},
			code:    exitFail, within: 5 * time.Second,
			stderr: []string{"mcplhost probe: could not connect: transport: dial ws://127.0.0.1:", "refused a redirect to another origin (http://127.0.0.1:"},
			check:  wantRedirectRecord("true"),
		},
		{
			name: "redirect elsewhere, no token/probe", transports: wsOnly, cmd: "probe",
			prepare: redirectTo,
			code:    exitFail, within: 5 * time.Second, inProcess: true,
			stderr: []string{"refused a redirect to another origin (http://127.0.0.1:"},
			check:  wantRedirectRecord("false"),
		},
		{
			name: "redirect elsewhere/call", transports: wsOnly, cmd: "call",
			prepare: redirectTo,
			config:  []string{"tokenEnv: MCPL_FAULT_TOKEN"},
			env:     []string{"MCPL_FAULT_TOKEN=" + faultToken},
			code:    exitFail, within: 5 * time.Second,
			stderr: []string{`msg="server failed to connect" server=srv`, "refused a redirect to another origin (http://127.0.0.1:"},
			check: func(t *testing.T, dir string, r hostRun) {
				wantStdout(notConnectedCallText)(t, dir, r)
				wantRedirectRecord("true")(t, dir, r)
			},
		},
		{
			// A binary frame after the initialize answer closes the
			// connection with 1003. (What probe says of it:
			// TestFaultBinaryFrameEndsReport.)
			name: "binary frame/call", transports: wsOnly, cmd: "call",
			server: []string{"-ws-binary"},
			code:   exitFail, within: 5 * time.Second, inProcess: true,
			stderr: []string{`msg="websocket peer sent a binary frame; closing"`},
			// The frame comes right after the initialize answer: the
			// connection is gone before the call, or as it is written.
			check: wantStdoutOneOf(notConnectedCallText, notSentClosedCallText),
		},
		{
			// 300,000 lines in one frame (13.8 MB, under the 16 MiB frame
			// limit) before the initialize answer: split as read, each
			// line a message; memory stays bounded and the report is
			// complete.
			name: "split frame/probe", transports: wsOnly, cmd: "probe",
			server: []string{"-ws-split", "300000", "-at", "initialize"},
			args:   []string{"--call", "echo", `{"text":"after"}`},
			code:   exitOK, within: 20 * time.Second, inProcess: true,
			stdout: []string{"tools (1):\n", "call echo: ok\nafter\n"},
			check:  fewDropLines,
		},
		{
			// A million lines in one frame is 45 MB, over the 16 MiB frame
			// limit: the connection closes at once, in bounded memory, and
			// probe says why.
			name: "split million lines/probe", transports: wsOnly, cmd: "probe",
			server: []string{"-ws-split", "1000000", "-at", "initialize"},
			// The bound is that it ends, not how fast: 12 s was seen on a
			// loaded machine under -race.
			code: exitFail, within: 40 * time.Second, inProcess: true,
			stderr: []string{"exceeds the limit of 16777216 bytes", "during initialize"},
		},
	})
}

// wantFailedAfter checks that a run that should have waited d for a dial
// did wait (less would mean it failed for another reason).
func wantFailedAfter(d time.Duration) func(*testing.T, string, hostRun) {
	return func(t *testing.T, _ string, r hostRun) {
		t.Helper()
		if r.elapsed < d-100*time.Millisecond {
			t.Errorf("failed after %s, before the %s bound", r.elapsed, d)
		}
	}
}

// TestFaultNoUpgradeTextUnderTimeout: probe --timeout 3s against a server
// that never answers the upgrade says what --timeout 0 says, with 3s (the
// suite found a plain "context deadline exceeded" here: probe bounded the
// dial's context by the same bound as ConnectTimeout, and it won).
func TestFaultNoUpgradeTextUnderTimeout(t *testing.T) {
	t.Parallel()
	url := hostile.StartWS(t, "-ws-no-upgrade")
	r := runInProcess("probe", "--timeout", "3s", "--url", url)
	want := "mcplhost probe: could not connect: transport: dial " + url + ": no WebSocket upgrade answer within 3s\n"
	if r.code != exitFail || r.stderr != want {
		t.Errorf("probe --timeout 3s against a server that never answers the upgrade:\n%s\nwant exit 1 and stderr %q", r, want)
	}
}

// TestFaultBinaryFrameEndsReport: a server that sends a binary frame right
// after its initialize answer is refused (1003), and probe exits 1 saying
// why, every time. (The suite found a race: a call failed as not sent on
// the closed connection while the peer still read as open, and probe
// called the report complete about one run in fifteen; a write that finds
// the refusal now ends the connection at once.) The run is repeated to
// catch the race.
func TestFaultBinaryFrameEndsReport(t *testing.T) {
	t.Parallel()
	url := hostile.StartWS(t, "-ws-binary")
	const runs = 40
	bad := 0
	for i := range runs {
		args := []string{"probe", "--id", "srv", "--url", url}
		if i%2 == 1 {
			args = append(args, "--json")
		}
		r := runInProcess(args...)
		if r.code == exitFail && strings.Contains(r.stdout+r.stderr, "the peer sent a binary frame; closed with 1003") {
			continue
		}
		if bad++; bad == 1 {
			t.Errorf("probe %s:\n%s\nwant exit 1 and the report saying the connection was closed for a binary frame", strings.Join(args[1:], " "), r)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d runs reported a complete probe of a connection that had closed", bad, runs)
	}
}
