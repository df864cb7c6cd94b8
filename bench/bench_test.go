package main

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/testbin"
)

// TestTinyRound runs one small round of every client, at 1 and at 4 in
// flight, as the command does: each client checks that every answer
// carries the canned text. It then checks the report names every client,
// and that every server process is gone.
func TestTinyRound(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the echo server and starts five processes")
	}
	for _, mcpl := range []bool{true, false} {
		name := "plain MCP"
		if mcpl {
			name = "MCPL"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			opts, err := parseFlags([]string{"-rounds", "1", "-calls", "50", "-inflight", "1,4", "-mcpl=" + boolString(mcpl)})
			if err != nil {
				t.Fatal(err)
			}
			opts.server = echoServer.Path(t)
			var out strings.Builder
			res, err := runBench(ctx, opts, &out, t.Output())
			if err != nil {
				t.Fatal(err)
			}
			for li, k := range opts.inflight {
				for _, c := range clientNames {
					if n := len(res.samples[li][c]); n != 1 {
						t.Errorf("%s at %d in flight: %d samples, want 1", c, k, n)
					}
				}
			}
			report := out.String()
			for _, want := range []string{"1 call in flight", "4 calls in flight", "machine:", "gosdk / host, each round: "} {
				if !strings.Contains(report, want) {
					t.Errorf("the report lacks %q:\n%s", want, report)
				}
			}
			// A row for each client at each level (the header names them
			// all too, so a name alone would not do).
			for _, c := range clientNames {
				row := regexp.MustCompile(`(?m)^  ` + c + ` +[0-9]`)
				if n := len(row.FindAllString(report, -1)); n != len(opts.inflight) {
					t.Errorf("the report has %d rows for %s, want %d:\n%s", n, c, len(opts.inflight), report)
				}
			}
			for c, pid := range res.pids {
				if pid <= 0 {
					t.Errorf("%s: no server pid", c)
					continue
				}
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("%s: server process %d is still there after the run (kill 0: %v)", c, pid, err)
				}
			}
			t.Logf("report:\n%s", report)
		})
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// echoServer is the echo server, built once for the package's tests.
var echoServer = &testbin.Program{Dir: ".", Pkg: "./echoserver", Name: "echoserver"}

func TestMain(m *testing.M) {
	code := m.Run()
	echoServer.Cleanup()
	os.Exit(code)
}

// TestParseFlags checks the flags' forms and refusals.
func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-calls", "7", "-inflight", "1,2,3", "-clients", "raw,host,raw"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.calls, []int{7, 7, 7}) || !slices.Equal(o.clients, []string{"raw", "host"}) {
		t.Errorf("calls %v clients %v", o.calls, o.clients)
	}
	if o, err := parseFlags([]string{"-inflight", "1,8"}); err != nil || !slices.Equal(o.calls, []int{10000, 40000}) || o.parts != 10 {
		t.Errorf("the default calls for 1 and 8 in flight: %v, %v parts (%v)", o.calls, o.parts, err)
	}
	for _, bad := range [][]string{
		{"-parts", "0"},
		{"-calls", "1,2,3"},
		{"-inflight", "0"},
		{"-clients", "raw,nope"},
		{"-rounds", "0"},
		{"extra"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// TestMedian checks the summary's median, odd and even.
func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median 3,1,2 = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median 4,1,3,2 = %v", m)
	}
}
