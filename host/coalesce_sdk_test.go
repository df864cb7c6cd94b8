package host_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/protocol"
	mcplserver "github.com/mcpl-go/mcpl/server"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// TestCoalescingThroughSDK is coalescing as a server author uses it: a
// server built with the SDK (mcplserver.Event.Coalesce, HandlePushRender) over
// WebSocket, the real host from a config file with a SQLite store, and a
// model speaking Anthropic's API. An edit replaces its create unread, a
// deferred batch of two notices is rendered once as the turn is assembled,
// and the model reads the edit and the render, not the create or the
// fallback.
func TestCoalescingThroughSDK(t *testing.T) {
	renders := make(chan mcplserver.RenderRequest, 4)
	reg := prometheus.NewRegistry()
	c, api := sdkHost(t, reg, `      debounce: 0s
      rules:
        - {tagsAny: ["go"], treat: wake}
        - {tagsNone: ["go"], treat: batch}
`, func(ctx context.Context, req mcplserver.RenderRequest) (mcplserver.RenderResult, error) {
		renders <- req
		return mcplserver.RenderResult{Content: mcplserver.TextContent(fmt.Sprintf("RENDERED from %d notices", len(req.Notices)))}, nil
	})
	if ec, ok := c.Coalescing(); !ok || ec != protocol.AllEventCoalescing() {
		t.Fatalf("the host advertised %+v (%v), want every part", ec, ok)
	}

	push := func(id, text string, co *protocol.Coalesce, tags ...string) string {
		t.Helper()
		res, err := c.PushEvent(t.Context(), mcplserver.Event{FeatureSet: "doc", EventID: id, Content: mcplserver.TextContent(text), Coalesce: co, Tags: tags})
		if err != nil || !res.Accepted {
			t.Fatalf("push %s: %+v %v", id, res, err)
		}
		if res.Coalesce == nil {
			return ""
		}
		return res.Coalesce.Outcome
	}
	for _, s := range []struct {
		id, text string
		co       *protocol.Coalesce
		want     string
	}{
		{"create", "VERSION_ONE", &protocol.Coalesce{Key: "doc-1", Initial: true}, protocol.CoalesceFirst},
		{"edit", "VERSION_TWO", &protocol.Coalesce{Key: "doc-1"}, protocol.CoalesceReplaced},
		{"n1", "FALLBACK_TEXT", &protocol.Coalesce{Key: "cursor", Deferred: true, Data: []byte(`{"at":1}`)}, protocol.CoalesceFirst},
		{"n2", "FALLBACK_TEXT", &protocol.Coalesce{Key: "cursor", Deferred: true, Data: []byte(`{"at":2}`)}, protocol.CoalesceReplaced},
	} {
		if got := push(s.id, s.text, s.co); got != s.want {
			t.Errorf("push %s: outcome %q, want %q", s.id, got, s.want)
		}
	}
	push("go", "TIME_TO_READ", nil, "go")
	api.Wait(1)

	req := <-renders
	if len(req.Notices) != 2 || string(req.Notices[0].Data) != `{"at":1}` || req.Key != "cursor" || req.EventID != "n2" {
		t.Errorf("push/render = %+v, want both notices, oldest first, with their data", req)
	}
	text := requestText(api.Requests()[0])
	for _, want := range []string{"VERSION_TWO", "RENDERED from 2 notices", "TIME_TO_READ"} {
		if !strings.Contains(text, want) {
			t.Errorf("the request has no %q:\n%s", want, text)
		}
	}
	for _, not := range []string{"VERSION_ONE", "FALLBACK_TEXT", `"at"`} {
		if strings.Contains(text, not) {
			t.Errorf("the request has %q:\n%s", not, text)
		}
	}
	// Read now: a later version is appended after it.
	if got := push("edit2", "VERSION_THREE", &protocol.Coalesce{Key: "doc-1"}); got != protocol.CoalesceAppended {
		t.Errorf("an edit after the read: outcome %q, want appended", got)
	}
	select {
	case r := <-renders:
		t.Errorf("a second push/render: %+v", r)
	default:
	}
	// What the operator counts (docs/status.md).
	for _, m := range []struct {
		name, label, value string
		want               float64
	}{
		{"mcpl_coalesced_total", "outcome", "first", 2},
		{"mcpl_coalesced_total", "outcome", "replaced", 2},
		{"mcpl_coalesced_total", "outcome", "appended", 1},
		{"mcpl_coalesce_removed_total", "reason", "displaced", 1},
		{"mcpl_coalesce_removed_total", "reason", "folded", 1},
		{"mcpl_renders_total", "result", "rendered", 1},
	} {
		if got := counterValue(t, reg, m.name, m.label, m.value); got != m.want {
			t.Errorf("%s{server=editor,%s=%s} = %v, want %v", m.name, m.label, m.value, got, m.want)
		}
	}
}

// sdkHost starts the real host from a config file, with a SQLite store
// and metrics in reg, on an SDK server "editor" over WebSocket that has
// the feature set doc and answers push/render with render; its one agent,
// ada, speaks Anthropic's API to the server returned and wakes by wake
// (the YAML under its "wake:"). It returns the server's connection once
// it is ready.
func sdkHost(t *testing.T, reg *prometheus.Registry, wake string, render func(context.Context, mcplserver.RenderRequest) (mcplserver.RenderResult, error)) (*mcplserver.Conn, *fakeapi.Server) {
	t.Helper()
	conns := make(chan *mcplserver.Conn, 1)
	srv := mcplserver.New("editor", "1.0.0", &mcplserver.Options{
		Capabilities: []string{"pushEvents"},
		FeatureSets:  []mcplserver.FeatureSet{{Name: "doc", Description: "documents", Uses: []string{"pushEvents"}}},
		OnConnect: func(ctx context.Context, c *mcplserver.Conn) {
			select {
			case <-c.Ready():
				conns <- c
			case <-ctx.Done():
			}
		},
	})
	srv.HandlePushRender(render)
	ws := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ws.Close() })
	api := fakeapi.NewAnthropic(t)

	dir := t.TempDir()
	cfgText := fmt.Sprintf(`servers:
  - id: editor
    url: ws%s
agents:
  - name: ada
    model: {provider: anthropic, model: m, apiKeyEnv: KEY, baseURL: %q}
    wake:
%s`, strings.TrimPrefix(ws.URL, "http"), api.URL, wake)
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "host.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Options{Store: st, Logger: discardLogger(), Metrics: reg, LookupEnv: func(k string) (string, bool) { return "k", k == "KEY" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); st.Close() })
	if err := h.Start(cfg); err != nil {
		t.Fatal(err)
	}
	return <-conns, api
}

// counterValue is the value of the counter name with server="editor" and
// label=value in reg; 0 when there is none.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["server"] == "editor" && got[label] == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
