// Package status is the host's status server (mcplhost run --status): a
// health check, Prometheus metrics, the host's servers, channels and
// agents as JSON, and a small self-contained page that shows them live
// (docs/status.md).
//
// It only reads: nothing it serves changes the host. It binds loopback
// unless given an address with a host part explicitly, since what it
// shows (grants, channel names, what agents said) is not for everyone.
package status

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpl-go/mcpl/host"
)

// Host is what the status server reads: *host.Host.
type Host interface {
	Servers() []host.ServerState
	Channels() []host.ChannelState
	Agents() []host.AgentState
	// Backlog is how many inbox messages an agent has not consumed yet
	// (more: there may be more); asked for /api/agents only, as it reads
	// the store.
	Backlog(ctx context.Context, agent string) (n int, more bool)
}

// backlogWait bounds the store's reads of one /api/agents request's
// backlogs, so that a slow store doesn't hold the page.
const backlogWait = 2 * time.Second

//go:embed page.html
var page []byte

// RecentDefault is how many of an agent's latest transcript events
// /api/agents gives when not asked (?recent=N, at most host.RecentEvents).
const RecentDefault = 30

// Handler serves the status endpoints for h; metrics from g.
func Handler(h Host, g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
		w.Write(page)
	})
	started := time.Now()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		healthz(w, h, time.Now())
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		readyz(w, h)
	})
	mux.HandleFunc("GET /api/{$}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, Endpoints)
	})
	mux.HandleFunc("GET /api/host", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, hostView(h, started, time.Now()))
	})
	mux.HandleFunc("GET /api/store", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, storeView(h))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/servers", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, servers(h.Servers()))
	})
	mux.HandleFunc("GET /api/channels", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, channels(h.Channels()))
	})
	mux.HandleFunc("GET /api/agents", func(w http.ResponseWriter, r *http.Request) {
		n := RecentDefault
		if v := r.URL.Query().Get("recent"); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 0 {
				http.Error(w, "recent: a count of events, 0 or more", http.StatusBadRequest)
				return
			}
			n = min(k, host.RecentEvents)
		}
		views := agents(h.Agents(), n, time.Now())
		// One bound for the request's store reads, which end with it.
		ctx, cancel := context.WithTimeout(r.Context(), backlogWait)
		for i := range views {
			views[i].Backlog, views[i].BacklogMore = h.Backlog(ctx, views[i].Name)
		}
		cancel()
		writeJSON(w, views)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONCode(w, http.StatusOK, v) }

func writeJSONCode(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// Endpoint is one entry of /api/: a path and what it serves.
type Endpoint struct {
	Path string `json:"path"`
	What string `json:"what"`
}

// Endpoints are what /api/ lists: every path the status server serves.
var Endpoints = []Endpoint{
	{"/", "the status page"},
	{"/healthz", "200 while every server is connected, no turn is past its deadline and the store writes; else 503 naming each reason"},
	{"/readyz", "200 once the host has started (store replayed, first connects ended); 503 before"},
	{"/metrics", "Prometheus metrics"},
	{"/api/", "this list"},
	{"/api/host", "the build running, when it started and its uptime, health and readiness"},
	{"/api/servers", "every configured server: state, since when, last error, implementation, policy, grant, feature sets"},
	{"/api/channels", "every channel registered or decided on: the decision and its state on its server"},
	{"/api/agents", "every agent: model, turns, tokens, the turn in progress, latest transcript events (?recent=N)"},
	{"/api/store", "the store's health"},
}

// ListenAddr is the address to listen on for flag: "PORT" and ":PORT"
// mean loopback's; "HOST:PORT" is taken as given.
func ListenAddr(flag string) (string, error) {
	if flag == "" {
		return "", errors.New("an address is required (127.0.0.1:PORT)")
	}
	if !strings.Contains(flag, ":") {
		flag = ":" + flag
	}
	h, p, err := net.SplitHostPort(flag)
	if err != nil {
		return "", err
	}
	if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("%q is not a port", p)
	}
	if h == "" {
		h = "127.0.0.1"
	}
	return net.JoinHostPort(h, p), nil
}

// Server is a running status server.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Start listens on addr (as ListenAddr reads it; an IP literal's family
// only, see listenNetwork) and serves h's status and g's metrics until
// Close, to requests whose Host header names the address they came in on
// (guardHost); others get 421.
func Start(addr string, h Host, g prometheus.Gatherer, log *slog.Logger) (*Server, error) {
	a, err := ListenAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen(listenNetwork(a), a)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		ln: ln,
		srv: &http.Server{
			Handler:           guardHost(Handler(h, g), ln.Addr(), hostName(a)),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address it listens on (with the port chosen, for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Loopback says it listens on a loopback address only: beyond it, anyone
// who can reach it reads the grants, the channels and what agents said.
func (s *Server) Loopback() bool {
	a, ok := s.ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// URL is its page's address.
func (s *Server) URL() string { return "http://" + s.Addr() + "/" }

// Close stops taking connections and lets the requests under way end,
// for at most 2 seconds, then closes what is left.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
