package session_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/protocol"
)

// pushParams is a well-formed push/event for featureSet.
func pushParams(featureSet, eventID string) string {
	return fmt.Sprintf(`{"featureSet":%q,"eventId":%q,"timestamp":"2026-01-23T10:30:00Z",`+
		`"origin":{"webhook":"push"},"payload":{"content":[{"type":"text","text":"new commit"}]},"tags":["chat:message"]}`, featureSet, eventID)
}

func TestPushEvent(t *testing.T) {
	box := newInbox()
	s := open(t, session.Config{
		Dial:        spawn(t, "-mcpl", adFull),
		OnPushEvent: box.onPush,
		OnInbound:   box.onInbound,
	})

	params := pushParams("chat", "evt-1")
	wantResult(t, send(t, s, protocol.MethodPushEvent, params), `{"accepted":true}`)
	evs := box.pushed()
	if len(evs) != 1 {
		t.Fatalf("%d events handed to the host, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Server != server || ev.Params.FeatureSet != "chat" || ev.Params.EventID != "evt-1" ||
		ev.Params.Timestamp != "2026-01-23T10:30:00Z" || len(ev.Params.Payload.Content) != 1 ||
		len(ev.Params.Tags) != 1 || !jsonEqual(ev.Raw, json.RawMessage(params)) {
		t.Errorf("event handed to the host: %+v", ev)
	}

	// A retry with the same eventId gets the same answer, and the host is
	// not handed the event twice.
	wantResult(t, send(t, s, protocol.MethodPushEvent, params), `{"accepted":true}`)
	if n := len(box.pushed()); n != 1 {
		t.Errorf("a retried event was handed to the host again: %d events", n)
	}
	in := box.all()
	if len(in) != 2 || !in[1].Admitted || in[1].Reason == "" {
		t.Errorf("inbound records %+v, want the retry admitted as a duplicate", in)
	}
	// A different eventId is a new event.
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "evt-2")), `{"accepted":true}`)
	if n := len(box.pushed()); n != 2 {
		t.Errorf("%d events, want 2", n)
	}
}

func TestPushEventRejected(t *testing.T) {
	box := newInbox()
	s := open(t, session.Config{
		Dial: spawn(t, "-mcpl", `{"version":"0.5","pushEvents":true,"featureSets":{`+
			`"chat":{"description":"c","uses":["pushEvents"]},`+
			`"lifecycle":{"description":"l","uses":["inferenceLifecycle"]},`+
			`"muted":{"description":"m","uses":["pushEvents"]},`+
			`"broken":{"description":"b"}}}`),
		OnPushEvent: box.onPush,
		Policy:      grant.Policy{DisableFeatureSets: []string{"muted"}},
	})
	for _, tc := range []struct {
		name, params string
		code         int64
		data         string
		words        []string
	}{
		{"featureSet missing", `{"eventId":"e1","timestamp":"2026-01-23T10:30:00Z","payload":{"content":[]}}`,
			protocol.CodeFeatureSetNotEnabled, `{"featureSet":""}`, []string{"Feature set not enabled"}},
		{"featureSet disabled for a capability", pushParams("lifecycle", "e2"),
			protocol.CodeFeatureSetNotEnabled, `{"featureSet":"lifecycle"}`, []string{"Feature set not enabled", `"lifecycle"`}},
		{"featureSet disabled by policy", pushParams("muted", "e3"),
			protocol.CodeFeatureSetNotEnabled, `{"featureSet":"muted"}`, []string{`"muted"`}},
		{"featureSet with invalid uses", pushParams("broken", "e4"),
			protocol.CodeFeatureSetNotEnabled, `{"featureSet":"broken"}`, []string{`"broken"`}},
		{"featureSet unknown", pushParams("nope", "e5"),
			protocol.CodeUnknownFeatureSet, `{"featureSet":"nope"}`, []string{"Unknown feature set", `"nope"`}},
		{"eventId missing", `{"featureSet":"chat","timestamp":"2026-01-23T10:30:00Z","payload":{"content":[]}}`,
			-32602, "", []string{"eventId"}},
		{"params not an object", `[1,2]`, -32602, "", nil},
		{"eventId too long", pushParams("chat", strings.Repeat("x", session.MaxEventIDBytes+1)),
			-32602, "", []string{"Invalid params: the eventId is 513 bytes; this host takes eventIds of at most 512 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, send(t, s, protocol.MethodPushEvent, tc.params), tc.code, tc.data, tc.words...)
		})
	}
	if n := len(box.pushed()); n != 0 {
		t.Errorf("%d rejected events handed to the host", n)
	}
	// A rejected event's retry is rejected again: the same answer.
	wantError(t, send(t, s, protocol.MethodPushEvent, pushParams("muted", "e3")), protocol.CodeFeatureSetNotEnabled, `{"featureSet":"muted"}`)
	// The declared, enabled set works beside them, with an eventId at
	// the limit too.
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", "ok")), `{"accepted":true}`)
	wantResult(t, send(t, s, protocol.MethodPushEvent, pushParams("chat", strings.Repeat("y", session.MaxEventIDBytes))), `{"accepted":true}`)
}

// TestPushEventNotification: a push/event notification is admitted (and
// handed over) or dropped by the same rules; nothing is answered.
func TestPushEventNotification(t *testing.T) {
	box := newInbox()
	rec := newRecorder()
	s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull), OnPushEvent: box.onPush, OnInbound: box.onInbound, Logger: rec.Logger()})
	notify(t, s, protocol.MethodPushEvent, pushParams("chat", "n-1"))
	in := box.wait(t, 1)
	if !in[0].Admitted || in[0].Request || in[0].Method != protocol.MethodPushEvent {
		t.Errorf("inbound %+v, want an admitted notification", in[0])
	}
	if evs := box.waitPushed(t, 1); len(evs) != 1 || evs[0].Params.EventID != "n-1" {
		t.Errorf("events %+v, want n-1", evs)
	}
	notify(t, s, protocol.MethodPushEvent, pushParams("lifecycle", "n-2"))
	if in := box.wait(t, 2); in[1].Admitted {
		t.Errorf("inbound %+v: a disabled feature set's notification admitted", in[1])
	}
	if n := len(box.pushed()); n != 1 {
		t.Errorf("%d events, want 1", n)
	}
	// A request behind the notification is dispatched after it: once it
	// is answered, everything logged about the notification is in.
	send(t, s, protocol.MethodChannelsList, `{}`)
	if got := rec.Find("push/event rejected"); len(got) != 1 || got[0].Attr("event_id") != "n-2" {
		t.Errorf("rejection logged %+v, want once", got)
	}
	if got := rec.Find("notification handler failed"); len(got) != 0 {
		t.Errorf("a rejected notification was also logged as a handler failure: %+v", got)
	}
}
