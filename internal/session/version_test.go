package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/logtest"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// A 2026-07-28 server is met through server/discover: stateless, its
// identity from discover's _meta, MCPL off, and every call carries _meta
// (the server refuses one without it with -32022).
func TestModernServer(t *testing.T) {
	rec := newRecorder()
	s := open(t, session.Config{Dial: spawn(t, "-modern", "only", "-name", "modern"), Discover: true, Logger: rec.Logger()})
	st := s.State()
	if st.Version != protocol.Version20260728 || !st.Modern || st.Init.ServerInfo == nil || st.Init.ServerInfo.Name != "modern" {
		t.Fatalf("state = version %q modern %v info %+v", st.Version, st.Modern, st.Init.ServerInfo)
	}
	if !slices.Equal(st.ServerVersions, []string{protocol.Version20260728}) || st.Advertisement != nil || len(st.Grant.Effective) != 0 {
		t.Errorf("server versions %v, advertisement %v, grant %v", st.ServerVersions, st.Advertisement, st.Grant.Effective)
	}
	if got := tool(t, s, "plain", nil); got != "plain" {
		t.Errorf("plain = %q", got)
	}
	// The input_required leg is sent again with the server's state.
	if got := tool(t, s, "cont", nil); got != "leg 2 done (state-for-leg2)" {
		t.Errorf("cont = %q", got)
	}
	// A server that asks for input this host never declared: the call
	// ends with an answer that says so.
	_, err := toolErr(s, "ask", nil)
	if ce := callError(t, err); ce.Outcome != wire.ErrorResponse || !strings.Contains(ce.Answer.Message, "asked for input this host cannot give") {
		t.Errorf("ask: %v", err)
	}
	// One that never stops asking is stopped at MaxLegs.
	_, err = toolErr(s, "loop", nil)
	if ce := callError(t, err); !strings.Contains(ce.Answer.Message, "another round trip 8 times") {
		t.Errorf("loop: %v", err)
	}
	rec.One(t, "the server kept answering input_required; the host stopped retrying")
	// The listen is open: touch announces a change on it.
	if got := tool(t, s, "touch", nil); got != "touched" {
		t.Errorf("touch = %q, want touched (no subscriptions/listen open)", got)
	}
}

// The listen the server refuses is asked again; once acknowledged, a list
// change reaches the handler.
func TestModernListenRetried(t *testing.T) {
	acked, changed := make(chan struct{}, 4), make(chan struct{}, 4)
	h := wire.HandlerFunc(func(_ context.Context, r *wire.Request) (any, error) {
		switch r.Method {
		case protocol.MethodSubscriptionsAcked:
			acked <- struct{}{}
		case protocol.MethodToolsListChanged:
			changed <- struct{}{}
		}
		return nil, nil
	})
	rec := newRecorder()
	s := open(t, session.Config{Dial: spawn(t, "-modern", "only", "-listen-fail-first"), Discover: true, Handler: h, Logger: rec.Logger()})
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s reached the handler", what)
		}
	}
	wait(acked, "subscriptions acknowledgement (the refused listen was not asked again)")
	rec.One(t, "subscriptions/listen ended; asking again")
	if got := tool(t, s, "touch", nil); got != "touched" {
		t.Errorf("touch = %q", got)
	}
	wait(changed, "tools/list_changed")
}

// A dual-era server without MCPL is met at 2026-07-28; one that advertises
// MCPL is opened with initialize, where MCPL has its session.
func TestDualEra(t *testing.T) {
	s := open(t, session.Config{Dial: spawn(t, "-modern", "dual"), Discover: true})
	if st := s.State(); !st.Modern {
		t.Errorf("dual server without MCPL: version %q, modern %v", st.Version, st.Modern)
	}
	s2 := open(t, session.Config{Dial: spawn(t, "-modern", "dual", "-mcpl", adFull, "-protocol-version", "echo"), Discover: true, Implemented: everything})
	st := s2.State()
	if st.Modern || st.Version != protocol.Version20251125 || st.Advertisement == nil {
		t.Fatalf("dual MCPL server: version %q, modern %v, advertisement %v", st.Version, st.Modern, st.Advertisement)
	}
	if st.Policy == nil || !st.Policy.Outcome.Established() {
		t.Errorf("policy %+v, want established", st.Policy)
	}
	if got := tool(t, s2, "echo", map[string]string{"text": "x"}); got != "x" {
		t.Errorf("echo = %q", got)
	}
}

// A legacy server answers discover "method not found" and is opened with
// initialize at the newest legacy revision; it answers the one it speaks.
func TestLegacyNegotiation(t *testing.T) {
	for _, v := range protocol.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			s := open(t, session.Config{Dial: spawn(t, "-protocol-version", v), Discover: true})
			if st := s.State(); st.Version != v || st.Modern {
				t.Errorf("version %q modern %v, want %s", st.Version, st.Modern, v)
			}
			if got := tool(t, s, "echo", map[string]string{"text": "x"}); got != "x" {
				t.Errorf("echo = %q", got)
			}
		})
	}
	// Asked for 2025-11-25, echoing it.
	s := open(t, session.Config{Dial: spawn(t, "-protocol-version", "echo")})
	if st := s.State(); st.Version != protocol.Version20251125 {
		t.Errorf("echoing server: version %q", st.Version)
	}
}

// A server answering a revision this host does not speak is refused,
// naming both sides, and not redialled.
func TestVersionMismatch(t *testing.T) {
	d := newDialer(t, []string{"-protocol-version", "1999-01-01"})
	cfg := withDefaults(session.Config{Dial: d.dial, Reconnect: session.Reconnect{Enabled: true, Initial: time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := session.Connect(ctx, cfg)
	if !errors.Is(err, session.ErrVersion) {
		t.Fatalf("Connect: %v, want ErrVersion", err)
	}
	for _, want := range []string{`"1999-01-01"`, "2025-11-25", "2024-11-05"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if n := d.n.Load(); n != 1 {
		t.Errorf("dialled %d times, want 1: a version mismatch is not retried", n)
	}
}

// A 2026-07-28-only server met by a host that does not probe: initialize
// fails, and says the server may speak a newer MCP only when discover was
// tried; with discover, the answer is the server's refusal of initialize
// and its data.supported list.
func TestModernOnlyWithoutDiscover(t *testing.T) {
	cfg := withDefaults(session.Config{Dial: spawn(t, "-modern", "only")})
	_, err := session.Connect(context.Background(), cfg)
	if !errors.Is(err, session.ErrVersion) || !strings.Contains(err.Error(), "speaks 2026-07-28") {
		t.Fatalf("Connect: %v, want a refusal naming 2026-07-28", err)
	}
}

// The _meta of a 2026-07-28 call: the revision, the client and its
// capabilities, with what the caller put there kept.
func TestModernMetaOnTheWire(t *testing.T) {
	s := open(t, session.Config{Dial: spawn(t, "-modern", "only"), Discover: true, ClientName: "h", ClientVersion: "1"})
	var res protocol.CallToolResult
	params := map[string]any{"name": "meta", "_meta": map[string]string{"traceparent": "00-x", protocol.MetaProtocolVersion: "2026-07-28"}}
	if err := s.Call(context.Background(), protocol.MethodToolsCall, params, &res); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(res.Text()), &got); err != nil {
		t.Fatalf("meta answered %q", res.Text())
	}
	want := map[string]any{
		"traceparent":                   "00-x",
		protocol.MetaProtocolVersion:    "2026-07-28",
		protocol.MetaClientInfo:         map[string]any{"name": "h", "version": "1"},
		protocol.MetaClientCapabilities: map[string]any{},
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("_meta on the wire (-want +got):\n%s", diff)
	}
}

// A legacy server that exits on server/discover is dialled again at once
// and opened with initialize alone, and its reconnects skip discover.
func TestDiscoverKillsLegacyServer(t *testing.T) {
	d := newDialer(t, []string{"-exit-on", protocol.MethodDiscover + "=1"})
	s := open(t, session.Config{Dial: d.dial, Discover: true})
	if st := s.State(); st.Modern || st.Version == "" {
		t.Errorf("version %q modern %v", st.Version, st.Modern)
	}
	if n := d.n.Load(); n != 2 {
		t.Errorf("dialled %d times, want 2 (the probe's, then initialize's)", n)
	}
	if got := tool(t, s, "echo", map[string]string{"text": "x"}); got != "x" {
		t.Errorf("echo = %q", got)
	}
}

// MCPL works the same at every revision opened with initialize: the
// advertisement under experimental.mcpl, the policy exchange, the grant.
func TestMCPLAtEveryLegacyVersion(t *testing.T) {
	for _, v := range protocol.LegacyVersions {
		t.Run(v, func(t *testing.T) {
			s := open(t, session.Config{Dial: spawn(t, "-mcpl", adFull, "-protocol-version", "echo"), Version: v, Implemented: everything})
			st := s.State()
			if st.Version != v || st.Advertisement == nil || st.Policy == nil || !st.Policy.Outcome.Established() || !s.Grant().Has("pushEvents") {
				t.Errorf("at %s: version %q, advertisement %v, policy %+v, grant %v", v, st.Version, st.Advertisement != nil, st.Policy, s.Grant().Effective)
			}
		})
	}
}

// A pinned revision the server answers otherwise is refused.
func TestPinnedVersionRefused(t *testing.T) {
	cfg := withDefaults(session.Config{Dial: spawn(t, "-protocol-version", protocol.Version20241105), Version: protocol.Version20250618})
	_, err := session.Connect(context.Background(), cfg)
	if !errors.Is(err, session.ErrVersion) || !strings.Contains(err.Error(), "answered initialize with 2024-11-05; this host is pinned to 2025-06-18") {
		t.Fatalf("Connect: %v", err)
	}
}

// A server that spoke 2026-07-28 and then leaves server/discover
// unanswered on a reconnect is redialled, not taken for a legacy server
// (which would meet its "method not found" to initialize and stop).
func TestModernReconnectDiscoverFails(t *testing.T) {
	d := newDialer(t,
		[]string{"-modern", "only", "-exit-on", protocol.MethodToolsCall + "=1"},
		[]string{"-modern", "only", "-ignore", protocol.MethodDiscover})
	d.dials = make(chan int, 1000) // never full: the dialer must not block on it
	rec := newRecorder()
	s := open(t, session.Config{Dial: d.dial, Discover: true, DiscoverTimeout: 200 * time.Millisecond, Logger: rec.Logger(),
		Reconnect: session.Reconnect{Enabled: true, Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}})
	<-d.dials
	toolErr(s, "plain", nil) // the server exits on it
	for n := 0; n < 3; {
		select {
		case n = <-d.dials:
		case <-time.After(30 * time.Second):
			t.Fatalf("dialled %d times; want the reconnect retried", n)
		}
	}
	rec.WaitFunc(t, "a failed reconnect naming the discover", func(recs []logtest.Record) bool {
		for _, r := range recs {
			if r.Message == "reconnect attempt failed" && strings.Contains(r.Attr("error"), "to a server that spoke 2026-07-28 before, failed") {
				return true
			}
		}
		return false
	})
	if !s.Reconnecting() {
		t.Error("the session stopped reconnecting")
	}
}
