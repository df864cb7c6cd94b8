package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// TestRoomSchedule runs the room and a session in one synctest bubble, over
// an in-memory pipe, so the schedule runs on the fake clock: each message
// reaches the host at its scripted time (here at speed 2), while its
// channel is open, or, when it addresses the agent, while it is closed too.
func TestRoomSchedule(t *testing.T) {
	posts, err := ParseScript(strings.NewReader(`
+5s #general alice: a
+10s #dev bob @agent: b
+50s #dev bob: c
+10s #general carol: d
+10s #dev bob @agent: e
+2s #random erin: f
+2s #random erin @agent: g
`), Channels)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		hostEnd, roomEnd := net.Pipe()
		tr := newTranscript()
		s := NewRoom(posts, 2, false, tr, quietLog).Server("test")
		served := make(chan error, 1)
		go func() { served <- s.ServeConn(context.Background(), roomEnd) }()
		h := newTestHost(t)
		sess := h.connect(func(context.Context) (transport.Stream, error) {
			return transport.NewLineStream(hostEnd, hostEnd, hostEnd, 0), nil
		})
		ctx := context.Background()

		// At 3s (#general's "a" came at 2.5s) the host opens #dev: "b"
		// comes at 7.5s. At 20s it closes #dev: "c", at 32.5s, is not
		// delivered; "d" at 37.5s is. "e" at 42.5s, in #dev, closed, is
		// delivered: it addresses the agent. So is "g" at 44.5s, in #random,
		// never opened, and not "f" at 43.5s, which does not.
		time.Sleep(3 * time.Second)
		if err := sess.Call(ctx, protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "chatroom:#dev"}, nil); err != nil {
			t.Fatal(err)
		}
		// What changes nothing writes nothing: opening #general, open from
		// the start, and closing #random, never opened (a host confirms its
		// decisions so at registration).
		if err := sess.Call(ctx, protocol.MethodChannelsOpen, protocol.ChannelsOpenParams{ChannelID: "chatroom:#general"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := sess.Call(ctx, protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: "chatroom:#random"}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(17 * time.Second)
		if err := sess.Call(ctx, protocol.MethodChannelsClose, protocol.ChannelsCloseParams{ChannelID: "chatroom:#dev"}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()

		h.mu.Lock()
		var got []string
		for _, m := range h.incoming {
			at, err := time.Parse(time.RFC3339Nano, m.Timestamp)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %s@%s", m.ChannelID, protocol.JoinText(m.Content), at.Sub(start)))
		}
		h.mu.Unlock()
		want := []string{"chatroom:#general a@2.5s", "chatroom:#dev @agent b@7.5s", "chatroom:#general d@37.5s",
			"chatroom:#dev @agent e@42.5s", "chatroom:#random @agent g@44.5s"}
		if !slices.Equal(got, want) {
			t.Errorf("incoming:\ngot  %v\nwant %v", got, want)
		}
		wantLines := []string{
			"[#general] (open from the start)",
			"[#general] alice: a",
			"[#dev] (the agent opened the channel)",
			"[#dev] bob: @agent b",
			"[#dev] (the agent closed the channel)",
			"[#dev] bob: c   (not delivered: #dev is not open)",
			"[#general] carol: d",
			"[#dev] bob: @agent e   (delivered though #dev is not open: it addresses the agent)",
			"[#random] erin: f   (not delivered: #random is not open)",
			"[#random] erin: @agent g   (delivered though #random is not open: it addresses the agent)",
			ScriptOver,
		}
		if got := strings.Split(strings.TrimSuffix(tr.String(), "\n"), "\n"); !slices.Equal(got, wantLines) {
			t.Errorf("transcript:\ngot  %s\nwant %s", strings.Join(got, "\n     "), strings.Join(wantLines, "\n     "))
		}
		sess.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
}

// TestRoomFourLeavesHost: a host that grants the four channel leaves it
// had before streaming, acknowledge and typing gets chat.messaging
// disabled, its receipt saying what it misses; the room then registers
// nothing and delivers nothing, as a real connector does, and the script
// plays into the transcript and the history only.
func TestRoomFourLeavesHost(t *testing.T) {
	posts, err := ParseScript(strings.NewReader("+0s #general alice: one\n+0s #dev bob @agent: two\n+0s @dm carol: three\n"), Channels)
	if err != nil {
		t.Fatal(err)
	}
	hostEnd, roomEnd := net.Pipe()
	tr, logs := newTranscript(), newTranscript()
	s := NewRoom(posts, 1, false, tr, slog.New(slog.NewTextHandler(logs, nil))).Server("test")
	served := make(chan error, 1)
	go func() { served <- s.ServeConn(context.Background(), roomEnd) }()
	h := newTestHost(t)
	h.implements = []string{"tools", "channels.register", "channels.lifecycle", "channels.publish", "channels.incoming"}
	sess := h.connect(func(context.Context) (transport.Stream, error) {
		return transport.NewLineStream(hostEnd, hostEnd, hostEnd, 0), nil
	})

	st := sess.State()
	if st.Policy == nil || st.Policy.Outcome != grant.OutcomeDegraded || st.Policy.Receipt == nil {
		t.Fatalf("policy = %+v, want degraded", st.Policy)
	}
	// Neither set: the host serves no push events either, so no DM.
	uf := st.Policy.Receipt.UnavailableFeatures
	if len(uf) != 2 || uf[0].FeatureSet != "chat.messaging" ||
		!slices.Equal(uf[0].MissingCapabilities, []string{"channels.streaming", "channels.acknowledge", "channels.typing"}) ||
		uf[1].FeatureSet != "chat.direct" || !slices.Equal(uf[1].MissingCapabilities, []string{"pushEvents"}) {
		t.Errorf("unavailable features = %+v", uf)
	}
	if got := st.Grant.Enabled(); len(got) != 0 {
		t.Errorf("enabled feature sets = %v, want none", got)
	}
	tr.wait(t, "[#general] alice: one   (not delivered: #general is not open)")
	tr.wait(t, "[#dev] bob: @agent two   (not delivered: #dev is not open)")
	tr.wait(t, "[@carol] carol (to the agent, privately): three   (not delivered: the host has not enabled chat.direct, direct messages)")
	tr.wait(t, ScriptOver)
	logs.wait(t, `level=WARN msg="chat.direct is not enabled; no direct message will be delivered" missing=[pushEvents]`)
	logs.wait(t, `level=WARN msg="chat.messaging is not enabled; no channel is registered and no message delivered" missing="[channels.streaming channels.acknowledge channels.typing]"`)
	// The history tool still answers.
	var hist protocol.CallToolResult
	if err := sess.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "history", Arguments: json.RawMessage(`{"channel":"#general"}`)}, &hist); err != nil || hist.Text() != "alice: one" {
		t.Errorf("history = %q, %v", hist.Text(), err)
	}
	sess.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.registered) != 0 || len(h.incoming) != 0 || len(h.pushed) != 0 {
		t.Errorf("registered %v, incoming %v, pushed %v: want nothing", h.registered, h.incoming, h.pushed)
	}
	if strings.Contains(tr.String(), "(open from the start)") {
		t.Errorf("the transcript says #general is open:\n%s", tr)
	}
}

// Each connection draws a run of its own for its message ids, so a host
// that keeps its inbox across the room's restarts (or reconnects) meets
// no id twice (issue 27); WithRun fixes it, and an empty run gives the
// plain chatroom-N a new store each run can take.
func TestRunIDs(t *testing.T) {
	r := NewRoom(nil, 1, false, io.Discard, quietLog)
	a, b := r.visitOf(new(server.Conn)), r.visitOf(new(server.Conn))
	pattern := regexp.MustCompile(`^chatroom-[0-9a-f]{8}-$`)
	if !pattern.MatchString(a.idPrefix) || !pattern.MatchString(b.idPrefix) || a.idPrefix == b.idPrefix {
		t.Errorf("two connections' prefixes %q and %q: want chatroom-RUN-, RUN 8 hex digits, a different one each", a.idPrefix, b.idPrefix)
	}
	if got := r.WithRun("x").visitOf(new(server.Conn)).idPrefix; got != "chatroom-x-" {
		t.Errorf("WithRun(x): %q", got)
	}
	if got := r.WithRun("").visitOf(new(server.Conn)).idPrefix; got != "chatroom-" {
		t.Errorf(`WithRun(""): %q`, got)
	}
}
