package host_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestToolsPaged: tools come from every page of tools/list, in the
// server's order, each named "<prefix>--<tool>" with the server's own
// definition; a toolPrefix other than the id names them, and the texts
// name the server by id and the tool by the name the caller used.
func TestToolsPaged(t *testing.T) {
	h, _ := newHost(t)
	cfg := server(t, "id: chat.v2\ntoolPrefix: chat2\ncommand: "+ts(t, "-page-size", "5")+"\ntools: {disable: [fail]}")
	if err := h.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range testserverTools() {
		if n != "fail" {
			want = append(want, "chat2--"+n)
		}
	}
	if got := toolNames(h); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Tools = %v, want %v", got, want)
	}
	for _, tl := range h.Tools() {
		if tl.Server != "chat.v2" || "chat2--"+tl.Def.Name != tl.Name || tl.Def.Description == "" {
			t.Errorf("tool %+v", tl)
		}
	}
	wantOK(t, h, "chat2--echo", `{"text":"paged"}`, "paged")
	wantRefused(t, h, "chat2--fail", `{}`, textDenied("chat.v2", "chat2--fail"))
	wantRefused(t, h, "chat.v2--echo", `{}`, textNoSuchTool("chat.v2--echo"))
}

// TestListChangedRefreshes: notifications/tools/list_changed lists the
// tools again, once.
func TestListChangedRefreshes(t *testing.T) {
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "x--send", `{"method":"notifications/tools/list_changed","params":{},"notify":true}`, `{"sent":true}`)
	waitLog(t, rec, logListed, "x", 2)
	// server/discover, initialize, tools/list, send, the refresh's
	// tools/list, and this.
	wantOK(t, h, "x--count", `{}`, "6")
}

// TestListChangedCoalesces: however many list_changed notifications come
// while a refresh runs, one more runs after it, and no two run at once.
func TestListChangedCoalesces(t *testing.T) {
	f := newFake(t, "first")
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: r\nurl: "+f.url)); err != nil {
		t.Fatal(err)
	}
	c := f.nextConn()
	if got := fmt.Sprint(toolNames(h)); got != "[r--first]" {
		t.Fatalf("Tools = %s", got)
	}
	f.holdListing()
	c.listChanged(t)
	running := f.nextList()
	for range 5 {
		c.listChanged(t)
	}
	c.roundTrip(t) // the host has handled every notification
	if listed, _ := f.stats(); listed != 2 {
		t.Fatalf("%d tools/list requests while one refresh runs, want 2 (the connect's and the running one)", listed)
	}
	running.reply("second")
	f.nextList().reply("third")
	waitLog(t, rec, logListed, "r", 3)
	if got := fmt.Sprint(toolNames(h)); got != "[r--third]" {
		t.Errorf("Tools = %s, want the last listing", got)
	}
	h.Close() // waits for every refresh
	if listed, most := f.stats(); listed != 3 || most != 1 {
		t.Errorf("%d tools/list requests, at most %d at once; want 3, 1", listed, most)
	}
}

// TestFirstListingCoalesces: a list_changed that arrives while the
// connect's own listing runs waits for it, then lists once more, so an
// older listing never lands after a newer one.
func TestFirstListingCoalesces(t *testing.T) {
	f := newFake(t)
	f.holdListing()
	h, rec := newHost(t)
	connected := make(chan error, 1)
	go func() { connected <- h.Connect(t.Context(), server(t, "id: r\nurl: "+f.url)) }()
	c := f.nextConn()
	first := f.nextList()
	c.listChanged(t)
	c.roundTrip(t)
	if listed, _ := f.stats(); listed != 1 {
		t.Fatalf("%d tools/list requests while the connect's runs, want 1", listed)
	}
	first.reply("old")
	if err := <-connected; err != nil {
		t.Fatal(err)
	}
	f.nextList().reply("new")
	waitLog(t, rec, logListed, "r", 2)
	if got := fmt.Sprint(toolNames(h)); got != "[r--new]" {
		t.Errorf("Tools = %s, want the newer listing", got)
	}
	h.Close()
	if listed, most := f.stats(); listed != 2 || most != 1 {
		t.Errorf("%d tools/list requests, at most %d at once; want 2, 1", listed, most)
	}
}

// TestAnswersPing: MCP lets either side ping the other, and the receiver
// must answer with an empty result; a server that pings to keep its
// session alive (the official SDK's KeepAlive) closes a session whose ping
// fails. Other requests the host does not serve are refused as unknown.
func TestAnswersPing(t *testing.T) {
	h, _ := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: x\ncommand: "+ts(t))); err != nil {
		t.Fatal(err)
	}
	wantOK(t, h, "x--send", `{"method":"ping","params":{}}`, `{"result":{}}`)
	got, err := call(t, h, "x--send", `{"method":"roots/list","params":{}}`)
	if err != nil || !strings.Contains(got, `"code":-32601`) {
		t.Errorf("roots/list = %s, %v; want method not found", got, err)
	}
	wantOK(t, h, "x--echo", `{"text":"alive"}`, "alive")
}

// TestUndeclaredTools: a server that serves tools/list without declaring
// the tools capability (as several real servers do) has its tools listed
// and callable, and the log says it served them undeclared; one that
// declares none and knows no tools methods has none, with no warning.
func TestUndeclaredTools(t *testing.T) {
	h, rec := newHost(t)
	if err := h.Connect(t.Context(), server(t, "id: loose\ncommand: "+ts(t, "-undeclared-tools"))); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(h); len(got) != len(testserverTools()) {
		t.Fatalf("Tools = %v, want the %d the server serves", got, len(testserverTools()))
	}
	wantOK(t, h, "loose--echo", `{"text":"undeclared"}`, "undeclared")
	if n := logCount(rec, "the server serves tools/list without declaring the tools capability; its tools are listed", "loose"); n != 1 {
		t.Errorf("%d lines saying the tools were served undeclared, want 1", n)
	}

	if err := h.Connect(t.Context(), server(t, "id: bare\ncommand: "+ts(t, "-no-tools"))); err != nil {
		t.Fatal(err)
	}
	for _, name := range toolNames(h) {
		if strings.HasPrefix(name, "bare--") {
			t.Errorf("a server with no tools has %s", name)
		}
	}
	for _, r := range rec.All() {
		if r.Attr("server") == "bare" && r.Level >= slog.LevelWarn {
			t.Errorf("a server without tools logged %s %q", r.Level, r.Message)
		}
	}
}
