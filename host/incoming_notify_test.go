package host_test

import (
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/agent"
)

// A channels/incoming sent as a notification, as a public Telegram
// connector sends every message, is answered where it came from (issue 24
// item 5), through the host and the channel server as a real subprocess.
func TestIncomingNotificationAnswered(t *testing.T) {
	r := newAgentRig(t, echoConfig, nil)
	if out := r.must("chat--incoming", `{"channelId":"a","messageId":"n1","text":"hello by notification","tags":["chat:addressed"],"notify":true}`); !strings.Contains(out, `"notified"`) {
		t.Fatalf("incoming: %s", out)
	}
	r.tr.turnEnd(t, "ada", 1)
	sp := find(r.tr.turn("ada", 1), agent.EventSpeech)
	if len(sp) != 1 || sp[0].Channel != "a" || sp[0].Outcome != "delivered" || sp[0].Text != "hello by notification" {
		t.Errorf("speech = %+v", sp)
	}
	if n := len(r.rec.Find("channels/incoming sent as a notification: its messages are kept as a request's would be, but the server can't learn which were (SPEC §14.3 makes it a request); said once a connection")); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
}

// An option the server's grant can't honour is said at connect, not
// silently ignored: channels.acknowledgeSeen without channels.acknowledge
// (issue 24 item 6; the channel server doesn't offer it). Without the
// option, nothing is said.
func TestAcknowledgeSeenUnhonouredWarned(t *testing.T) {
	const warning = "channels.acknowledgeSeen is set for this server, but its grant has no channels.acknowledge (the server doesn't offer it, or policy denies it), so no seen-acknowledgment is sent"
	for _, c := range []struct {
		channels string
		want     int
	}{{`channels: {sendTools: [send_message], acknowledgeSeen: "👀"}`, 1}, {`channels: {sendTools: [send_message]}`, 0}} {
		r := newAgentRig(t, strings.Replace(echoConfig, "channels: {sendTools: [send_message]}", c.channels, 1), nil)
		if got := r.rec.Find(warning); len(got) != c.want || c.want == 1 && got[0].Attr("server") != "chat" {
			t.Errorf("%s: warnings %+v, want %d", c.channels, got, c.want)
		}
		r.stop()
	}
}
