package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/agent"
	"github.com/mcpl-go/mcpl/internal/chanserver"
)

// Issue 24 through the path a user takes: mcplhost run, with a real
// channel server subprocess (internal/chanserver) standing in for a chat
// connector, and the scripted echo agent, which answers each message that
// addresses it with its text. Each case sends what a connector sends and
// reads where the reply went from the server's own log of what it got.

// conversationChannels is what the server registers: an exact channel
// with threads (room), a root channel (plain), a known DM, closed as a new
// DM is (dm:known), a shared channel (lobby) and one where bots may wake
// the agent (bots).
const conversationChannels = `[
 {"id":"room","type":"chat","label":"#room","initiallyOpen":true,"capabilities":{"publish":{"target":"exact"}}},
 {"id":"plain","type":"chat","label":"#plain","initiallyOpen":true,"capabilities":{"publish":{"target":"root"}}},
 {"id":"dm:known","type":"dm","label":"@bob","tags":["chat:dm"],"address":{"user":"bob"}},
 {"id":"lobby","type":"chat","label":"#lobby","initiallyOpen":true},
 {"id":"bots","type":"chat","label":"#bots","initiallyOpen":true}
]`

// convRig is one mcplhost run with the channel server.
type convRig struct {
	t   *testing.T
	run *runProc
	ctl control
	// from is how many transcript events there were when the last send
	// went: what a case waits for comes after it.
	from int
}

func newConvRig(t *testing.T) *convRig {
	t.Helper()
	dir := t.TempDir()
	ctlPath := filepath.Join(dir, "control.json")
	argv := []string{chanserver.Binary(t), "-channels", conversationChannels, "-control", ctlPath}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`store: ./host.db
servers:
  - id: chat
    command: `+yamlList(argv)+`
    channels:
      bots: {channels: [bots], maxReplies: 3}
agents:
  - name: ada
    model: {provider: scripted, echo: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &convRig{t: t}
	r.run = startRun(t, dir, cfg, "run")
	r.ctl = awaitControl(t, ctlPath, r.run)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcplhost logged:\n%s", clip(r.run.stderr.String()))
			var notices []string
			for _, ev := range r.run.tr.all() {
				if ev.Event == agent.EventNotice {
					notices = append(notices, ev.Text)
				}
			}
			t.Logf("the agent's notices:\n%s", strings.Join(notices, "\n"))
		}
	})
	return r
}

// send calls one of the server's tools and fails unless the host
// accepted what it sent.
func (r *convRig) send(tool, args string) {
	r.t.Helper()
	r.from = len(r.run.tr.all())
	out := r.ctl.call(r.t, waitFor, tool, args)
	if !strings.Contains(out, `"accepted":true`) && !strings.Contains(out, `"notified"`) {
		r.t.Fatalf("%s %s: %s", tool, args, out)
	}
}

// await waits for the first event of kind that match holds for since
// the last send, and returns it.
func (r *convRig) await(kind, what string, match func(agent.Event) bool) agent.Event {
	r.t.Helper()
	var got agent.Event
	r.run.tr.wait(r.t, 60*time.Second, what, func(evs []agent.Event) bool {
		for _, ev := range evs[min(r.from, len(evs)):] {
			if ev.Event == kind && match(ev) {
				got = ev
				return true
			}
		}
		return false
	})
	return got
}

// speech waits for the agent's speech of text.
func (r *convRig) speech(text string) agent.Event {
	r.t.Helper()
	return r.await(agent.EventSpeech, "speech "+text, func(ev agent.Event) bool { return ev.Text == text })
}

// shown waits for a shown message holding s.
func (r *convRig) shown(s string) agent.Event {
	r.t.Helper()
	return r.await(agent.EventShown, "a message shown with "+s, func(ev agent.Event) bool { return strings.Contains(ev.Text, s) })
}

// notice waits for a notice holding s.
func (r *convRig) notice(s string) agent.Event {
	r.t.Helper()
	return r.await(agent.EventNotice, "a notice with "+s, func(ev agent.Event) bool { return strings.Contains(ev.Text, s) })
}

// log is what the server got so far.
func (r *convRig) log() []string {
	r.t.Helper()
	var l []string
	json.Unmarshal([]byte(r.ctl.call(r.t, waitFor, "log", `{}`)), &l)
	return l
}

// posted asserts the server got exactly this publish line (once), and
// returns the log.
func (r *convRig) posted(line string) []string {
	r.t.Helper()
	l := r.log()
	n := 0
	for _, e := range l {
		if e == line {
			n++
		}
	}
	if n != 1 {
		r.t.Errorf("the server got %q %d times, want once; its log:\n%s", line, n, strings.Join(l, "\n"))
	}
	return l
}

func TestRunConversations(t *testing.T) {
	r := newConvRig(t)

	t.Run("dm push into a registered closed channel", func(t *testing.T) {
		r.t = t
		r.send("push", `{"eventId":"e1","text":"hi from bob","tags":["chat:dm","chat:from-human"],"origin":{"source":"discord","mcplChannelId":"dm:known","isDM":true,"authorId":"u9","authorName":"bob","messageId":"p1"}}`)
		sh := r.shown("hi from bob")
		if !strings.Contains(sh.Text, "[@bob (dm:known) on chat · from bob · direct message · addressed to you · message p1 · at ") {
			t.Errorf("shown:\n%s\nwant the DM's channel, author, privacy and message id in its header", sh.Text)
		}
		sp := r.speech("hi from bob")
		if sp.Channel != "dm:known" || sp.Outcome != "delivered" {
			t.Errorf("speech %+v, want delivered into dm:known", sp)
		}
		l := r.posted("publish dm:known: hi from bob")
		if i, j := slices.Index(l, "open dm:known"), slices.Index(l, "publish dm:known: hi from bob"); i < 0 || i > j {
			t.Errorf("the DM was not opened before the reply; the server's log:\n%s", strings.Join(l, "\n"))
		}
	})

	t.Run("dm push into a channel never registered", func(t *testing.T) {
		r.t = t
		r.send("push", `{"eventId":"e2","text":"hello, new here","tags":["chat:dm"],"origin":{"mcplChannelId":"dm:fresh","authorName":"cy","messageId":"p2"}}`)
		sh := r.shown("hello, new here")
		if !strings.Contains(sh.Text, "[dm:fresh on chat · from cy · direct message · addressed to you · message p2 · at ") {
			t.Errorf("shown:\n%s", sh.Text)
		}
		if sp := r.speech("hello, new here"); sp.Channel != "dm:fresh" || sp.Outcome != "delivered" {
			t.Errorf("speech %+v, want delivered into dm:fresh", sp)
		}
		r.posted("publish dm:fresh: hello, new here")
	})

	t.Run("a push naming a channel no agent could name stays an event", func(t *testing.T) {
		r.t = t
		r.send("push", `{"eventId":"e3","text":"odd origin","tags":["chat:dm"],"origin":{"mcplChannelId":"dm:\u202eevil","authorName":"mallory"}}`)
		if sh := r.shown("odd origin"); !strings.Contains(sh.Text, "[event from chat · test.agent · event e3 · at ") {
			t.Errorf("shown:\n%s\nwant it as an event without a channel", sh.Text)
		}
		if !strings.Contains(r.run.stderr.String(), "a push event names a channel (origin.mcplChannelId) that it can't be shown in") {
			t.Error("the operator's log doesn't say why the push has no channel")
		}
	})

	t.Run("threaded message on an exact channel", func(t *testing.T) {
		r.t = t
		r.send("incoming", `{"channelId":"room","messageId":"r1","threadId":"T1","text":"in the thread","tags":["chat:mention"]}`)
		if sh := r.shown("in the thread"); !strings.Contains(sh.Text, "[#room (room) on chat · from Ada · thread T1 · addressed to you · message r1 · at ") {
			t.Errorf("shown:\n%s", sh.Text)
		}
		r.speech("in the thread")
		r.posted("publish room thread=T1: in the thread")
		r.notice("[delivered] Your reply was posted to #room (room), in thread T1.")
	})

	t.Run("root message on an exact channel", func(t *testing.T) {
		r.t = t
		r.send("incoming", `{"channelId":"room","messageId":"r2","text":"at the root","tags":["chat:mention"]}`)
		r.speech("at the root")
		r.posted("publish room thread=null: at the root")
		r.notice("[delivered] Your reply was posted to #room (room), at the channel root.")
	})

	t.Run("root channel gets no threadId", func(t *testing.T) {
		r.t = t
		r.send("incoming", `{"channelId":"plain","messageId":"q1","text":"plain talk","tags":["chat:mention"]}`)
		r.speech("plain talk")
		r.posted("publish plain: plain talk")
	})

	// RFC-011 §5, row by row, on the exact channel with a thread asked.
	for i, row := range []struct{ mode, status, says string }{
		{"ok", "delivered", "[delivered] Your reply was posted to #room (room), in thread T1."},
		{"no-echo", "unconfirmed", `[unconfirmed] Your reply: Delivery to room (#room), thread T1 was not confirmed — it may or may not have been posted: server "chat" reported delivery but did not say where it posted, not thread T1 (where it landed is unconfirmed). Check the channel before sending again.`},
		{"wrong-echo", "unconfirmed", `[unconfirmed] Your reply: Delivery to room (#room), thread T1 was not confirmed — it may or may not have been posted: server "chat" reported delivery but reported posting in thread elsewhere, not thread T1 (where it landed is unconfirmed). Check the channel before sending again.`},
		{"refuse", "failed", `[not delivered] Your reply: Not sent to room (#room), thread T1: server "chat" reported delivered:false: no such thread here. Nothing was posted.`},
		{"posted-refuse", "unconfirmed", `[unconfirmed] Your reply: Delivery to room (#room), thread T1 was not confirmed — it may or may not have been posted: server "chat" reported delivered:false but named posted message`},
		{"fail", "unconfirmed", `[unconfirmed] Your reply: Delivery to room (#room), thread T1 was not confirmed — it may or may not have been posted: The "chat" server answered with an error: publish failed, as scripted. Check the channel before sending again.`},
	} {
		t.Run("RFC-011 §5 "+row.mode, func(t *testing.T) {
			r.t = t
			r.ctl.call(t, waitFor, "script", `{"channelId":"room","publish":"`+row.mode+`"}`)
			text := fmt.Sprintf("row %d %s", i, row.mode)
			r.send("incoming", fmt.Sprintf(`{"channelId":"room","messageId":"row%d","threadId":"T1","text":%q,"tags":["chat:mention"]}`, i, text))
			if sp := r.speech(text); sp.Outcome != row.status {
				t.Errorf("%s: speech outcome %q, want %q", row.mode, sp.Outcome, row.status)
			}
			r.posted("publish room thread=T1: " + text)
			r.notice(row.says)
		})
	}
	r.ctl.call(t, waitFor, "script", `{"channelId":"room","publish":"ok"}`)

	t.Run("a whisper answered privately", func(t *testing.T) {
		r.t = t
		r.send("incoming", `{"channelId":"lobby","messageId":"w1","text":"psst, just you","tags":["chat:private","chat:mention"],"author":"eve","metadata":{"privateReply":{"channelId":"dm:known"}}}`)
		sh := r.shown("psst, just you")
		want := "[private] eve wrote to you privately in #lobby (lobby), which others there can read. What you say this turn goes privately to @bob (dm:known), not to #lobby (lobby)."
		if !strings.Contains(sh.Text, "· from eve · private · addressed to you · message w1") || !strings.Contains(sh.Text, want) {
			t.Errorf("shown:\n%s\nwant the private mark and %q", sh.Text, want)
		}
		if sp := r.speech("psst, just you"); sp.Channel != "dm:known" {
			t.Errorf("the whisper's reply went to %q, want dm:known", sp.Channel)
		}
		l := r.posted("publish dm:known: psst, just you")
		if slices.Contains(l, "publish lobby: psst, just you") {
			t.Error("the whisper was answered in public too")
		}
	})

	t.Run("a whisper with no private way is warned", func(t *testing.T) {
		r.t = t
		r.send("incoming", `{"channelId":"lobby","messageId":"w2","text":"secret plan","tags":["chat:private","chat:mention"],"author":"eve"}`)
		sh := r.shown("secret plan")
		want := "[private] eve wrote to you privately in #lobby (lobby), but this host has no private way to answer it: what you say this turn is posted in #lobby (lobby), where everyone in it can read it. Say there only what may be public."
		if !strings.Contains(sh.Text, want) {
			t.Errorf("shown:\n%s\nwant %q before the reply", sh.Text, want)
		}
		r.speech("secret plan")
		r.posted("publish lobby: secret plan")
	})

	t.Run("bots do not wake by default", func(t *testing.T) {
		r.t = t
		r.send("incoming", `{"channelId":"lobby","messageId":"b0","text":"beep at you","tags":["chat:mention","chat:from-bot"],"author":"robo"}`)
		// Shown between turns, with no turn started for it.
		r.shown("beep at you")
		for _, ev := range r.run.tr.all()[r.from:] {
			if ev.Event == agent.EventTurnStart {
				t.Errorf("a bot's message woke the agent: %+v", ev)
			}
		}
		// A person's message wakes the agent, which reads both.
		r.send("incoming", `{"channelId":"lobby","messageId":"h0","text":"person here","tags":["chat:mention"]}`)
		r.speech("person here")
		for _, ev := range r.run.tr.all() {
			if ev.Event == agent.EventSpeech && ev.Text == "beep at you" {
				t.Error("a bot's message woke the agent, which answered it")
			}
		}
	})

	t.Run("a bot loop stops at the bound", func(t *testing.T) {
		r.t = t
		for i := 1; i <= 3; i++ {
			text := fmt.Sprintf("bot says %d", i)
			r.send("incoming", fmt.Sprintf(`{"channelId":"bots","messageId":"k%d","text":%q,"tags":["chat:mention","chat:from-bot"],"author":"robo"}`, i, text))
			r.speech(text)
		}
		r.notice("[host] Messages from bots in #bots (bots) have woken you 3 times in a row, the most this host allows: from now on they don't wake you there until a person writes there. You still read what bots write there when something else wakes you.")
		r.send("incoming", `{"channelId":"bots","messageId":"k4","text":"bot says 4","tags":["chat:mention","chat:from-bot"],"author":"robo"}`)
		r.shown("bot says 4")
		for _, ev := range r.run.tr.all()[r.from:] {
			if ev.Event == agent.EventTurnStart {
				t.Errorf("the fourth bot message in a row woke the agent: %+v", ev)
			}
		}
		// A person speaks there: bots may wake the agent again.
		r.send("incoming", `{"channelId":"bots","messageId":"h1","text":"a person in bots","tags":["chat:mention","chat:from-human"]}`)
		r.speech("a person in bots")
		r.send("incoming", `{"channelId":"bots","messageId":"k5","text":"bot says 5","tags":["chat:mention","chat:from-bot"],"author":"robo"}`)
		r.speech("bot says 5")
		for _, ev := range r.run.tr.all() {
			if ev.Event == agent.EventSpeech && ev.Text == "bot says 4" {
				t.Error("the fourth bot message in a row woke the agent")
			}
		}
	})

	t.Run("notification-form incoming answered", func(t *testing.T) {
		r.t = t
		r.send("incoming", `{"channelId":"plain","messageId":"n1","text":"sent as a notification","tags":["chat:mention"],"notify":true}`)
		r.speech("sent as a notification")
		r.posted("publish plain: sent as a notification")
	})

	t.Run("40 ambient then one addressed", func(t *testing.T) {
		r.t = t
		for i := range 40 {
			r.send("incoming", fmt.Sprintf(`{"channelId":"room","messageId":"amb%d","text":"chatter %d","tags":["chat:ambient"]}`, i, i))
		}
		r.send("incoming", `{"channelId":"room","messageId":"ask","threadId":"T9","text":"and you, ada?","tags":["chat:mention"]}`)
		if sp := r.speech("and you, ada?"); sp.Channel != "room" || sp.Outcome != "delivered" {
			t.Errorf("speech %+v", sp)
		}
		r.posted("publish room thread=T9: and you, ada?")
	})

	if code := r.run.stop(); code != 128+15 {
		t.Errorf("mcplhost run exited %d after SIGTERM, want 143", code)
	}
}
