package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// sends tries each capability-dependent Conn method once and returns their
// errors by method.
func sends(c *server.Conn) map[string]error {
	ctx := context.Background()
	_, reg := c.RegisterChannels(ctx, protocol.ChannelDescriptor{ID: "chat:#a"})
	_, chg := c.ChangeChannels(ctx, protocol.ChannelsChangedParams{Added: []protocol.ChannelDescriptor{{ID: "chat:#b"}}})
	_, inc := c.Incoming(ctx, server.Message{ChannelID: "chat:#a", Content: server.TextContent("hi")})
	_, push := c.PushEvent(ctx, server.Event{FeatureSet: "chat.alerts", Content: server.TextContent("ping")})
	return map[string]error{
		protocol.MethodChannelsRegister: reg,
		protocol.MethodChannelsChanged:  chg,
		protocol.MethodChannelsIncoming: inc,
		protocol.MethodPushEvent:        push,
	}
}

func TestGatingBeforePolicy(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	for method, err := range sends(c) {
		var ge *server.GrantError
		if !errors.As(err, &ge) || !errors.Is(err, server.ErrNoPolicy) || ge.Method != method {
			t.Errorf("%s before policy = %v, want a GrantError wrapping ErrNoPolicy", method, err)
		}
		if err != nil && !strings.Contains(err.Error(), "not sent") {
			t.Errorf("%s: error %q does not say it was not sent", method, err)
		}
	}
	h.call(protocol.MethodToolsList, nil, nil) // anything sent would have arrived by now
	if got := h.got(); len(got) != 0 {
		t.Errorf("the host received %d messages before the policy, want none", len(got))
	}
}

func TestGatingAfterPolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		effective []string
		disabled  []string
		// wantCap names, per method, the capability or feature set its
		// GrantError names; a method absent here must succeed.
		want map[string]string
	}{{
		name:      "everything granted",
		effective: allCaps,
		want:      map[string]string{},
	}, {
		name:      "nothing granted",
		effective: []string{},
		want: map[string]string{
			protocol.MethodChannelsRegister: "channels.register",
			protocol.MethodChannelsChanged:  "channels.register",
			protocol.MethodChannelsIncoming: "channels.incoming",
			protocol.MethodPushEvent:        "pushEvents",
		},
	}, {
		name:      "register without incoming",
		effective: []string{"channels.register", "pushEvents"},
		want:      map[string]string{protocol.MethodChannelsIncoming: "channels.incoming"},
	}, {
		name:      "pushEvents granted, its feature set disabled",
		effective: allCaps,
		disabled:  []string{"chat.alerts"},
		want:      map[string]string{protocol.MethodPushEvent: "chat.alerts"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s, conns := chatServer(nil)
			h := start(t, s)
			h.initialize()
			c := recvConn(t, conns)
			h.policy(tc.effective, nil, append([]string{}, tc.disabled...))
			got := map[string]string{}
			for method, err := range sends(c) {
				if err == nil {
					continue
				}
				var ge *server.GrantError
				if !errors.As(err, &ge) || !errors.Is(err, server.ErrNotGranted) {
					t.Errorf("%s = %v, want a GrantError wrapping ErrNotGranted", method, err)
					continue
				}
				got[method] = ge.Capability + ge.FeatureSet
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refused sends (-want +got):\n%s", diff)
			}
			h.call(protocol.MethodToolsList, nil, nil)
			if n := 4 - len(tc.want); len(h.got()) != n {
				t.Errorf("the host received %d messages, want %d", len(h.got()), n)
			}
		})
	}
}

func TestReductionApplies(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	ctx := context.Background()
	h.policy(allCaps, nil, []string{})
	if _, err := c.Incoming(ctx, server.Message{ChannelID: "chat:#a"}); err != nil {
		t.Fatalf("Incoming while granted: %v", err)
	}
	h.policy([]string{"channels.register"}, nil, []string{})
	if _, err := c.Incoming(ctx, server.Message{ChannelID: "chat:#a"}); !errors.Is(err, server.ErrNotGranted) {
		t.Errorf("Incoming after a reduction = %v, want ErrNotGranted", err)
	}
}

func TestPushEventIDs(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	ctx := context.Background()
	h.policy(allCaps, nil, []string{})

	when := time.Date(2026, 3, 5, 10, 30, 0, 0, time.UTC)
	first, err := c.PushEvent(ctx, server.Event{FeatureSet: "chat.alerts", Time: when, Origin: map[string]string{"source": "test"},
		Content: server.TextContent("first"), Tags: []string{"chat:broadcast"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.EventID, "evt_") || !first.Accepted || first.InferenceID != "inf-1" {
		t.Errorf("PushEvent = %+v, want a made-up evt_ id, accepted", first)
	}
	second, err := c.PushEvent(ctx, server.Event{FeatureSet: "chat.alerts"})
	if err != nil {
		t.Fatal(err)
	}
	if second.EventID == first.EventID {
		t.Error("two events got the same made-up id")
	}
	retry, err := c.PushEvent(ctx, server.Event{FeatureSet: "chat.alerts", EventID: first.EventID})
	if err != nil || retry.EventID != first.EventID {
		t.Errorf("retry = %+v, %v; want the given id kept", retry, err)
	}

	got := h.waitN(3)
	var p protocol.PushEventParams
	if err := json.Unmarshal(got[0].Params, &p); err != nil {
		t.Fatal(err)
	}
	if p.EventID != first.EventID || p.Timestamp != "2026-03-05T10:30:00Z" || p.FeatureSet != "chat.alerts" ||
		string(p.Origin) != `{"source":"test"}` || !cmp.Equal(p.Tags, []string{"chat:broadcast"}) {
		t.Errorf("push/event params = %s", got[0].Params)
	}
	if want := `[{"type":"text","text":"first"}]`; mustJSON(t, p.Payload.Content) != want {
		t.Errorf("payload content = %s, want %s", mustJSON(t, p.Payload.Content), want)
	}

	// An event must name its feature set: the SDK says so, sends nothing.
	res, err := c.PushEvent(ctx, server.Event{})
	if err == nil || res.EventID == "" {
		t.Errorf("PushEvent without a feature set = %+v, %v; want an error, and the id it would have had", res, err)
	}
	if _, err := c.PushEvent(ctx, server.Event{FeatureSet: "undeclared"}); err == nil || !strings.Contains(err.Error(), `"undeclared" is not declared`) {
		t.Errorf("PushEvent on an undeclared set = %v, want an error saying it is not declared", err)
	}
}

func TestIncomingShape(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	ctx := context.Background()
	h.policy(allCaps, nil, []string{})

	when := time.Date(2026, 3, 5, 10, 30, 5, 0, time.UTC)
	res, err := c.Incoming(ctx,
		server.Message{ChannelID: "chat:#a", MessageID: "m1", ThreadID: "t1", Author: server.Author{ID: "u1", Name: "Alice"},
			Time: when, Content: server.TextContent("hello"), Metadata: map[string]any{"mentions": []string{"agent"}}, Tags: []string{"chat:mention"}},
		server.Message{ChannelID: "chat:#a", Content: server.TextContent("second")},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].MessageID != "m1" || !res[0].Accepted || res[0].ConversationID != "conv-1" {
		t.Errorf("results = %+v", res)
	}
	got := h.waitN(1)
	var p protocol.ChannelsIncomingParams
	if err := json.Unmarshal(got[0].Params, &p); err != nil {
		t.Fatal(err)
	}
	m := p.Messages[0]
	if m.ChannelID != "chat:#a" || m.ThreadID != "t1" || string(m.Author) != `{"id":"u1","name":"Alice"}` ||
		m.Timestamp != "2026-03-05T10:30:05Z" || string(m.Metadata) != `{"mentions":["agent"]}` || !cmp.Equal(m.Tags, []string{"chat:mention"}) {
		t.Errorf("first message = %+v", m)
	}
	if m2 := p.Messages[1]; !strings.HasPrefix(m2.MessageID, "msg_") || m2.Author != nil || m2.Timestamp == "" {
		t.Errorf("second message = %+v, want a made-up msg_ id, no author, a timestamp", m2)
	}

	if _, err := c.Incoming(ctx); err == nil {
		t.Error("Incoming with no messages: no error")
	}
	if _, err := c.Incoming(ctx, server.Message{}); err == nil {
		t.Error("Incoming with no channel id: no error")
	}
}

func TestRegisteredChannelsTracked(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	ctx := context.Background()
	h.policy(allCaps, nil, []string{})

	res, err := c.RegisterChannels(ctx,
		protocol.ChannelDescriptor{ID: "chat:#a", Label: "#a"},
		protocol.ChannelDescriptor{ID: "refuse-me"},
		protocol.ChannelDescriptor{ID: "chat:#b", Label: "#b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.ChannelResult{{ID: "chat:#a", Accepted: true}, {ID: "refuse-me", Reason: "capability_denied"}, {ID: "chat:#b", Accepted: true}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if _, err := c.ChangeChannels(ctx, protocol.ChannelsChangedParams{
		Added:   []protocol.ChannelDescriptor{{ID: "chat:#c"}},
		Updated: []protocol.ChannelDescriptor{{ID: "chat:#a", Label: "#a (renamed)"}},
		Removed: []string{"chat:#b"},
	}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range c.Channels() {
		ids = append(ids, d.ID+"="+d.Label)
	}
	if diff := cmp.Diff([]string{"chat:#a=#a (renamed)", "chat:#c="}, ids); diff != "" {
		t.Errorf("Channels (-want +got):\n%s", diff)
	}
	// The host's channels/list gets the same.
	var list protocol.ChannelsListResult
	h.call(protocol.MethodChannelsList, struct{}{}, &list)
	if len(list.Channels) != 2 {
		t.Errorf("channels/list = %+v", list)
	}
	got := h.waitN(2)
	if got[1].Method != protocol.MethodChannelsChanged {
		t.Errorf("second message = %s, want channels/changed as a request", got[1].Method)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
