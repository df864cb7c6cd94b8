package hostile_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/procs"
)

type initResult struct {
	ProtocolVersion string                     `json:"protocolVersion"`
	Instructions    *string                    `json:"instructions"`
	Capabilities    map[string]json.RawMessage `json:"capabilities"`
	ServerInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
}

type toolsResult struct {
	Tools []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"tools"`
}

type callResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func unmarshal(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%.300s: %v", raw, err)
	}
}

// A well-behaved run: what the host gets when no misbehaviour is asked.
func TestPlain(t *testing.T) {
	p := start(t)
	var init initResult
	unmarshal(t, p.answer(1, "initialize", `{"protocolVersion":"2025-06-18"}`).Result, &init)
	if init.ServerInfo.Name != "hostile" || init.ServerInfo.Version != "0.0.1" || init.ProtocolVersion != "2025-06-18" {
		t.Errorf("initialize: %+v", init)
	}
	if _, ok := init.Capabilities["experimental"]; ok || init.Capabilities["tools"] == nil || init.Instructions != nil {
		t.Errorf("capabilities %v, instructions %v: want tools alone", init.Capabilities, init.Instructions)
	}
	if r := p.answer(2, "featureSets/update", `{"effectiveCapabilities":[]}`).Result; string(r) != `{"accepted":true}` {
		t.Errorf("featureSets/update answered %s", r)
	}
	var tools toolsResult
	unmarshal(t, p.answer(3, "tools/list", "").Result, &tools)
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Errorf("tools/list: %+v", tools)
	}
	var call callResult
	unmarshal(t, p.answer(4, "tools/call", `{"name":"echo","arguments":{"text":"hi there"}}`).Result, &call)
	if len(call.Content) != 1 || call.Content[0].Type != "text" || call.Content[0].Text != "hi there" {
		t.Errorf("tools/call: %+v", call)
	}
	if r := p.answer(5, "ping", "").Result; string(r) != `{}` {
		t.Errorf("ping answered %s", r)
	}
	if m := p.answer(6, "no/such", ""); m.Error == nil || m.Error.Code != -32601 {
		t.Errorf("no/such answered %s", m.raw)
	}
}

func TestHandshakeFlags(t *testing.T) {
	t.Run("mcpl", func(t *testing.T) {
		ad := `{"version":"0.5","pushEvents":true,"channels":{"register":true},"featureSets":{"chat":{"uses":["pushEvents"]}}}`
		p := start(t, "-mcpl", ad, "-name", "chat", "-version", "9")
		var init initResult
		unmarshal(t, p.answer(1, "initialize", initParams).Result, &init)
		var exp struct {
			MCPL json.RawMessage `json:"mcpl"`
		}
		unmarshal(t, init.Capabilities["experimental"], &exp)
		if string(exp.MCPL) != ad {
			t.Errorf("experimental.mcpl %s, want %s", exp.MCPL, ad)
		}
		if init.ServerInfo.Name != "chat" || init.ServerInfo.Version != "9" {
			t.Errorf("serverInfo %+v", init.ServerInfo)
		}
	})
	for _, raw := range []string{`"x"`, `[1]`, `null`} {
		t.Run("experimental "+raw, func(t *testing.T) {
			p := start(t, "-experimental", raw, "-mcpl", `{"version":"0.5"}`)
			var init initResult
			unmarshal(t, p.answer(1, "initialize", initParams).Result, &init)
			if got := string(init.Capabilities["experimental"]); got != raw {
				t.Errorf("experimental %s, want %s", got, raw)
			}
		})
	}
	t.Run("tools and receipt", func(t *testing.T) {
		p := start(t, "-tool", "a=first", "-tool", "b=second=2", "-receipt", `{"accepted":false,"fallback":"close"}`)
		var tools toolsResult
		unmarshal(t, p.answer(1, "tools/list", "").Result, &tools)
		if len(tools.Tools) != 2 || tools.Tools[0].Name != "a" || tools.Tools[1].Description != "second=2" {
			t.Errorf("tools/list: %+v", tools)
		}
		if r := p.answer(2, "featureSets/update", "").Result; string(r) != `{"accepted":false,"fallback":"close"}` {
			t.Errorf("featureSets/update answered %s", r)
		}
	})
	t.Run("never-answer", func(t *testing.T) {
		p := start(t, "-never-answer", "tools/list")
		// Messages are handled in order: each ping's answer comes next
		// only if the tools/list before it was taken in without one.
		for id := 1; id <= 3; id += 2 {
			p.send(request(id, "tools/list", ""))
			if r := p.answer(id+1, "ping", "").Result; string(r) != `{}` {
				t.Errorf("ping answered %s", r)
			}
		}
		if r := p.answer(5, "featureSets/update", "").Result; string(r) != `{"accepted":true}` {
			t.Errorf("featureSets/update answered %s", r)
		}
	})
	t.Run("fail-call", func(t *testing.T) {
		p := start(t, "-fail-call", "the tool broke")
		m := p.answer(1, "tools/call", `{"name":"echo","arguments":{"text":"x"}}`)
		if m.Error == nil || m.Error.Code != -32000 || m.Error.Message != "the tool broke" || m.Result != nil {
			t.Errorf("tools/call answered %s", m.raw)
		}
	})
}

// -evil puts terminal escapes and forged lines in every string.
func TestEvil(t *testing.T) {
	p := start(t, "-evil", "-fail-call", "no")
	m := p.answer(1, "initialize", initParams)
	if !bytes.Contains(m.raw, []byte(`\u001b`)) {
		t.Errorf("the initialize answer holds no ESC: %s", m.raw)
	}
	var init initResult
	unmarshal(t, m.Result, &init)
	if init.ServerInfo.Name != hostile.EvilName || !strings.Contains(init.ServerInfo.Name, "\x1b]0;") || !strings.Contains(init.ServerInfo.Name, "\npolicy: accepted") {
		t.Errorf("serverInfo.name %q", init.ServerInfo.Name)
	}
	if !strings.Contains(init.ServerInfo.Version, "\u009b") {
		t.Errorf("serverInfo.version %q holds no CSI", init.ServerInfo.Version)
	}
	if init.Instructions == nil || !strings.Contains(*init.Instructions, "\x1b[") {
		t.Errorf("instructions %v hold no escape", init.Instructions)
	}
	var tools toolsResult
	unmarshal(t, p.answer(2, "tools/list", "").Result, &tools)
	names := []string{}
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if !strings.Contains(tool.Description, "\u202e") || !strings.Contains(tool.Description, "\r") {
			t.Errorf("tool %q description %q has no RTL override or CR", tool.Name, tool.Description)
		}
	}
	if !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "\x1b[31m") }) {
		t.Errorf("no tool name holds \\x1b[31m: %q", names)
	}
	if m := p.answer(3, "tools/call", `{"name":"echo","arguments":{"text":"x"}}`); m.Error == nil || !strings.Contains(m.Error.Message, "\x1b") {
		t.Errorf("-fail-call with -evil answered %s", m.raw)
	}
	if m := p.answer(4, "no/such", ""); m.Error == nil || !strings.Contains(m.Error.Message, "\x1b") {
		t.Errorf("an unknown method with -evil answered %s", m.raw)
	}
	var receipt struct {
		Accepted bool     `json:"accepted"`
		Notes    []string `json:"notes"`
	}
	unmarshal(t, p.answer(5, "featureSets/update", "").Result, &receipt)
	if !receipt.Accepted || len(receipt.Notes) != 1 || !strings.Contains(receipt.Notes[0], "\x1b") {
		t.Errorf("receipt %+v", receipt)
	}

	q := start(t, "-evil")
	q.answer(1, "initialize", initParams)
	var call callResult
	unmarshal(t, q.answer(2, "tools/call", `{"name":"echo","arguments":{"text":"hi"}}`).Result, &call)
	if len(call.Content) != 1 || !strings.HasPrefix(call.Content[0].Text, "hi") || !strings.Contains(call.Content[0].Text, "\x1b[2J") {
		t.Errorf("tools/call with -evil: %+v", call)
	}
}

// -flood sends its messages right after the moment's method arrives, and
// before answering it.
func TestFlood(t *testing.T) {
	t.Run("requests", func(t *testing.T) {
		p := start(t, "-flood", "channels/register", "-count", "5", "-size", "1000", "-at", "initialize")
		p.send(request(1, "initialize", initParams))
		for i := 1; i <= 5; i++ {
			m := p.nextMsg()
			if string(m.Method) != `"channels/register"` || string(m.ID) != fmt.Sprintf(`"h%d"`, i) {
				t.Fatalf("message %d: %.200s", i, m.raw)
			}
			var params struct {
				Channels []struct {
					ID string `json:"id"`
				} `json:"channels"`
				Pad string `json:"pad"`
			}
			unmarshal(t, m.Params, &params)
			if len(params.Pad) != 1000 || len(params.Channels) != 1 || params.Channels[0].ID == "" {
				t.Errorf("message %d: pad of %d bytes, channels %+v", i, len(params.Pad), params.Channels)
			}
		}
		if m := p.nextMsg(); string(m.ID) != "1" || m.Result == nil {
			t.Errorf("after the flood: %.300s, want the initialize answer", m.raw)
		}
	})
	t.Run("notifications at start", func(t *testing.T) {
		p := start(t, "-flood", "x/y", "-notify", "-count", "3", "-size", "10")
		for i := 1; i <= 3; i++ {
			m := p.nextMsg()
			if string(m.Method) != `"x/y"` || m.ID != nil || string(m.Params) != `{"pad":"xxxxxxxxxx"}` {
				t.Fatalf("message %d: %s", i, m.raw)
			}
		}
	})
}

// -events sends push/event requests with eventIds of the asked length.
func TestEvents(t *testing.T) {
	p := start(t, "-events", "4", "-event-id-size", "64", "-feature-set", "chat", "-at", "policy")
	p.answer(1, "initialize", initParams) // nothing comes before it: the moment is the policy
	p.send(request(2, "featureSets/update", `{"effectiveCapabilities":["pushEvents"]}`))
	seen := map[string]bool{}
	for i := 1; i <= 4; i++ {
		m := p.nextMsg()
		if string(m.Method) != `"push/event"` || string(m.ID) != fmt.Sprintf(`"e%d"`, i) {
			t.Fatalf("message %d: %s", i, m.raw)
		}
		var params struct {
			FeatureSet string `json:"featureSet"`
			EventID    string `json:"eventId"`
			Timestamp  string `json:"timestamp"`
			Payload    struct {
				Content []struct {
					Type, Text string
				} `json:"content"`
			} `json:"payload"`
		}
		unmarshal(t, m.Params, &params)
		if len(params.EventID) != 64 || seen[params.EventID] {
			t.Errorf("event %d: eventId %q (%d bytes), want 64 bytes and distinct", i, params.EventID, len(params.EventID))
		}
		seen[params.EventID] = true
		if _, err := time.Parse(time.RFC3339, params.Timestamp); err != nil || params.FeatureSet != "chat" ||
			len(params.Payload.Content) != 1 || params.Payload.Content[0].Type != "text" {
			t.Errorf("event %d: %s", i, m.Params)
		}
	}
	if m := p.nextMsg(); string(m.ID) != "2" || string(m.Result) != `{"accepted":true}` {
		t.Errorf("after the events: %s, want the receipt", m.raw)
	}
}

// -bad-method's requests go out, and -record keeps what the host answered.
func TestBadMethodRecorded(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record")
	p := start(t, "-bad-method", "-record", rec)
	for _, want := range []struct{ id, method string }{{`"bad1"`, `""`}, {`"bad2"`, `42`}} {
		m := p.nextMsg()
		if string(m.ID) != want.id || string(m.Method) != want.method {
			t.Fatalf("got %s, want id %s method %s", m.raw, want.id, want.method)
		}
	}
	p.send(`{"jsonrpc":"2.0","id":"bad1","error":{"code":-32600,"message":"invalid request"}}`)
	p.send(`{"jsonrpc":"2.0","id":"bad2","error":{"code":-32600,"message":"invalid request"}}`)
	long := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/long","params":{"pad":%q}}`, strings.Repeat("y", 5000))
	p.send(long)
	p.answer(7, "ping", "") // taken after the lines before it: they are recorded
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("recorded %d lines, want 4:\n%s", len(lines), b)
	}
	for _, l := range lines[:2] {
		if !strings.Contains(l, `"code":-32600`) {
			t.Errorf("recorded %q, want the host's -32600", l)
		}
	}
	if len(lines[2]) != 1024 || !strings.HasPrefix(long, lines[2]) {
		t.Errorf("recorded the long line as %d bytes, want its first 1024", len(lines[2]))
	}
	if !strings.Contains(lines[3], `"method":"ping"`) {
		t.Errorf("recorded %q, want the ping", lines[3])
	}
}

func TestOversize(t *testing.T) {
	p := start(t, "-oversize", "200000", "-at", "tools/call")
	p.answer(1, "initialize", initParams)
	p.send(request(2, "tools/call", `{"name":"echo","arguments":{"text":"x"}}`))
	line := p.next()
	if len(line) != 200000 || !json.Valid(line) {
		t.Errorf("oversize line of %d bytes (valid JSON: %v), want 200000", len(line), json.Valid(line))
	}
	if m := p.nextMsg(); string(m.ID) != "2" {
		t.Errorf("after the oversize line: %.300s, want the tools/call answer", m.raw)
	}
}

// writeMiB writes 1 MiB (one line) to the program's stdin, and reports on
// the channel returned when the write is done.
func writeMiB(p *proc) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := p.stdin.Write(append(bytes.Repeat([]byte("z"), 1<<20), '\n'))
		done <- err
	}()
	return done
}

// -stop-reading stops reading: a big write to its stdin stays stuck, while
// it goes on writing pings.
func TestStopReading(t *testing.T) {
	t.Run("stops", func(t *testing.T) {
		p := start(t, "-stop-reading", "-at", "initialize")
		p.answer(1, "initialize", initParams)
		if m := p.nextMsg(); string(m.Method) != `"ping"` || string(m.ID) != `"p1"` {
			t.Fatalf("after stopping: %s, want ping p1", m.raw)
		}
		done := writeMiB(p)
		timer := time.NewTimer(quiet)
		defer timer.Stop()
		select {
		case err := <-done:
			t.Errorf("a 1 MiB write to its stdin completed (%v): it is still reading", err)
		case <-timer.C:
		}
		p.stop() // the kill ends the write
		<-done
	})
	t.Run("control: reads", func(t *testing.T) {
		p := start(t)
		done := writeMiB(p)
		timer := time.NewTimer(waitFor)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("writing 1 MiB: %v", err)
			}
		case <-timer.C:
			p.stop()
			<-done
			t.Fatalf("a 1 MiB write to a reading server did not complete within %s", waitFor)
		}
		p.answer(1, "ping", "")
	})
}

// -grandchild leaves a sleeper in the server's process group, holding its
// stdout or not.
func TestGrandchild(t *testing.T) {
	for _, mode := range []string{"stdout", "background"} {
		t.Run(mode, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pids")
			p := start(t, "-grandchild", mode, "-pidfile", pidfile, "-exit-after", "initialize")
			p.answer(1, "initialize", initParams)
			if err := p.waitExit(); err != nil {
				t.Fatalf("after -exit-after initialize: %v, want status 0", err)
			}
			pids, err := hostile.ReadPids(pidfile)
			if err != nil {
				t.Fatal(err)
			}
			if pids.Pid != p.cmd.Process.Pid || pids.Pgid != p.pgid || pids.Grandchild <= 0 || pids.Grandchild == pids.Pid {
				t.Fatalf("pids %+v; the server is %d in group %d", pids, p.cmd.Process.Pid, p.pgid)
			}
			if !procs.Alive(pids.Grandchild) {
				t.Errorf("the grandchild %d is not alive after the server exited", pids.Grandchild)
			}
			if got := procs.GroupMembers(p.pgid); !slices.Equal(got, []int{pids.Grandchild}) {
				t.Errorf("group %d members %v, want the grandchild %d alone", p.pgid, got, pids.Grandchild)
			}
			if mode == "stdout" {
				timer := time.NewTimer(quiet)
				defer timer.Stop()
				select {
				case line, ok := <-p.lines:
					t.Errorf("stdout gave %q (open %v) though the grandchild holds it", line, ok)
				case <-timer.C:
				}
				p.stop()
				waitGone(t, pids.Grandchild)
				if got := procs.GroupMembers(p.pgid); len(got) != 0 {
					t.Errorf("after the group's kill: group %d members %v", p.pgid, got)
				}
				return
			}
			timer := time.NewTimer(waitFor)
			defer timer.Stop()
			select {
			case line, ok := <-p.lines:
				if ok {
					t.Errorf("stdout gave %q after the server exited", line)
				}
			case <-timer.C:
				t.Errorf("stdout did not end though the grandchild has /dev/null")
			}
		})
	}
}

func TestIgnoreEOF(t *testing.T) {
	p := start(t, "-ignore-eof")
	p.answer(1, "ping", "")
	p.stdin.Close()
	p.stillRunning("at the end of stdin, with -ignore-eof")

	q := start(t)
	q.answer(1, "ping", "")
	q.stdin.Close()
	if err := q.waitExit(); err != nil {
		t.Errorf("at the end of stdin: %v, want status 0", err)
	}
}

func TestIgnoreTerm(t *testing.T) {
	p := start(t, "-ignore-term")
	p.answer(1, "ping", "") // it is serving: the signal is ignored by now
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.stillRunning("on SIGTERM, with -ignore-term")

	q := start(t)
	q.answer(1, "ping", "")
	q.cmd.Process.Signal(syscall.SIGTERM)
	if err := q.waitExit(); err == nil {
		t.Errorf("without -ignore-term, SIGTERM left a clean exit")
	}
}
