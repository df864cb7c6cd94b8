package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/content"
	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// The seed's scenarios (seeds/000) end to end: host.Host on a SQLite
// store, and the channel server as a real subprocess whose tools decide
// how each open and close is answered.

// channelRig is a host on a store file, with the channel server "chat".
type channelRig struct {
	t     *testing.T
	path  string
	entry string // more of the server's config entry
	st    *sqlite.DB
	h     *host.Host
}

func newChannelRig(t *testing.T, entry ...string) *channelRig {
	r := &channelRig{t: t, path: filepath.Join(t.TempDir(), "host.db"), entry: strings.Join(entry, "\n")}
	r.start()
	t.Cleanup(r.stop)
	return r
}

// start opens the store and a host on it, and connects the server.
func (r *channelRig) start() {
	r.t.Helper()
	st, err := sqlite.Open(r.path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	rec := newRecorder()
	h, err := host.New(host.Options{Logger: rec.Logger(), Store: st})
	if err != nil {
		r.t.Fatal(err)
	}
	r.st, r.h = st, h
	if err := h.Connect(r.t.Context(), server(r.t, "id: chat\ncommand: "+list(chanserver.Binary(r.t))+"\n"+r.entry)); err != nil {
		r.t.Fatal(err)
	}
}

// stop closes the host, then its store.
func (r *channelRig) stop() {
	if r.h != nil {
		r.h.Close()
		r.st.Close()
		r.h = nil
	}
}

// tool calls a tool and returns its text and whether it failed.
func (r *channelRig) tool(name, args string) (string, bool) {
	r.t.Helper()
	res, err := r.h.CallTool(context.Background(), name, json.RawMessage(args))
	if err != nil {
		return err.Error(), true
	}
	return res.Text(), false
}

func (r *channelRig) must(name, args string) string {
	r.t.Helper()
	text, failed := r.tool(name, args)
	if failed {
		r.t.Fatalf("%s %s: %s", name, args, text)
	}
	return text
}

// register registers channel c, initially open or not.
func (r *channelRig) register(initiallyOpen bool) {
	r.t.Helper()
	out := r.must("chat--register", fmt.Sprintf(`{"channels":[{"id":"c","type":"chat","label":"#c","address":{"room":"c"},"initiallyOpen":%v}]}`, initiallyOpen))
	if !strings.Contains(out, `"accepted":true`) {
		r.t.Fatalf("register: %s", out)
	}
}

// waitLog waits until the server has received as many requests as want
// (the server answers once it has), then checks they are want.
func (r *channelRig) waitLog(want ...string) {
	r.t.Helper()
	var got []string
	json.Unmarshal([]byte(r.must("chat--log", fmt.Sprintf(`{"count":%d}`, len(want)))), &got)
	if !slices.Equal(got, want) {
		r.t.Fatalf("the server received %q, want %q", got, want)
	}
}

// decision reads the channel's decision from the store file: the host is
// stopped first.
func (r *channelRig) decision() string {
	r.t.Helper()
	r.stop()
	st, err := sqlite.Open(r.path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer st.Close()
	d := "none"
	st.Replay(context.Background(), func(rec store.Record) error {
		if rec.Kind == store.KindDecision && rec.Channel == "c" {
			d = string(rec.State) + "/" + rec.Source
		}
		return nil
	})
	return d
}

func TestChannelSpeechOpenFailsPutBack(t *testing.T) {
	r := newChannelRig(t)
	r.register(false)
	r.waitLog("close c")
	r.must("chat--script", `{"channelId":"c","open":"fail"}`)
	text, failed := r.tool("channel_publish", `{"channelId":"c","text":"hi"}`)
	want := `Not sent to c (#c): channel is closed and open failed: The "chat" server answered with an error: open of c failed, as scripted. Nothing was posted.`
	if !failed || text != want {
		t.Errorf("channel_publish = %q\nwant %q", text, want)
	}
	// The decision is put back, and carried out on the server; nothing
	// was published.
	r.waitLog("close c", "open c", "close c")
	if got := r.decision(); got != "closed/default-closed" {
		t.Errorf("decision = %s, want closed/default-closed", got)
	}
}

func TestChannelReannouncedDuringFailedOpen(t *testing.T) {
	r := newChannelRig(t)
	r.register(false)
	r.waitLog("close c")
	r.must("chat--script", `{"channelId":"c","open":"hold"}`)
	var wg sync.WaitGroup
	var text string
	wg.Go(func() { text, _ = r.tool("channel_publish", `{"channelId":"c","text":"hi"}`) })
	r.must("chat--held", `{"channelId":"c","method":"open"}`)
	r.register(true) // the server announces it open while the open is out
	r.must("chat--script", `{"channelId":"c","open":"ok"}`)
	r.must("chat--release", `{"channelId":"c","method":"open","answer":"fail"}`)
	wg.Wait()
	want := `Not sent to c (#c): channel is closed and open failed: The "chat" server answered with an error: open of c failed, as scripted; the channel is selected for opening again, as its server announces it open. Nothing was posted.`
	if text != want {
		t.Errorf("channel_publish = %q\nwant %q", text, want)
	}
	r.waitLog("close c", "open c", "open c")
	if got := r.decision(); got != "open/server-bootstrap" {
		t.Errorf("decision = %s, want open/server-bootstrap", got)
	}
}

func TestChannelReplyOpenFailsPutBack(t *testing.T) {
	r := newChannelRig(t)
	r.register(false)
	r.waitLog("close c")
	r.must("chat--script", `{"channelId":"c","open":"fail"}`)
	// The send tool's call succeeds; its open runs after, and fails.
	if out := r.must("chat--send_message", `{"channelId":"c","text":"hi"}`); !strings.Contains(out, `"channelId":"c"`) {
		t.Fatalf("send_message: %s", out)
	}
	r.waitLog("close c", "send c: hi", "open c", "close c")
	if got := r.decision(); got != "closed/default-closed" {
		t.Errorf("decision = %s, want closed/default-closed", got)
	}
}

func TestChannelReplyOpensClosedChannel(t *testing.T) {
	r := newChannelRig(t)
	r.register(false)
	r.waitLog("close c")
	r.must("chat--send_message", `{"channelId":"c","text":"hi"}`)
	r.waitLog("close c", "send c: hi", "open c")
	if got := r.decision(); got != "open/opened-by-reply" {
		t.Errorf("decision = %s, want open/opened-by-reply", got)
	}
}

// TestChannelDecisionsSurviveRestart: restarting the host on the same
// store restores every decision, and a channel the agent closed stays
// closed when its server registers it again as initially open.
func TestChannelDecisionsSurviveRestart(t *testing.T) {
	r := newChannelRig(t)
	r.register(false)
	r.waitLog("close c")
	// "already closed" once the host has the server's answer to its
	// close, "closed" if it is still out: either records the agent's
	// decision.
	if out := r.must("channel_close", `{"channelId":"c"}`); out != `{"channelId":"c","status":"already closed"}` && out != `{"channelId":"c","status":"closed"}` {
		t.Errorf("channel_close = %s", out)
	}
	r.stop()
	r.start()
	r.register(true)
	r.waitLog("close c")
	if out := r.must("channel_list", `{}`); out != `[{"id":"c","type":"chat","label":"#c","open":false,"desired":"closed","serverId":"chat"}]` {
		t.Errorf("channel_list = %s", out)
	}
	if got := r.decision(); got != "closed/agent-tool" {
		t.Errorf("decision = %s, want closed/agent-tool", got)
	}
	// The agent's open, too, comes back after a restart.
	r.start()
	r.register(false)
	r.waitLog("close c")
	if out := r.must("channel_open", `{"channelId":"c"}`); out != `{"channelId":"c","status":"opened"}` {
		t.Errorf("channel_open = %s", out)
	}
	r.stop()
	r.start()
	r.register(false)
	r.waitLog("open c")
	if got := r.decision(); got != "open/agent-tool" {
		t.Errorf("decision = %s, want open/agent-tool", got)
	}
}

// TestChannelIncomingDurable: an accepted message is in the store's inbox
// before the server hears it was accepted, once however often it comes.
func TestChannelIncomingDurable(t *testing.T) {
	r := newChannelRig(t)
	r.register(false)
	for range 2 {
		out := r.must("chat--incoming", `{"channelId":"c","messageId":"m1","text":"hello"}`)
		if !strings.Contains(out, `"accepted":true`) {
			t.Fatalf("incoming: %s", out)
		}
	}
	out := r.must("chat--incoming", `{"channelId":"nope","messageId":"m2","text":"hello"}`)
	if !strings.Contains(out, `unknown channel \"nope\" — register it first (§14.5)`) {
		t.Errorf("incoming into an unknown channel: %s", out)
	}
	r.stop()
	st, err := sqlite.Open(r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []string
	st.Messages(context.Background(), 0, func(m store.Message) error {
		got = append(got, m.Server+"/"+m.Channel+"/"+m.MessageID)
		return nil
	})
	if !slices.Equal(got, []string{"chat/c/m1"}) {
		t.Errorf("inbox = %v, want chat/c/m1 once", got)
	}
}

// TestChannelCloseKeepsConfiguredDeadline: a close the server never
// answers fails at the server's requestTimeout, and the channel's later
// work is not held behind it.
func TestChannelCloseKeepsConfiguredDeadline(t *testing.T) {
	r := &channelRig{t: t, path: filepath.Join(t.TempDir(), "host.db")}
	st, err := sqlite.Open(r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Options{Logger: newRecorder().Logger(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	r.st, r.h = st, h
	t.Cleanup(r.stop)
	if err := h.Connect(t.Context(), server(t, "id: chat\nrequestTimeout: 1s\ncommand: "+list(chanserver.Binary(t)))); err != nil {
		t.Fatal(err)
	}
	r.must("chat--script", `{"channelId":"c","close":"hold"}`)
	r.register(false)
	start := time.Now()
	text, failed := r.tool("channel_close", `{"channelId":"c"}`)
	want := `Failed to close channel: The "chat" server didn't answer within 1 second, so whether the request took effect is unknown: it was abandoned here, and the server was asked to cancel it, but it may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.`
	if !failed || text != want {
		t.Errorf("channel_close = %q\nwant %q", text, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("channel_close took %v, want about the 1 s deadline", d)
	}
}

// TestChannelSubscriptionPolicy: the server's channels.subscription
// selects a channel for opening when it registers, as the config says.
func TestChannelSubscriptionPolicy(t *testing.T) {
	r := newChannelRig(t, "channels: {subscription: [c]}")
	r.register(false)
	r.waitLog("open c")
	if got := r.decision(); got != "open/subscription-policy" {
		t.Errorf("decision = %s, want open/subscription-policy", got)
	}
}

// TestChannelSendToolsConfigured: only the tools channels.sendTools names
// open a closed channel they post into.
func TestChannelSendToolsConfigured(t *testing.T) {
	r := newChannelRig(t, "channels: {sendTools: []}")
	r.register(false)
	r.waitLog("close c")
	r.must("chat--send_message", `{"channelId":"c","text":"hi"}`)
	// Nothing is recorded: the channel stays closed by default, which
	// needs no record.
	if got := r.decision(); got != "none" {
		t.Errorf("decision = %s, want none: send_message is not a send tool here", got)
	}
}

// TestChannelIncomingMarkers: a message from a real server carrying every
// malformed block shape is kept, and reads as exactly the markers; one
// that shows nothing is refused.
func TestChannelIncomingMarkers(t *testing.T) {
	r := newChannelRig(t)
	r.register(false)
	shapes := `[{"type":"text","text":"look:"},"not a block",{"text":"no type"},{"type":"video"},{"type":"text"},` +
		`{"type":"image","data":"AAAA"},{"type":"image"},{"type":"image","uri":""},{"type":"audio","data":"AAAA"},{"type":"audio"},` +
		`{"type":"resource","name":"a.wav"},{"type":"resource","uri":"https://x/` + strings.Repeat("a", 4096) + `"},` +
		`{"type":"image","data":"AAAA","mimeType":"image/png","uri":"https://x/a"}]`
	out := r.must("chat--incoming", `{"channelId":"c","messageId":"m1","content":`+shapes+`}`)
	if !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("incoming: %s", out)
	}
	out = r.must("chat--incoming", `{"channelId":"c","messageId":"m2","content":[{"type":"text","text":"   "}]}`)
	if !strings.Contains(out, `"reason":"empty-content"`) {
		t.Errorf("an empty message: %s", out)
	}
	r.stop()
	st, err := sqlite.Open(r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []string
	st.Messages(context.Background(), 0, func(m store.Message) error {
		var body struct {
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(m.Body, &body)
		blocks, _ := content.Blocks(body.Content)
		for _, p := range (content.Lane{Server: m.Server, Provenance: content.ProvenanceChannelMessage}).View(blocks) {
			got = append(got, p.Text)
		}
		return nil
	})
	want := []string{
		"look:",
		"[Content not shown: a part arrived in a form this host can't read.]",
		"[Content not shown: a part arrived with no type.]",
		`[Content not shown: this host can't display "video" content.]`,
		"[Text not shown: a text part arrived without readable text.]",
		"[Image not shown: its data arrived without a media type.]",
		"[Image not shown: it arrived with no usable data or link.]",
		"[Image not shown: it arrived with no usable data or link.]",
		"[Audio not shown: its data arrived without a media type.]",
		"[Audio not shown: it arrived with no usable inline data.]",
		"[Reference not shown: it arrived without a link.]",
		"[Reference not shown: its link is longer than this host accepts.]",
		"[Content not shown: its inline data arrived marked as a reference too, so this host withheld it.]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the kept message reads\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
