package status_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/status"
)

// bareHost has no servers, channels or agents; with st set it reports that
// store health.
type bareHost struct{ st *host.StoreState }

func (bareHost) Servers() []host.ServerState                 { return nil }
func (bareHost) Channels() []host.ChannelState               { return nil }
func (bareHost) Agents() []host.AgentState                   { return nil }
func (bareHost) Backlog(context.Context, string) (int, bool) { return 0, false }

type healthHost struct {
	bareHost
}

func (h healthHost) StoreHealth() host.StoreState { return *h.st }

func getPath(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	res, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// /healthz is 503 while the store fails, saying since when and why, and
// {"status":"ok"} again after; /api/store says the same as JSON. A Host that
// reports no store health is ok.
func TestHealthzReportsAFailingStore(t *testing.T) {
	st := &host.StoreState{}
	srv := httptest.NewServer(status.Handler(healthHost{bareHost{st}}, prometheus.NewRegistry()))
	defer srv.Close()
	if code, body := getPath(t, srv, "/healthz"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz with the store writing = %d %q", code, body)
	}
	since := time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC)
	*st = host.StoreState{Failing: true, Since: since, FailedWrites: 3, LastError: "database or disk is full (13)"}
	code, body := getPath(t, srv, "/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `{"store":"failing","since":"2026-12-02T01:02:03Z","lastError":"database or disk is full (13)","failedWrites":3,"why":"the store's writes fail: 3 writes failed`) {
		t.Errorf("/healthz with the store failing = %d %q", code, body)
	}
	_, js := getPath(t, srv, "/api/store")
	var v status.StoreView
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	if v.State != "failing" || !v.Since.Equal(since) || v.FailedWrites != 3 || v.LastError != "database or disk is full (13)" {
		t.Errorf("/api/store while failing = %s", js)
	}
	rec := since.Add(time.Minute)
	*st = host.StoreState{Recovered: rec}
	if code, body := getPath(t, srv, "/healthz"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz after recovery = %d %q", code, body)
	}
	if _, js := getPath(t, srv, "/api/store"); strings.TrimSpace(js) != `{"state":"ok","recovered":"2026-12-02T01:03:03Z"}` {
		t.Errorf("/api/store after recovery = %s", js)
	}

	plain := httptest.NewServer(status.Handler(bareHost{}, prometheus.NewRegistry()))
	defer plain.Close()
	if code, body := getPath(t, plain, "/healthz"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz of a host with no store health = %d %q", code, body)
	}
}
