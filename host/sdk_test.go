package host_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/grant"
)

// TestPlainMCPBesideMCPL is the acceptance: a host with two
// servers, one of them a plain MCP server built on the official Go MCP SDK
// (no MCPL), lists and calls both servers' tools, and the refusal texts
// read exactly as the issue gives them.
func TestPlainMCPBesideMCPL(t *testing.T) {
	h, _ := newHost(t)
	h.Start(parse(t, `servers:
  - id: chat
    command: `+ts(t, "-mcpl", adMCPL)+`
  - id: sdk
    command: `+list(sdkBinary(t))+`
`))
	select {
	case <-h.Settled():
	case <-time.After(waitFor):
		t.Fatal("the servers' connects did not settle")
	}

	want := append(prefixed("chat", testserverTools()...), "sdk--add", "sdk--shout")
	if got := toolNames(h); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Tools = %v, want %v", got, want)
	}
	for _, tl := range h.Tools() {
		if tl.Name == "sdk--add" && (tl.Server != "sdk" || tl.Def.Description != "Answers the sum of a and b." || len(tl.Def.InputSchema) == 0) {
			t.Errorf("sdk--add = %+v", tl)
		}
	}
	chat, _ := h.Server("chat")
	sdk, _ := h.Server("sdk")
	if chat.Advertisement == nil || chat.Policy != grant.OutcomeAccepted || !chat.Connected {
		t.Errorf("chat is not an MCPL server with its policy accepted: %+v", chat)
	}
	if st := sdk; st.Advertisement != nil || st.Policy != "" || st.ServerInfo == nil || st.ServerInfo.Name != "mcpsdkserver" {
		t.Errorf("sdk is not the SDK's plain MCP server: %+v", st)
	}

	wantOK(t, h, "sdk--add", `{"a":2,"b":3.5}`, "5.5")
	wantOK(t, h, "sdk--shout", `{"text":"quiet please"}`, "QUIET PLEASE")
	wantOK(t, h, "chat--echo", `{"text":"hello"}`, "hello")

	// The SDK's own failures, in its words: an error result, and an error
	// answer.
	te := wantRefused(t, h, "sdk--add", `{"a":"two","b":3}`,
		`validating "arguments": validating root: validating /properties/a: type: two has type "string", want "number"`)
	if te.Result == nil || !te.Result.IsError {
		t.Errorf("the SDK's error result is not carried: %+v", te)
	}
	wantRefused(t, h, "sdk--nope", `{}`, textErrorAnswer("sdk", `unknown tool "nope"`))

	// The host's refusals, for the SDK's server as for any.
	next := server(t, "id: sdk\ncommand: "+list(sdkBinary(t))+"\ntools: {disable: [shout]}")
	if err := h.Restart(t.Context(), "sdk", &next); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(toolNames(h)); got != fmt.Sprint(append(prefixed("chat", testserverTools()...), "sdk--add")) {
		t.Errorf("Tools with shout disabled = %s", got)
	}
	wantRefused(t, h, "sdk--shout", `{"text":"hi"}`,
		`sdk--shout isn't allowed by this host's policy for the "sdk" server, so the call didn't run, and calling it again won't change that. If you need it, ask whoever runs this host.`)
	wantOK(t, h, "sdk--add", `{"a":1,"b":1}`, "2")
	if err := h.Disconnect("sdk"); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, h, "sdk--add", `{"a":1,"b":1}`,
		`The "sdk" server that provides sdk--add isn't connected, and this host won't reconnect to it on its own, so the call didn't run. If you need it, ask whoever runs this host.`)
	wantOK(t, h, "chat--echo", `{"text":"still here"}`, "still here")
}
