package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// allCaps is every capability the test server advertises.
var allCaps = []string{"pushEvents", "channels.register", "channels.lifecycle", "channels.publish", "channels.incoming"}

// chatServer is a server with two feature sets: chat.messaging (channels)
// and chat.alerts (push events). Its connections arrive on the channel.
func chatServer(edit func(*server.Options)) (*server.Server, <-chan *server.Conn) {
	conns := make(chan *server.Conn, 4)
	o := &server.Options{
		Capabilities: allCaps,
		FeatureSets: []server.FeatureSet{
			{Name: "chat.messaging", Description: "chat channels", Uses: []string{"channels.register", "channels.incoming"}},
			{Name: "chat.alerts", Description: "alerts", Uses: []string{"pushEvents"}},
		},
		OnConnect: func(_ context.Context, c *server.Conn) { conns <- c },
		Logger:    quiet,
	}
	if edit != nil {
		edit(o)
	}
	return server.New("chat", "1.0.0", o), conns
}

func TestPolicyReceipts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		effective []string
		enabled   []string
		check     func(context.Context, server.Policy, *protocol.PolicyReceipt) error
		want      string
	}{{
		name:      "everything granted: accepted, no mode",
		effective: allCaps,
		want:      `{"accepted":true}`,
	}, {
		name:      "pushEvents denied: chat.alerts degraded",
		effective: []string{"channels.register", "channels.incoming"},
		want: `{"accepted":true,"mode":"degraded","unavailableFeatures":[` +
			`{"featureSet":"chat.alerts","missingCapabilities":["pushEvents"],"effect":"disabled"}]}`,
	}, {
		name:      "nothing granted: both degraded",
		effective: []string{},
		want: `{"accepted":true,"mode":"degraded","unavailableFeatures":[` +
			`{"featureSet":"chat.messaging","missingCapabilities":["channels.register","channels.incoming"],"effect":"disabled"},` +
			`{"featureSet":"chat.alerts","missingCapabilities":["pushEvents"],"effect":"disabled"}]}`,
	}, {
		name:      "a host deselecting a set is not a degradation",
		effective: allCaps,
		enabled:   []string{"chat.messaging"},
		want:      `{"accepted":true}`,
	}, {
		name:      "the hook amends the receipt",
		effective: allCaps,
		check: func(_ context.Context, _ server.Policy, r *protocol.PolicyReceipt) error {
			r.Notes = append(r.Notes, json.RawMessage(`"hello"`))
			return nil
		},
		want: `{"accepted":true,"notes":["hello"]}`,
	}, {
		name:      "the hook refuses with a Refusal",
		effective: []string{},
		check: func(context.Context, server.Policy, *protocol.PolicyReceipt) error {
			return &server.Refusal{Fallback: protocol.FallbackMCPOnly, MissingCapabilities: []string{"pushEvents"}, Reason: "alerts are the point"}
		},
		want: `{"accepted":false,"fallback":"mcp-only","missingCapabilities":["pushEvents"],"reason":"alerts are the point"}`,
	}, {
		name:      "the hook refuses with a plain error: fallback mcp-only",
		effective: []string{},
		check: func(context.Context, server.Policy, *protocol.PolicyReceipt) error {
			return errors.New("no thanks")
		},
		want: `{"accepted":false,"fallback":"mcp-only","reason":"no thanks"}`,
	}, {
		name:      "a Refusal with an unknown fallback sends mcp-only",
		effective: []string{},
		check: func(context.Context, server.Policy, *protocol.PolicyReceipt) error {
			return &server.Refusal{Fallback: "explode", Reason: "x"}
		},
		want: `{"accepted":false,"fallback":"mcp-only","reason":"x"}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := chatServer(func(o *server.Options) { o.CheckPolicy = tc.check })
			h := start(t, s)
			h.initialize()
			got := h.policy(tc.effective, tc.enabled, []string{})
			if string(got) != tc.want {
				t.Errorf("receipt:\ngot  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestPolicyAbsentEffectiveGrantsNothing(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	var rec protocol.PolicyReceipt
	h.call(protocol.MethodFeatureSetsUpdate, map[string]any{}, &rec)
	h.call(protocol.MethodPing, nil, nil)
	if !rec.Accepted || rec.Mode != server.ModeDegraded || len(rec.UnavailableFeatures) != 2 {
		t.Errorf("receipt = %+v, want accepted and both sets degraded", rec)
	}
	p, ok := c.Policy()
	if !ok || len(p.Effective) != 0 || p.FeatureSetEnabled("chat.messaging") {
		t.Errorf("Policy() = %+v, %v; want established, nothing granted", p, ok)
	}
}

func TestPolicyHookSeesPolicyAndConn(t *testing.T) {
	var seen server.Policy
	var hadConn bool
	s, _ := chatServer(func(o *server.Options) {
		o.CheckPolicy = func(ctx context.Context, p server.Policy, _ *protocol.PolicyReceipt) error {
			seen = p
			_, hadConn = server.ConnFromContext(ctx)
			return nil
		}
	})
	h := start(t, s)
	h.initialize()
	h.policy([]string{"pushEvents"}, nil, []string{"chat.messaging"})
	if !hadConn {
		t.Error("CheckPolicy's ctx carries no Conn")
	}
	if !seen.Has("pushEvents") || seen.Has("channels.register") || !seen.FeatureSetEnabled("chat.alerts") || seen.FeatureSetEnabled("chat.messaging") {
		t.Errorf("CheckPolicy saw %+v", seen)
	}
}

func TestMalformedPolicyRejected(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	h.policy(allCaps, nil, []string{})

	// A path both granted and denied: rejected whole, -32602, and the
	// policy in force stands.
	ce := h.callErr(protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{
		EffectiveCapabilities: []string{"pushEvents"}, DeniedCapabilities: []string{"pushEvents"},
	})
	if ce.Answer.Code != protocol.CodeInvalidParams {
		t.Errorf("code = %d, want %d", ce.Answer.Code, protocol.CodeInvalidParams)
	}
	if p, ok := c.Policy(); !ok || !p.Has("channels.register") {
		t.Errorf("after a malformed policy, Policy() = %+v, %v; want the earlier one", p, ok)
	}
	// Params of the wrong shape.
	if ce := h.callErr(protocol.MethodFeatureSetsUpdate, []int{1}); ce.Answer.Code != protocol.CodeInvalidParams {
		t.Errorf("code = %d, want %d", ce.Answer.Code, protocol.CodeInvalidParams)
	}
}

func TestMalformedFirstPolicyLeavesNothingGranted(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	h.callErr(protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{
		EffectiveCapabilities: []string{"channels.register"}, DeniedCapabilities: []string{"channels.register"},
	})
	if closed(c.Ready()) {
		t.Error("Ready closed by a malformed policy")
	}
	if _, err := c.RegisterChannels(context.Background(), protocol.ChannelDescriptor{ID: "a"}); !errors.Is(err, server.ErrNoPolicy) {
		t.Errorf("RegisterChannels = %v, want ErrNoPolicy", err)
	}
}

func TestNotificationOnlyNarrows(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	ctx := context.Background()

	// Before any policy, a notification establishes nothing.
	if err := h.peer.Notify(ctx, protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{
		EffectiveCapabilities: allCaps, Enabled: []string{"chat.alerts"},
	}); err != nil {
		t.Fatal(err)
	}
	h.call(protocol.MethodToolsList, nil, nil) // a round trip: the notification has been handled
	if closed(c.Ready()) {
		t.Fatal("a notification established the policy")
	}
	if _, err := c.PushEvent(ctx, server.Event{FeatureSet: "chat.alerts"}); !errors.Is(err, server.ErrNoPolicy) {
		t.Fatalf("PushEvent after a notification = %v, want ErrNoPolicy", err)
	}

	// A Request grants pushEvents and the channels, not lifecycle.
	h.policy([]string{"pushEvents", "channels.register", "channels.incoming"}, nil, []string{})
	waitClosed(t, c.Ready(), "Ready")

	// A notification that disables chat.alerts and tries to widen: the
	// narrowing applies, the widening does not.
	if err := h.peer.Notify(ctx, protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{
		EffectiveCapabilities: allCaps, Enabled: []string{"chat.alerts", "chat.messaging"}, Disabled: []string{"chat.*"},
	}); err != nil {
		t.Fatal(err)
	}
	h.call(protocol.MethodToolsList, nil, nil)
	p, ok := c.Policy()
	if !ok {
		t.Fatal("a narrowing notification un-established the policy")
	}
	if p.Has("channels.lifecycle") {
		t.Error("a notification widened the grant to channels.lifecycle")
	}
	if p.FeatureSetEnabled("chat.alerts") || p.FeatureSetEnabled("chat.messaging") {
		t.Error("a notification's disabled list was not applied")
	}
	_, err := c.PushEvent(ctx, server.Event{FeatureSet: "chat.alerts"})
	var ge *server.GrantError
	if !errors.As(err, &ge) || ge.FeatureSet != "chat.alerts" || !errors.Is(err, server.ErrNotGranted) {
		t.Errorf("PushEvent on a narrowed set = %v, want a GrantError naming chat.alerts", err)
	}
	// Capabilities are untouched by a notification: channels still work.
	if _, err := c.RegisterChannels(ctx, protocol.ChannelDescriptor{ID: "a"}); err != nil {
		t.Errorf("RegisterChannels after narrowing feature sets: %v", err)
	}

	// A later Request replaces the policy whole, narrowing included.
	h.policy(allCaps, nil, []string{})
	if _, err := c.PushEvent(ctx, server.Event{FeatureSet: "chat.alerts"}); err != nil {
		t.Errorf("PushEvent after a new policy Request: %v", err)
	}
}

func TestFeatureSetSelection(t *testing.T) {
	for _, tc := range []struct {
		name              string
		effective         []string
		enabled, disabled []string
		want              map[string]bool
	}{
		{"all granted, no lists", allCaps, nil, nil, map[string]bool{"chat.messaging": true, "chat.alerts": true}},
		{"uses not granted", []string{"pushEvents"}, nil, nil, map[string]bool{"chat.messaging": false, "chat.alerts": true}},
		{"enabled is an allowlist", allCaps, []string{"chat.alerts"}, nil, map[string]bool{"chat.messaging": false, "chat.alerts": true}},
		{"enabled never widens", []string{}, []string{"chat.alerts"}, nil, map[string]bool{"chat.alerts": false}},
		{"empty enabled selects nothing", allCaps, []string{}, nil, map[string]bool{"chat.messaging": false, "chat.alerts": false}},
		{"disabled subtracts", allCaps, nil, []string{"chat.messaging"}, map[string]bool{"chat.messaging": false, "chat.alerts": true}},
		{"patterns", allCaps, []string{"chat.*"}, []string{"*"}, map[string]bool{"chat.messaging": false, "chat.alerts": false}},
		{"prefix pattern", allCaps, []string{"chat.*"}, nil, map[string]bool{"chat.messaging": true, "chat.alerts": true}},
		{"undeclared is never enabled", allCaps, nil, nil, map[string]bool{"other": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, conns := chatServer(nil)
			h := start(t, s)
			h.initialize()
			c := recvConn(t, conns)
			h.policy(tc.effective, tc.enabled, tc.disabled)
			p, _ := c.Policy()
			got := map[string]bool{}
			for name := range tc.want {
				got[name] = p.FeatureSetEnabled(name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("enabled (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefusalTurnsMCPLOff(t *testing.T) {
	refuse := true
	s, conns := chatServer(func(o *server.Options) {
		o.CheckPolicy = func(context.Context, server.Policy, *protocol.PolicyReceipt) error {
			if refuse {
				return &server.Refusal{Reason: "not today"}
			}
			return nil
		}
	})
	h := start(t, s)
	h.initialize()
	c := recvConn(t, conns)
	h.policy(allCaps, nil, []string{})
	if closed(c.Ready()) {
		t.Error("Ready closed after a refusal")
	}
	if _, ok := c.Policy(); ok {
		t.Error("Policy() established after a refusal")
	}
	_, err := c.Incoming(context.Background(), server.Message{ChannelID: "a"})
	var ge *server.GrantError
	if !errors.As(err, &ge) || !errors.Is(err, server.ErrNotGranted) || ge.Capability != "" {
		t.Errorf("Incoming after a refusal = %v, want ErrNotGranted, MCPL off", err)
	}
	// Tools still work: the fallback is mcp-only.
	h.call(protocol.MethodToolsList, nil, nil)

	// A later policy the server accepts establishes it.
	refuse = false
	h.policy(allCaps, nil, []string{})
	waitClosed(t, c.Ready(), "Ready after an accepted policy")
}

func TestRefusalCloseEndsConnection(t *testing.T) {
	s, _ := chatServer(func(o *server.Options) {
		o.CheckPolicy = func(context.Context, server.Policy, *protocol.PolicyReceipt) error {
			return &server.Refusal{Fallback: protocol.FallbackClose, Reason: "cannot run without alerts"}
		}
	})
	h := start(t, s)
	h.initialize()
	var got json.RawMessage
	h.call(protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{EffectiveCapabilities: []string{}}, &got)
	if want := `{"accepted":false,"fallback":"close","reason":"cannot run without alerts"}`; string(got) != want {
		t.Errorf("receipt = %s, want %s", got, want)
	}
	select {
	case err := <-h.served:
		h.served <- err // for the cleanup
		if !errors.Is(err, server.ErrRefusedClose) {
			t.Errorf("Serve = %v, want ErrRefusedClose", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Serve did not return after refusing with fallback close")
	}
	waitClosed(t, h.peer.Done(), "the host seeing the connection end")
}
