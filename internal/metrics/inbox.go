package metrics

import "github.com/prometheus/client_golang/prometheus"

// newDuplicates is mcpl_inbox_duplicates_total: messages and push events
// a server sent whose id was in the inbox already, so they were kept once
// and not delivered again. A retry of one the host kept (its answer was
// lost) counts too; a count that grows with every message a server sends
// after a restart says the server reuses its ids across runs.
func newDuplicates() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpl_inbox_duplicates_total",
		Help: "Inbound messages and push events not added to the inbox because one with their server and id was there already (deduplicated, not delivered again), by server.",
	}, []string{"server"})
}

// InboxDuplicates counts n messages of server the inbox deduplicated.
func (m *Metrics) InboxDuplicates(server string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.duplicates.WithLabelValues(server).Add(float64(n))
}
