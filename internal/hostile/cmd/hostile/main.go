// Command hostile runs the hostile MCPL server (package hostile, whose doc
// lists every flag) on stdio, or on WebSocket with -ws, printing its
// ws://127.0.0.1:PORT/mcpl URL as the first line of stdout.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mcpl-go/mcpl/internal/hostile"
)

func main() {
	var cfg hostile.Config
	var mcpl, experimental, receipt, record, grandchild, pidfile string
	var ws, ignoreEOF, ignoreTerm, leaveGroup, stubbornGrandchild, sleeper bool
	var wsOpts hostile.WSOptions

	flag.StringVar(&cfg.Name, "name", "hostile", "serverInfo name")
	flag.StringVar(&cfg.Version, "version", "0.0.1", "serverInfo version")
	flag.StringVar(&mcpl, "mcpl", "", "raw capabilities.experimental.mcpl (JSON)")
	flag.StringVar(&experimental, "experimental", "", "raw capabilities.experimental (JSON; wins over -mcpl)")
	flag.StringVar(&receipt, "receipt", "", `raw featureSets/update result (JSON; default {"accepted":true})`)
	flag.Func("tool", "NAME=DESCRIPTION: a tool for tools/list (repeatable; default echo)", func(s string) error {
		name, desc, _ := strings.Cut(s, "=")
		cfg.Tools = append(cfg.Tools, hostile.Tool{Name: name, Description: desc})
		return nil
	})
	flag.BoolVar(&cfg.Evil, "evil", false, "terminal escapes and forged lines in every string it controls")
	flag.Func("fail-call", "answer tools/call with a JSON-RPC error carrying this message", func(s string) error {
		cfg.FailCall = &s
		return nil
	})

	flag.Func("never-answer", "take requests of this method in and never answer them (repeatable)", func(s string) error {
		cfg.NeverAnswer = append(cfg.NeverAnswer, s)
		return nil
	})

	flag.StringVar(&cfg.At, "at", "start", "when the misbehaviours fire: start, initialize, policy, tools/call, or a method")
	flag.StringVar(&cfg.Flood, "flood", "", "send -count messages of this method, padded by -size")
	flag.IntVar(&cfg.Count, "count", 0, "-flood messages (default 1); -stop-reading pings (default 100000)")
	flag.IntVar(&cfg.Size, "size", 0, "bytes of the -flood pad")
	flag.BoolVar(&cfg.Notify, "notify", false, "-flood sends notifications")
	flag.IntVar(&cfg.FramePad, "ws-frame-pad", 0, "spaces after each -flood message in its frame (line)")
	flag.IntVar(&cfg.Events, "events", 0, "send this many push/event requests")
	flag.IntVar(&cfg.EventIDSize, "event-id-size", 0, "bytes of each eventId (0: evt-N)")
	flag.StringVar(&cfg.FeatureSet, "feature-set", "events", "the events' featureSet")
	flag.BoolVar(&cfg.BadMethod, "bad-method", false, `send requests whose method is "" and 42`)
	flag.IntVar(&cfg.Oversize, "oversize", 0, "send one line of this many bytes")
	flag.IntVar(&cfg.Garbage, "garbage", 0, "send at least this many bytes of lines that are not JSON-RPC messages")
	flag.IntVar(&cfg.WSSplit, "ws-split", 0, "send one frame holding this many notification lines")
	flag.BoolVar(&cfg.StopReading, "stop-reading", false, "stop reading, and send pings, at the moment")

	flag.StringVar(&record, "record", "", "append every message received to this file")
	flag.StringVar(&grandchild, "grandchild", "", "start a sleeping grandchild: background or stdout")
	flag.StringVar(&pidfile, "pidfile", "", `write {"pid","pgid","grandchild"} here at start`)
	flag.StringVar(&cfg.ExitAfter, "exit-after", "", "exit 0 right after answering this method")
	flag.BoolVar(&ignoreEOF, "ignore-eof", false, "keep running after stdin ends")
	flag.BoolVar(&ignoreTerm, "ignore-term", false, "ignore SIGTERM")
	flag.BoolVar(&stubbornGrandchild, "stubborn-grandchild", false, "the -grandchild ignores SIGTERM too")
	flag.BoolVar(&leaveGroup, "leave-group", false, "after the grandchild starts, move into the parent's process group")
	flag.BoolVar(&sleeper, "sleeper", false, "(internal) sleep until killed: the -grandchild")

	flag.BoolVar(&ws, "ws", false, "serve WebSocket on 127.0.0.1:0, printing the URL")
	flag.BoolVar(&wsOpts.NoUpgrade, "ws-no-upgrade", false, "accept connections and never answer")
	flag.StringVar(&wsOpts.Redirect, "ws-redirect", "", "answer the upgrade with 302 to this URL")
	flag.BoolVar(&cfg.WSBinary, "ws-binary", false, "send a binary frame after answering initialize")
	flag.Parse()

	if sleeper {
		if ignoreTerm {
			signal.Ignore(syscall.SIGTERM)
		}
		hostile.SleepForever()
	}
	for _, raw := range []struct {
		flag string
		s    string
		dst  *json.RawMessage
	}{{"mcpl", mcpl, &cfg.MCPL}, {"experimental", experimental, &cfg.Experimental}, {"receipt", receipt, &cfg.Receipt}} {
		if raw.s == "" {
			continue
		}
		if !json.Valid([]byte(raw.s)) {
			fail(2, "-%s is not JSON: %s", raw.flag, raw.s)
		}
		*raw.dst = json.RawMessage(raw.s)
	}
	if record != "" {
		r, err := hostile.OpenRecorder(record)
		if err != nil {
			fail(1, "%v", err)
		}
		cfg.Record = r
	}

	pids := hostile.Pids{Pid: os.Getpid(), Pgid: syscall.Getpgrp()}
	if grandchild != "" {
		pids.Grandchild = startGrandchild(grandchild, stubbornGrandchild)
	}
	if leaveGroup {
		// The grandchild stays behind in the group the host made.
		ppg, err := syscall.Getpgid(os.Getppid())
		if err != nil || syscall.Setpgid(0, ppg) != nil {
			fail(1, "-leave-group: cannot join the parent's process group")
		}
	}
	if pidfile != "" {
		if err := hostile.WritePids(pidfile, pids); err != nil {
			fail(1, "%v", err)
		}
	}
	// After the grandchild has started: it keeps the default dispositions.
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	signal.Ignore(syscall.SIGPIPE) // a write to a closed stdout fails, not kills

	if ws {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(1, "%v", err)
		}
		fmt.Printf("ws://%s/mcpl\n", ln.Addr())
		err = hostile.ServeWS(ln, &cfg, wsOpts)
		fail(1, "serving: %v", err)
	}
	hostile.Serve(hostile.NewStdio(os.Stdin, os.Stdout), &cfg)
	if ignoreEOF {
		hostile.SleepForever()
	}
}

// startGrandchild re-executes this program as a sleeper in this process
// group and returns its pid.
func startGrandchild(mode string, stubborn bool) int {
	self, err := os.Executable()
	if err != nil {
		fail(1, "%v", err)
	}
	cmd := exec.Command(self, "-sleeper")
	if stubborn {
		cmd.Args = append(cmd.Args, "-ignore-term")
	}
	switch mode {
	case "background":
	case "stdout":
		cmd.Stdout = os.Stdout
	default:
		fail(2, "-grandchild wants background or stdout, not %q", mode)
	}
	if err := cmd.Start(); err != nil {
		fail(1, "starting the grandchild: %v", err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() // reap it, should it die while this process lives
	return pid
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hostile: "+format+"\n", args...)
	os.Exit(code)
}
