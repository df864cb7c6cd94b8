package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// The hostile server is this test binary run again with hostileEnv set:
// an MCP server over stdio whose every string carries what a terminal
// would obey (escape sequences, C1 controls, a bidirectional override, a
// newline forging a report line). Its strings are here, for tests to
// compare the JSON report with.
const hostileEnv = "MCPLHOST_TEST_HOSTILE_SERVER"

var (
	hostileName         = "evil\x1b]0;pwned\x07\npolicy: accepted"
	hostileVersion      = "6.6.6\x1b[2J\u009b2J"
	hostileInstructions = "read me\u202e\r\nforged line\u2028"
	// hostileMCPL has raw C1 and bidi runes inside its JSON strings, as
	// json.Valid allows: the advertisement is kept as it came.
	hostileMCPL = json.RawMessage("{\"version\":\"0.5\",\"pushEvents\":true,\"channels\":true," +
		"\"featureSets\":{\"chat\":{\"description\":\"chat\u009b2J \u202eexe.txt \x7f\",\"uses\":[\"pushEvents\"]}}}")
	hostileTools = []protocol.Tool{
		{Name: "result", Description: "Answers with hostile lines.\x1b]0;pwned\x07"},
		{Name: "evil\x1b[2J\u009b", Description: "Clears the screen\x1b[2J\nand forges\npolicy: accepted \u202etxt.exe"},
		{Name: "burst", Description: "Sends the host N push events of SIZE bytes."},
	}
	hostileResult   = "first\x1b]0;title\x07\nsecond\u009b2J\r\nthird \u202eexe.txt"
	hostileChannels = []protocol.ChannelDescriptor{{ID: "gen\x1b[2J", Label: "#general\u202e\npolicy: accepted"}}
)

func init() {
	if os.Getenv(hostileEnv) == "1" {
		serveHostile()
		os.Exit(0)
	}
}

// hostileCommand is the argv that runs the hostile server.
func hostileCommand(t *testing.T) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"env", hostileEnv + "=1", exe}
}

func serveHostile() {
	s := transport.NewLineStream(os.Stdin, os.Stdout, nil, 0)
	var peer *wire.Peer
	ready := make(chan struct{})
	peer = wire.NewPeer(s, wire.Options{Name: "host", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: wire.HandlerFunc(func(ctx context.Context, req *wire.Request) (any, error) {
			<-ready
			switch req.Method {
			case protocol.MethodInitialize:
				return map[string]any{
					"protocolVersion": protocol.ProtocolVersion,
					"capabilities":    map[string]any{"tools": map[string]any{}, "experimental": map[string]any{"mcpl": hostileMCPL}},
					"serverInfo":      protocol.Implementation{Name: hostileName, Version: hostileVersion},
					"instructions":    hostileInstructions,
				}, nil
			case protocol.MethodInitialized:
				return nil, nil
			case protocol.MethodFeatureSetsUpdate:
				return protocol.PolicyReceipt{Accepted: true}, nil
			case protocol.MethodToolsList:
				return protocol.ListToolsResult{Tools: hostileTools}, nil
			case protocol.MethodChannelsList:
				return protocol.ChannelsListResult{Channels: hostileChannels}, nil
			case protocol.MethodToolsCall:
				var p struct {
					Name      string `json:"name"`
					Arguments struct {
						N    int `json:"n"`
						Size int `json:"size"`
					} `json:"arguments"`
				}
				json.Unmarshal(req.Params, &p)
				if p.Name != "burst" {
					return protocol.TextResult(hostileResult, false), nil
				}
				reply := req.Defer()
				go func() {
					for i := range p.Arguments.N {
						text := strings.Repeat("x", p.Arguments.Size) + "\x1b[2J\u009b\u202e"
						params := map[string]any{"featureSet": "chat", "eventId": "e" + string(rune('a'+i%26)) + strings.Repeat("!", i/26),
							"payload": map[string]any{"content": []any{map[string]string{"type": "text", "text": text}}}}
						var res json.RawMessage
						peer.Call(ctx, protocol.MethodPushEvent, params, &res)
					}
					reply(protocol.TextResult("sent", false), nil)
				}()
				return nil, nil
			}
			return nil, wire.ErrMethodNotFound
		}),
	})
	close(ready)
	<-peer.Done()
}

// TestHostileScripts runs the scripts in testdata/hostile: mcplhost
// against servers whose strings carry escape sequences. $HOSTILE runs the
// hostile server above; $TESTSERVER the test server.
func TestHostileScripts(t *testing.T) {
	bin := testserver.Binary(t)
	argv := hostileCommand(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/hostile",
		Setup: func(e *testscript.Env) error {
			e.Setenv("TESTSERVER", bin)
			wrapper := filepath.Join(e.WorkDir, "hostile")
			e.Setenv("HOSTILE", wrapper)
			return os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+strings.Join(argv, " ")+` "$@"`+"\n"), 0o700)
		},
	})
}

// TestProbeHostileJSON checks that the JSON report of the hostile server
// is valid JSON, carries no raw control character, and holds exactly what
// the server sent.
func TestProbeHostileJSON(t *testing.T) {
	args := append([]string{"probe", "--json", "--id", "evil", "--call", "result", "{}", "--call", "burst", `{"n":3,"size":5000}`, "--"}, hostileCommand(t)...)
	code, stdout, stderr := runCLI(args...)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if r := rawControl(stdout); r >= 0 {
		t.Errorf("the JSON report carries %U raw", r)
	}
	var got struct {
		Server   probeServer       `json:"server"`
		MCPL     json.RawMessage   `json:"mcpl"`
		Tools    []protocol.Tool   `json:"tools"`
		Channels []probeChannel    `json:"channels"`
		Calls    []probeResult     `json:"calls"`
		Events   []json.RawMessage `json:"events"`
		Omitted  map[string]int    `json:"eventsOmitted"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	want := probeServer{ID: "evil", Name: hostileName, Version: hostileVersion, ProtocolVersion: protocol.ProtocolVersion, Instructions: hostileInstructions}
	if diff := cmp.Diff(want, got.Server); diff != "" {
		t.Errorf("server (-want +got):\n%s", diff)
	}
	var wantMCPL, gotMCPL any
	json.Unmarshal(hostileMCPL, &wantMCPL)
	if err := json.Unmarshal(got.MCPL, &gotMCPL); err != nil || !cmp.Equal(wantMCPL, gotMCPL) {
		t.Errorf("mcpl = %s, want the advertisement as sent: %s", got.MCPL, hostileMCPL)
	}
	if diff := cmp.Diff(hostileTools, got.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	wantChannels := []probeChannel{{ID: hostileChannels[0].ID, Label: hostileChannels[0].Label, Listed: true}}
	if diff := cmp.Diff(wantChannels, got.Channels); diff != "" {
		t.Errorf("channels (-want +got):\n%s", diff)
	}
	wantCalls := []probeResult{{Name: "result", OK: true, Text: hostileResult}, {Name: "burst", OK: true, Text: "sent"}}
	if diff := cmp.Diff(wantCalls, got.Calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// Each event's params are over maxEventPart: replaced by their size.
	if len(got.Events) != 3 || len(got.Omitted) != 0 {
		t.Fatalf("events %d, omitted %v; want 3 and none", len(got.Events), got.Omitted)
	}
	for _, raw := range got.Events {
		var e struct {
			Method        string          `json:"method"`
			Params        json.RawMessage `json:"params"`
			ParamsOmitted int             `json:"paramsOmitted"`
			Answer        json.RawMessage `json:"answer"`
		}
		json.Unmarshal(raw, &e)
		if e.Method != protocol.MethodPushEvent || string(e.Params) != "null" || e.ParamsOmitted <= maxEventPart || compact(e.Answer) != `{"accepted":true}` {
			t.Errorf("event %s: want push/event, params null with paramsOmitted over %d, answer accepted", raw, maxEventPart)
		}
	}
}
