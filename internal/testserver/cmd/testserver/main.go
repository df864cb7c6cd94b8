// Command testserver runs the scriptable test server (package testserver) on
// stdio, or on WebSocket with -listen, printing its ws:// URL as the first
// line of stdout.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
)

type lines []string

func (l *lines) String() string     { return fmt.Sprint(*l) }
func (l *lines) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var (
		cfg           testserver.Config
		mcpl          string
		banner        lines
		listen        string
		rawEcho       bool
		ignoreStdin   bool
		ignoreSigterm bool
	)
	flag.StringVar(&cfg.Name, "name", "testserver", "serverInfo name")
	nameFromEnv := flag.String("name-from-env", "", "use this environment variable's value (or \"unset\") as the serverInfo name")
	flag.StringVar(&mcpl, "mcpl", "", "raw experimental.mcpl advertisement (JSON)")
	flag.IntVar(&cfg.CrashAfter, "crash-after", 0, "exit with status 3 on the Nth request")
	flag.Var(&banner, "banner", "a raw line to print before anything else (repeatable)")
	flag.IntVar(&cfg.PageSize, "page-size", 0, "page tools/list by this many")
	var early lines
	flag.StringVar(&cfg.Policy, "policy", "accept", "how to answer featureSets/update: accept, degrade, refuse, refuse-close, method-not-found, error, ignore")
	flag.Var(&early, "early", "a method to send the host right after initialized, before policy (repeatable)")
	flag.StringVar(&cfg.HoldInitialize, "hold-initialize", "", "a FIFO to open before answering initialize (held until a test opens it for writing)")
	flag.BoolVar(&cfg.NoServerInfo, "no-server-info", false, "omit serverInfo and protocolVersion")
	flag.BoolVar(&cfg.NoTools, "no-tools", false, "advertise no tools and know no tools methods")
	flag.StringVar(&cfg.Modern, "modern", "", "serve MCP 2026-07-28: only, or dual (2025-11-25 through initialize too)")
	flag.BoolVar(&cfg.ListenFailFirst, "listen-fail-first", false, "refuse the first subscriptions/listen (with -modern)")
	flag.StringVar(&cfg.ProtocolVersion, "protocol-version", "", "the protocol version answered to initialize (echo: the one asked)")
	flag.BoolVar(&cfg.UndeclaredTools, "undeclared-tools", false, "serve the tools but advertise no tools capability")
	var exitOn, ignore lines
	flag.Var(&exitOn, "exit-on", "METHOD=CODE: exit with CODE when METHOD arrives (repeatable)")
	flag.Var(&ignore, "ignore", "a method never to answer (repeatable)")
	flag.BoolVar(&cfg.IgnoreUnknown, "ignore-unknown", false, "never answer a method it does not know, rather than method-not-found")
	flag.BoolVar(&cfg.Pretty, "pretty", false, "write each message indented over several lines (for -listen)")
	flag.StringVar(&listen, "listen", "", "serve WebSocket on this address (127.0.0.1:0) instead of stdio")
	flag.BoolVar(&rawEcho, "raw-echo", false, "copy each stdin line to stdout unchanged (benchmark floor)")
	canned := flag.Bool("canned", false, "answer every request with the same result, parsing nothing (benchmarks)")
	flag.BoolVar(&ignoreStdin, "ignore-stdin-close", false, "keep running after stdin closes")
	flag.BoolVar(&ignoreSigterm, "ignore-sigterm", false, "ignore SIGTERM")
	flag.Parse()
	cfg.Banner = banner
	cfg.Early = early
	cfg.Ignore = ignore
	for _, e := range exitOn {
		method, code, ok := strings.Cut(e, "=")
		n, err := strconv.Atoi(code)
		if !ok || err != nil {
			fmt.Fprintln(os.Stderr, "testserver: -exit-on wants METHOD=CODE")
			os.Exit(2)
		}
		if cfg.ExitOn == nil {
			cfg.ExitOn = map[string]int{}
		}
		cfg.ExitOn[method] = n
	}
	if *nameFromEnv != "" {
		cfg.Name = "unset"
		if v, ok := os.LookupEnv(*nameFromEnv); ok {
			cfg.Name = v
		}
	}
	if mcpl != "" {
		if !json.Valid([]byte(mcpl)) {
			fmt.Fprintln(os.Stderr, "testserver: -mcpl is not JSON")
			os.Exit(2)
		}
		cfg.MCPL = json.RawMessage(mcpl)
	}
	if ignoreSigterm {
		signal.Ignore(syscall.SIGTERM)
	}
	switch {
	case rawEcho:
		testserver.RawEcho(os.Stdin, os.Stdout)
	case *canned:
		testserver.CannedAnswers(os.Stdin, os.Stdout)
	case listen != "":
		serveWebSocket(listen, cfg)
	default:
		testserver.Serve(transport.NewLineStream(os.Stdin, os.Stdout, nil, 0), cfg)
	}
	if ignoreStdin {
		select {}
	}
}

func serveWebSocket(addr string, cfg testserver.Config) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
	fmt.Printf("ws://%s/\n", ln.Addr())
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := transport.AcceptWebSocket(w, r, transport.WebSocketOptions{PingInterval: -1})
		if err != nil {
			return
		}
		testserver.Serve(ws, cfg)
	}))
}
