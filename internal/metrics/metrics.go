// Package metrics is the host's Prometheus instruments: what it counts as
// things happen (requests by server, direction, method and outcome, their
// latencies, agent turns, model tokens) and what it reads from the host
// when scraped (each server's connection, inbound queue depth and
// reconnects; its channels registered and open). docs/status.md lists
// them.
//
// Label values are bounded whatever a server sends: a server's id comes
// from the configuration, and a method name outside the protocol's is
// counted as "other", so a server inventing method names can't grow the
// series without end.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpl-go/mcpl/internal/hooks"
	"github.com/mcpl-go/mcpl/internal/inference"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Snapshot is what a scrape reads from the host.
type Snapshot struct {
	Servers []Server
}

// Server is one server's live figures.
type Server struct {
	ID         string
	Connected  bool
	Queued     int   // its messages waiting for this host's handler
	Reconnects int64 // since the host started
	Channels   int   // registered now
	Open       int   // of those, open now
	// State is its state (host.ServerStates); LastErrorAt when its last
	// failure was seen, zero for none.
	State       string
	LastErrorAt time.Time
}

// ServerStates are the values of mcpl_server_state's state label, each
// server having a series for every one (1 for its state, 0 for the rest),
// so that a query need not know which states exist. host.ServerStates.
var ServerStates = []string{"connecting", "connected", "reconnecting", "disconnected", "failed"}

// Metrics are the instruments. A nil *Metrics counts nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	turns    *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	// Model calls: each attempt, how long it took, the retries.
	calls, retries *prometheus.CounterVec
	callTime       *prometheus.HistogramVec
	treated        *prometheus.CounterVec
	// RFC-006 (host/coalesce.go).
	coalesced, removed, renders *prometheus.CounterVec
	duplicates                  *prometheus.CounterVec // inbox.go
}

// Request directions.
const (
	Sent     = "sent"     // this host's request to a server
	Answered = "answered" // a server's request this host answered
)

// New registers the instruments with reg; snapshot is called at each
// scrape, and must be safe to call from any goroutine.
func New(reg prometheus.Registerer, snapshot func() Snapshot) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_requests_total",
			Help: "JSON-RPC requests that ended, by server, direction (sent by this host, or answered by it), method and outcome.",
		}, []string{"server", "direction", "method", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpl_request_duration_seconds",
			Help:    "How long requests took: a sent one until its answer, an answered one from its arrival (queueing included).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"server", "direction", "method"}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_agent_turns_total",
			Help: "Agent turns that ended, by agent and why they ended.",
		}, []string{"agent", "reason"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_model_tokens_total",
			Help: "Model tokens, by agent, provider and direction (in: read by the model; out: written; cache_read and cache_write: input tokens read from and written to the provider's prompt cache, where it says).",
		}, []string{"agent", "provider", "direction"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_model_calls_total",
			Help: "Model call attempts, by agent, provider and outcome (ok, or error: the attempt failed, whether it was made again or not).",
		}, []string{"agent", "provider", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_model_retries_total",
			Help: "Model call attempts that failed and were made again, by agent and provider.",
		}, []string{"agent", "provider"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpl_model_call_duration_seconds",
			Help:    "How long model call attempts took, by agent, provider and outcome.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600},
		}, []string{"agent", "provider", "outcome"}),
		treated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_agent_messages_total",
			Help: "Messages and events an agent read, by agent, server and treatment (wake: woke it; batch: joined a turn without waking it; ignore: consumed unseen).",
		}, []string{"agent", "server", "treatment"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_coalesced_total",
			Help: "Coalesced events and messages admitted (RFC-006), by server and outcome (first, replaced, appended, retracted, noted, consumed; retry: a retry answered as before).",
		}, []string{"server", "outcome"}),
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_coalesce_removed_total",
			Help: "Coalesced occurrences taken out of delivery before any model read them, by server and why (displaced, folded, withdrawn, cancelled).",
		}, []string{"server", "reason"}),
		renders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpl_renders_total",
			Help: "push/render completions, by server and what they showed (rendered, empty, fallback, lapsed, discarded).",
		}, []string{"server", "result"}),
		duplicates: newDuplicates(),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.turns, m.tokens, m.calls, m.retries, m.callTime, m.treated, m.coalesced, m.removed, m.renders, m.duplicates, liveCollector(snapshot)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Server returns the observer of one server's connections; nil (an
// untyped nil, which wire reads as none) when m is.
func (m *Metrics) Server(id string) wire.Observer {
	if m == nil {
		return nil
	}
	return serverObserver{m: m, id: id}
}

// Turn counts an agent turn that ended for reason.
func (m *Metrics) Turn(agent, reason string) {
	if m == nil {
		return
	}
	m.turns.WithLabelValues(agent, reason).Inc()
}

// Treated counts n messages of server an agent read and treated as
// treatment (wake, batch, ignore).
func (m *Metrics) Treated(agent, server, treatment string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.treated.WithLabelValues(agent, server, treatment).Add(float64(n))
}

// Coalesced counts a coalesced occurrence admitted with outcome.
func (m *Metrics) Coalesced(server, outcome string) {
	if m == nil {
		return
	}
	m.coalesced.WithLabelValues(server, outcome).Inc()
}

// Removed counts a coalesced occurrence taken out unread, for reason.
func (m *Metrics) Removed(server, reason string) {
	if m == nil {
		return
	}
	m.removed.WithLabelValues(server, reason).Inc()
}

// Render counts a push/render completion by what it showed.
func (m *Metrics) Render(server, result string) {
	if m == nil {
		return
	}
	m.renders.WithLabelValues(server, result).Inc()
}

// Tokens are a model call's tokens.
type Tokens struct{ In, Out, CacheRead, CacheWrite int }

// ModelCall counts one attempt of an agent's model call to provider: ok
// or not, how long it took, and, when it failed and is made again, a
// retry; and an answer's tokens.
func (m *Metrics) ModelCall(agent, provider string, ok, retried bool, took time.Duration, tok Tokens) {
	if m == nil {
		return
	}
	outcome := "ok"
	if !ok {
		outcome = "error"
	}
	m.calls.WithLabelValues(agent, provider, outcome).Inc()
	m.callTime.WithLabelValues(agent, provider, outcome).Observe(took.Seconds())
	if retried {
		m.retries.WithLabelValues(agent, provider).Inc()
	}
	for _, d := range []struct {
		dir string
		n   int
	}{{"in", tok.In}, {"out", tok.Out}, {"cache_read", tok.CacheRead}, {"cache_write", tok.CacheWrite}} {
		if d.n > 0 {
			m.tokens.WithLabelValues(agent, provider, d.dir).Add(float64(d.n))
		}
	}
}

type serverObserver struct {
	m  *Metrics
	id string
}

func (o serverObserver) Called(method, outcome string, d time.Duration) {
	o.observe(Sent, method, outcome, d)
}

func (o serverObserver) Answered(method, outcome string, d time.Duration) {
	o.observe(Answered, method, outcome, d)
}

func (o serverObserver) observe(direction, method, outcome string, d time.Duration) {
	method = MethodLabel(method)
	o.m.requests.WithLabelValues(o.id, direction, method, outcome).Inc()
	o.m.latency.WithLabelValues(o.id, direction, method).Observe(d.Seconds())
}

// knownMethods are the protocol's methods, each counted by its name. Some
// only ever go out as notifications, which the observer (told of requests
// only) never sees; they are here so that the list is the protocol's.
var knownMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range []string{
		protocol.MethodPing, protocol.MethodInitialize, protocol.MethodToolsList, protocol.MethodToolsCall,
		protocol.MethodFeatureSetsUpdate, protocol.MethodPushEvent,
		protocol.MethodChannelsRegister, protocol.MethodChannelsChanged, protocol.MethodChannelsList,
		protocol.MethodChannelsIncoming, protocol.MethodChannelsOpen, protocol.MethodChannelsClose,
		protocol.MethodChannelsPublish, protocol.MethodChannelsAcknowledge, protocol.MethodChannelsTyping,
		protocol.MethodChannelsOutgoingChunk, protocol.MethodChannelsOutgoingComplete,
		protocol.MethodInferenceRequest, protocol.MethodModelInfo,
		protocol.MethodFeatureSetsChanged, protocol.MethodScopeElevate,
		hooks.MethodBeforeInference, hooks.MethodLifecycle, inference.MethodChunk,
	} {
		m[name] = true
	}
	return m
}()

// MethodLabel is the method as a label value: its name when the protocol
// has it, else "other".
func MethodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "other"
}

// live is the collector of the figures read at scrape.
type live struct {
	snapshot                                     func() Snapshot
	up, queued, reconnects, registered, openDesc *prometheus.Desc
	state, lastError                             *prometheus.Desc
}

func liveCollector(snapshot func() Snapshot) *live {
	server := []string{"server"}
	return &live{
		snapshot:   snapshot,
		up:         prometheus.NewDesc("mcpl_server_connected", "1 while the server's connection is open, else 0.", server, nil),
		queued:     prometheus.NewDesc("mcpl_inbound_queue_depth", "The server's messages waiting for this host's handler.", server, nil),
		reconnects: prometheus.NewDesc("mcpl_reconnects_total", "Reconnects to the server after a drop.", server, nil),
		registered: prometheus.NewDesc("mcpl_channels_registered", "The server's channels registered now.", server, nil),
		openDesc:   prometheus.NewDesc("mcpl_channels_open", "The server's channels open now.", server, nil),
		state:      prometheus.NewDesc("mcpl_server_state", "1 for the server's state now, 0 for its other states.", []string{"server", "state"}, nil),
		lastError:  prometheus.NewDesc("mcpl_server_last_error_timestamp_seconds", "When the server's last failure (a connect, dial or dropped connection) was seen, in Unix seconds; 0 for none.", server, nil),
	}
}

func (l *live) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{l.up, l.queued, l.reconnects, l.registered, l.openDesc, l.state, l.lastError} {
		ch <- d
	}
}

func (l *live) Collect(ch chan<- prometheus.Metric) {
	for _, s := range l.snapshot().Servers {
		up := 0.0
		if s.Connected {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(l.up, prometheus.GaugeValue, up, s.ID)
		ch <- prometheus.MustNewConstMetric(l.queued, prometheus.GaugeValue, float64(s.Queued), s.ID)
		ch <- prometheus.MustNewConstMetric(l.reconnects, prometheus.CounterValue, float64(s.Reconnects), s.ID)
		ch <- prometheus.MustNewConstMetric(l.registered, prometheus.GaugeValue, float64(s.Channels), s.ID)
		ch <- prometheus.MustNewConstMetric(l.openDesc, prometheus.GaugeValue, float64(s.Open), s.ID)
		for _, st := range ServerStates {
			v := 0.0
			if st == s.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(l.state, prometheus.GaugeValue, v, s.ID, st)
		}
		at := 0.0
		if !s.LastErrorAt.IsZero() {
			at = float64(s.LastErrorAt.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(l.lastError, prometheus.GaugeValue, at, s.ID)
	}
}
