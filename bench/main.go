// Command bench measures a tools/call round trip to an MCP server over
// stdio, through each of several clients, against the floor of the same
// round: a raw line written to the server and read back.
//
// Every client has its own echo server process (bench/echoserver), which
// answers a tools/call with a canned result built around the request's id,
// so the far end costs as little as it can. The clients:
//
//   - raw: the floor. A line the size of a tools/call request written to
//     the server's stdin and read back from its stdout, no JSON at all.
//   - wire: internal/wire's Peer.Call over transport.Spawn.
//   - session: internal/session's Session.Call (the handshake, with MCPL's
//     policy exchange, then calls).
//   - host: host.Host.CallTool, the path every caller of a server's tool
//     takes, with the server configured as in a host's file.
//   - gosdk: the official Go SDK's client (ClientSession.CallTool over its
//     CommandTransport).
//
// A round runs every client in turn, at each in-flight level, each with a
// warm-up then the measured calls; the order of the clients rotates from
// round to round. It prints, for each in-flight level, each client's
// median time a call over the rounds, its range, and the median of its
// per-round ratios to the floor. README.md says how to read it.
//
// Run it from this directory: go run . -rounds 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	rounds     int
	calls      []int // a measurement's calls, for each in-flight level
	inflight   []int
	parts      int // a measurement is timed in this many parts
	clients    []string
	server     string // a prebuilt echoserver; "" builds one
	mcpl       bool
	timeout    time.Duration
	cpuprofile string
	memprofile string
	verbose    bool
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	var progress io.Writer = io.Discard
	if opts.verbose {
		progress = os.Stderr
	}
	if _, err := runBench(ctx, opts, os.Stdout, progress); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	var calls, inflight, clients string
	fs.IntVar(&o.rounds, "rounds", 5, "rounds; each runs every client at every in-flight level")
	fs.StringVar(&calls, "calls", "", "calls a measurement, one count for every in-flight level or one for all (default 10000 at 1 in flight, 40000 with more)")
	fs.IntVar(&o.parts, "parts", 10, "time each measurement in this many parts and take the median part's time a call (1: the mean of the whole)")
	fs.StringVar(&inflight, "inflight", "1,64", "the in-flight levels: calls outstanding at once")
	fs.StringVar(&clients, "clients", strings.Join(clientNames, ","), "the clients to run (raw is the floor the ratios need)")
	fs.StringVar(&o.server, "server", "", "a prebuilt echoserver binary (default: build ./echoserver into a temporary directory)")
	fs.BoolVar(&o.mcpl, "mcpl", true, "the echo server advertises MCPL, so the host and session run the policy exchange as in real use")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "bound on the whole run")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (the clients' side) over the measured calls")
	fs.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile of this process (every allocation sampled) over the measured calls")
	fs.BoolVar(&o.verbose, "v", false, "print each measurement to stderr as it is made")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.inflight, err = positiveInts(inflight); err != nil {
		return o, fmt.Errorf("-inflight: %w", err)
	}
	if calls == "" {
		for _, k := range o.inflight {
			n := 40000
			if k == 1 {
				n = 10000
			}
			o.calls = append(o.calls, n)
		}
	} else if o.calls, err = positiveInts(calls); err != nil {
		return o, fmt.Errorf("-calls: %w", err)
	}
	switch len(o.calls) {
	case len(o.inflight):
	case 1:
		o.calls = slices.Repeat(o.calls, len(o.inflight))
	default:
		return o, fmt.Errorf("-calls gives %d counts for %d in-flight levels", len(o.calls), len(o.inflight))
	}
	for _, c := range strings.Split(clients, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(clientNames, c) {
			return o, fmt.Errorf("-clients: no client %q (the clients: %s)", c, strings.Join(clientNames, ","))
		}
		if !slices.Contains(o.clients, c) {
			o.clients = append(o.clients, c)
		}
	}
	if o.rounds < 1 {
		return o, errors.New("-rounds must be at least 1")
	}
	if o.parts < 1 {
		return o, errors.New("-parts must be at least 1")
	}
	return o, nil
}

func positiveInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// measureTimeout bounds one measurement, its warm-up included.
const measureTimeout = 5 * time.Minute

// runBench runs the rounds and writes the report to out, each measurement
// to progress as it is made. It returns the results, and the pids of the
// servers, which are all gone when it returns.
func runBench(ctx context.Context, o options, out, progress io.Writer) (*results, error) {
	tmp, err := os.MkdirTemp("", "mcplbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := o.server
	if bin == "" {
		if bin, err = buildServer(ctx, tmp); err != nil {
			return nil, err
		}
	}
	srv := server{bin: bin, mcpl: o.mcpl, pidDir: tmp}
	load0 := loadAverage()

	clients := map[string]client{}
	defer func() {
		for _, name := range o.clients {
			if c := clients[name]; c != nil {
				c.Close()
			}
		}
	}()
	res := newResults(o)
	for _, name := range o.clients {
		c, err := startClient(ctx, name, srv)
		if err != nil {
			return nil, err
		}
		clients[name] = c
		res.pids[name] = c.ServerPID()
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	if o.memprofile != "" {
		runtime.MemProfileRate = 1
	}
	for r := range o.rounds {
		order := slices.Concat(o.clients[r%len(o.clients):], o.clients[:r%len(o.clients)])
		for li, k := range o.inflight {
			for _, name := range order {
				s, err := measure(ctx, clients[name], o.calls[li], k, o.parts)
				if err != nil {
					return nil, fmt.Errorf("round %d, %s, %d in flight: %w", r+1, name, k, err)
				}
				res.samples[li][name] = append(res.samples[li][name], s)
				fmt.Fprintf(progress, "round %d/%d  %3d in flight  %-8s %8.2f µs/call\n", r+1, o.rounds, k, name, s.wall/1e3)
			}
		}
	}
	pprof.StopCPUProfile()
	if o.memprofile != "" {
		if err := writeHeapProfile(o.memprofile); err != nil {
			return nil, err
		}
	}

	for _, name := range o.clients {
		if err := clients[name].Close(); err != nil {
			fmt.Fprintf(progress, "%s: close: %v\n", name, err)
		}
		delete(clients, name)
	}
	res.write(out, o, load0, loadAverage())
	return res, nil
}

// buildServer builds the echo server into dir, from the module this
// command is run in.
func buildServer(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "echoserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/mcpl-go/mcpl/bench/echoserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the echo server (run from bench/, or give -server): %v\n%s", err, out)
	}
	return bin, nil
}

// sample is one measurement of one client: its costs a call.
type sample struct {
	wall      float64 // ns a call: the median part's
	allocs    float64 // heap allocations a call in this process
	bytes     float64 // bytes of them a call
	clientCPU float64 // ns of this process's CPU a call
	serverCPU float64 // ns of the server process's CPU a call; -1 unknown
}

// measure runs a warm-up of a tenth of n, then n calls with k in flight,
// in parts, and returns what they cost. The time a call is the median
// part's: this machine's wake-ups now and then slow a stretch of calls
// several times over (VM scheduling), and a mean over the whole would
// carry those stretches into the ratios. The other costs are totals over
// all the parts.
func measure(ctx context.Context, c client, n, k, parts int) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, measureTimeout)
	defer cancel()
	if err := c.Run(ctx, warmup(n, k), k); err != nil {
		return sample{}, fmt.Errorf("warm-up: %w", err)
	}
	parts = max(1, min(parts, n/k))
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	srv0, srvOK := procCPU(c.ServerPID())
	cpu0 := selfCPU()
	perPart := make([]float64, parts)
	for i := range parts {
		m := n / parts
		if i < n%parts {
			m++
		}
		t0 := time.Now()
		if err := c.Run(ctx, m, k); err != nil {
			return sample{}, err
		}
		perPart[i] = float64(time.Since(t0)) / float64(m)
	}
	cpu1 := selfCPU()
	srv1, srvOK1 := procCPU(c.ServerPID())
	runtime.ReadMemStats(&m1)
	per := func(d time.Duration) float64 { return float64(d) / float64(n) }
	s := sample{
		wall:      median(perPart),
		allocs:    float64(m1.Mallocs-m0.Mallocs) / float64(n),
		bytes:     float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n),
		clientCPU: per(cpu1 - cpu0),
		serverCPU: -1,
	}
	if srvOK && srvOK1 {
		s.serverCPU = per(srv1 - srv0)
	}
	return s, nil
}

// warmup is how many calls warm a measurement of n calls, k in flight,
// up: a tenth of them, and at least one for each in flight.
func warmup(n, k int) int { return max(n/10, k) }

// selfCPU is this process's CPU time, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, which is 100
// on every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// procCPU is a process's CPU time (user and system, all its threads), from
// /proc/PID/stat: Linux only, to the clock tick.
func procCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: the fields that
	// follow it are counted from its closing parenthesis. utime and stime
	// are fields 14 and 15; state, field 3, is the first after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// loadAverage is the system's load averages over 1, 5 and 15 minutes, or
// "" where /proc/loadavg is not there.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// writeHeapProfile writes the allocations sampled so far to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
