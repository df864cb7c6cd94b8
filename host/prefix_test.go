package host_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/config"
)

// TestPrefixesThatMeetAtLoad: a file whose servers' prefixes are equal is
// refused at load with an error naming both; a configuration built without
// the file's checks is refused at Start, server by server, naming both,
// while the rest connect.
func TestPrefixesThatMeetAtLoad(t *testing.T) {
	_, err := config.Parse([]byte(`servers:
  - id: alpha
    command: [a]
    toolPrefix: chat
  - id: beta
    command: [b]
    toolPrefix: chat
`), "test.yaml", t.TempDir())
	want := `servers "alpha" and "beta": both use tool prefix "chat": a tool name like "chat--x" could belong to either`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("loading equal prefixes: %v; want it to say %q", err, want)
	}

	cfg := parse(t, "servers:\n  - id: a\n    command: "+ts(t)+"\n  - id: b\n    command: "+ts(t)+"\n")
	cfg.Servers[1].ToolPrefix = "a--b"
	h, rec := newHost(t)
	h.Start(cfg)
	<-h.Settled()
	var refused []string
	for _, r := range rec.All() {
		if r.Message == "server not connected" && r.Attr("server") == "b" {
			refused = append(refused, r.Attr("error"))
		}
	}
	wantErr := `servers "a" and "b": tool prefixes "a" and "a--b" meet: a tool name like "a--b--x" could belong to either`
	if len(refused) != 1 || refused[0] != wantErr {
		t.Errorf("Start logged %q for b, want %q", refused, wantErr)
	}
	if got, want := fmt.Sprint(toolNames(h)), fmt.Sprint(prefixed("a", testserverTools()...)); got != want {
		t.Errorf("Tools = %v, want %v", got, want)
	}
	if _, ok := h.Server("b"); ok {
		t.Error("b was connected")
	}
}

// TestPrefixesThatMeetAtRuntime: a runtime connect whose prefix meets a
// registered server's is refused with an error naming both, before it
// changes anything; prefixes that only share a start do not meet.
func TestPrefixesThatMeetAtRuntime(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: a\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ prefix, want string }{
		{"a", `servers "a" and "b": both use tool prefix "a": a tool name like "a--x" could belong to either`},
		{"a--b", `servers "a" and "b": tool prefixes "a" and "a--b" meet: a tool name like "a--b--x" could belong to either`},
		{"a-", `servers "a" and "b": tool prefixes "a" and "a-" meet: a tool name like "a---x" could belong to either`},
	} {
		cfg := server(t, "id: b\ncommand: "+ts(t))
		cfg.ToolPrefix = tc.prefix
		err := h.Connect(t.Context(), cfg)
		var conflict *config.PrefixConflictError
		if !errors.As(err, &conflict) || err.Error() != tc.want {
			t.Errorf("prefix %q: Connect = %v, want %q", tc.prefix, err, tc.want)
		}
	}
	if _, ok := h.Server("b"); ok {
		t.Fatal("a refused connect registered b")
	}
	wantRefused(t, h, "b--echo", `{}`, textNoSuchTool("b--echo"))

	// "ab" shares a start with "a" but no tool name is both's.
	if err := h.Connect(t.Context(), server(t, "id: b\ntoolPrefix: ab\ncommand: "+ts(t, "-name", "b"))); err != nil {
		t.Fatalf("prefix ab beside a: %v", err)
	}
	// server/discover, initialize, tools/list and the call: 4.
	wantOK(t, h, "a--count", `{}`, "4")
	wantOK(t, h, "ab--count", `{}`, "4")
	// The longer prefix may come first: "ab-" meets "ab".
	late := server(t, "id: c\ncommand: "+ts(t))
	late.ToolPrefix = "ab-"
	if err := h.Connect(t.Context(), late); err == nil || err.Error() != `servers "b" and "c": tool prefixes "ab" and "ab-" meet: a tool name like "ab---x" could belong to either` {
		t.Errorf("prefix ab- beside ab: %v", err)
	}
	want := append(prefixed("a", testserverTools()...), prefixed("ab", testserverTools()...)...)
	if got := toolNames(h); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Tools = %v, want %v", got, want)
	}
}

// TestPrefixDefaultsToID: a server configured in code, not from a file,
// with no tool prefix takes its id, as a file's does.
func TestPrefixDefaultsToID(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), config.Server{ID: "bare", Argv: []string{testserverBin(t)}}); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(toolNames(h)), fmt.Sprint(prefixed("bare", testserverTools()...)); got != want {
		t.Errorf("Tools = %v, want %v", got, want)
	}
	wantOK(t, h, "bare--echo", `{"text":"named"}`, "named")
	err := h.Connect(t.Context(), config.Server{ID: "other", Argv: []string{testserverBin(t)}, ToolPrefix: "bare"})
	if err == nil || !strings.Contains(err.Error(), `"bare" and "other"`) {
		t.Errorf("a second server on the defaulted prefix: %v", err)
	}
	if err := h.Restart(t.Context(), "bare", &config.Server{ID: "bare", Argv: []string{testserverBin(t)}}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "bare--echo", `{"text":"again"}`, "again")
}
