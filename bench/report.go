package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

// results are the samples of a run: for each in-flight level, each
// client's samples in round order.
type results struct {
	samples []map[string][]sample // [in-flight level][client]
	pids    map[string]int        // each client's server process
}

func newResults(o options) *results {
	r := &results{pids: map[string]int{}}
	for range o.inflight {
		r.samples = append(r.samples, map[string][]sample{})
	}
	return r
}

// row is one client's line of a table.
type row struct {
	name                 string
	median, lo, hi       float64 // ns a call
	ratio                float64 // median of the rounds' ratios to the floor; 0 without a floor
	allocs, bytes        float64
	clientCPU, serverCPU float64 // ns a call; serverCPU -1 unknown
}

// rows summarises level li, in the order of o.clients.
func (r *results) rows(o options, li int) []row {
	byClient := r.samples[li]
	floor := byClient["raw"]
	var out []row
	for _, name := range o.clients {
		ss := byClient[name]
		if len(ss) == 0 {
			continue
		}
		get := func(f func(sample) float64) []float64 {
			v := make([]float64, len(ss))
			for i, s := range ss {
				v[i] = f(s)
			}
			return v
		}
		wall := get(func(s sample) float64 { return s.wall })
		w := row{
			name:      name,
			median:    median(wall),
			lo:        slices.Min(wall),
			hi:        slices.Max(wall),
			allocs:    median(get(func(s sample) float64 { return s.allocs })),
			bytes:     median(get(func(s sample) float64 { return s.bytes })),
			clientCPU: median(get(func(s sample) float64 { return s.clientCPU })),
			serverCPU: median(get(func(s sample) float64 { return s.serverCPU })),
		}
		if len(floor) == len(ss) {
			ratios := make([]float64, len(ss))
			for i := range ss {
				ratios[i] = ss[i].wall / floor[i].wall
			}
			w.ratio = median(ratios)
		}
		out = append(out, w)
	}
	return out
}

// median of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// write prints the machine, how the run went, and a table for each
// in-flight level.
func (r *results) write(out io.Writer, o options, loadBefore, loadAfter string) {
	machine := fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s/%s, %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if m := cpuModel(); m != "" {
		machine += ", " + m
	}
	fmt.Fprintln(out, "machine:", machine)
	if loadBefore != "" {
		fmt.Fprintf(out, "load average (1, 5, 15 min): %s before, %s after\n", loadBefore, loadAfter)
	}
	server := "plain MCP"
	if o.mcpl {
		server = "advertises MCPL (the session and host run the policy exchange)"
	}
	rounds := "rounds"
	if o.rounds == 1 {
		rounds = "round"
	}
	fmt.Fprintf(out, "%d %s, clients in turn, the order rotated each round: %s; echo server: %s\n",
		o.rounds, rounds, strings.Join(o.clients, ", "), server)
	// The client column is padded by hand, so that it reads left-aligned
	// in a table aligned right.
	width := len("client")
	for _, c := range o.clients {
		width = max(width, len(c))
	}
	for li, k := range o.inflight {
		fmt.Fprintln(out)
		calls := "calls"
		if k == 1 {
			calls = "call"
		}
		fmt.Fprintf(out, "%d %s in flight, %d calls a measurement after %d of warm-up\n", k, calls, o.calls[li], warmup(o.calls[li], k))
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%-*s\tµs/call\tmin..max\tx floor\tcalls/s\tallocs/call\tB/call\tCPU µs/call: client\tserver\t\n", width, "client")
		for _, w := range r.rows(o, li) {
			ratio := "-"
			if w.ratio > 0 {
				ratio = fmt.Sprintf("%.2f", w.ratio)
			}
			srv := "-"
			if w.serverCPU >= 0 {
				srv = fmt.Sprintf("%.2f", w.serverCPU/1e3)
			}
			fmt.Fprintf(tw, "%-*s\t%s\t%s..%s\t%s\t%s\t%.1f\t%.0f\t%.2f\t%s\t\n",
				width, w.name, us(w.median), us(w.lo), us(w.hi), ratio, rate(1e9/w.median), w.allocs, w.bytes, w.clientCPU/1e3, srv)
		}
		tw.Flush()
		if line := r.perRound(li, "gosdk", "host"); line != "" {
			fmt.Fprintln(out, line)
		}
	}
}

// perRound compares two clients round by round, for an aim that must hold
// in every round: "gosdk / host, each round: 3.10 2.95 ... (lowest 2.95)".
// "" when either is missing.
func (r *results) perRound(li int, slow, fast string) string {
	a, b := r.samples[li][slow], r.samples[li][fast]
	if len(a) == 0 || len(a) != len(b) {
		return ""
	}
	var parts []string
	lowest := 0.0
	for i := range a {
		x := a[i].wall / b[i].wall
		if i == 0 || x < lowest {
			lowest = x
		}
		parts = append(parts, fmt.Sprintf("%.2f", x))
	}
	return fmt.Sprintf("  %s / %s, each round: %s (lowest %.2f)", slow, fast, strings.Join(parts, " "), lowest)
}

// us formats ns as µs to three significant figures or so.
func us(ns float64) string {
	v := ns / 1e3
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// rate formats calls a second.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
