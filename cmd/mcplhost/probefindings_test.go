package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/chanserver"
)

// TestProbeFindingCountsEveryIncomingNotification: the finding counts
// every channels/incoming the server sent as a notification, not only the
// maxEventsPerMethod events the report keeps, through mcplhost probe
// against the real channel server. The last call sends channels/incoming
// as a request, answered only after the host has handled every
// notification before it, so the count is complete when the report is
// printed.
func TestProbeFindingCountsEveryIncomingNotification(t *testing.T) {
	const notified = maxEventsPerMethod + 5
	args := []string{"probe", "--json"}
	for i := range notified {
		args = append(args, "--call", "incoming", fmt.Sprintf(`{"channelId":"general","messageId":"n%d","text":"hi","notify":true}`, i))
	}
	args = append(args, "--call", "incoming", `{"channelId":"general","messageId":"r1","text":"as a request"}`,
		"--", chanserver.Binary(t), "-channels", `[{"id":"general","type":"chat","label":"#general"}]`)
	code, stdout, stderr := runCLI(args...)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var got probeReport
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	want := []probeFinding{{
		Kind:  kindIncomingNotification,
		Count: notified,
		Seen:  fmt.Sprintf("the server sent channels/incoming as a notification (no id) %d times", notified),
		Why:   incomingNotificationWhy,
		Fix:   incomingNotificationFix,
	}}
	if diff := cmp.Diff(want, got.Findings); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	// The report kept maxEventsPerMethod channels/incoming events and
	// counted the rest (the request among them): the finding did not stop
	// at what was kept.
	if n := got.EventsOmitted["channels/incoming"]; n != notified+1-maxEventsPerMethod {
		t.Errorf("eventsOmitted[channels/incoming] = %d, want %d", n, notified+1-maxEventsPerMethod)
	}
	if len(got.Calls) != notified+1 {
		t.Fatalf("%d calls made, want %d:\n%s", len(got.Calls), notified+1, stdout)
	}
	for _, c := range got.Calls {
		if !c.OK {
			t.Errorf("call %s: %s, want ok", c.Name, c.Text)
		}
	}
	if last := got.Calls[len(got.Calls)-1]; !strings.Contains(last.Text, `"messageId":"r1","accepted":false`) {
		t.Errorf("the last call's answer = %s, want the host's per-message result for r1", last.Text)
	}
}
