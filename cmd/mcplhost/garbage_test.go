package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/hostile"
)

// garbageBytes is what the server writes that is not JSON-RPC: 2 MiB.
const garbageBytes = 2 << 20

// A server that writes 2 MiB of lines that are not JSON-RPC messages on
// its stdout, before its first answer or between a call and its answer,
// is still spoken to (the call's answer arrives), and the operator's log
// says so exactly once, at WARN: naming the server, the line's size, and
// an escaped preview of the first line, nothing of it raw. With -v the
// next lines are logged at debug, boundedly, and the connection's end
// adds one line with the total of lines and bytes: never one line per
// garbage line.
func TestStdoutGarbageWarnsOnce(t *testing.T) {
	t.Parallel()
	warn := regexp.MustCompile(`(?m)^.*level=WARN.*$`)
	first := `line="panic: \\x1b[2Jgarbage \\u202eevil\\u200b on stdout" bytes=` + strconv.Itoa(len(hostile.GarbageFirst))
	lines := len(hostile.GarbageLines(garbageBytes))
	total := 0
	for _, l := range hostile.GarbageLines(garbageBytes) {
		total += len(l)
	}
	check := func(verbose bool) func(t *testing.T, dir string, r hostRun) {
		return func(t *testing.T, dir string, r hostRun) {
			w := warn.FindAllString(r.stderr, -1)
			if len(w) != 1 || !strings.Contains(w[0], `msg="skipped a line that is not a JSON-RPC message"`) ||
				!strings.Contains(w[0], "server=srv") || !strings.Contains(w[0], first) {
				t.Errorf("want exactly one WARN line naming srv, with %s; got %q", first, w)
			}
			if c := controlRune(r.stderr); c >= 0 {
				t.Errorf("stderr carries %U raw", c)
			}
			if strings.Contains(r.stderr, "\u200b") {
				t.Error("stderr carries U+200B raw")
			}
			n := strings.Count(r.stderr, "\n")
			sum := `msg="lines skipped as not JSON-RPC messages" server=srv count=` + strconv.Itoa(lines) + " bytes=" + strconv.Itoa(total)
			if !verbose {
				if n != 1 {
					t.Errorf("stderr has %d lines, want the one warning", n)
				}
				return
			}
			if !strings.Contains(r.stderr, sum) {
				t.Errorf("stderr at -v lacks the connection's total, %s", sum)
			}
			if got := strings.Count(r.stderr, "skipped a line that is not a JSON-RPC message"); got != 20 {
				t.Errorf("%d garbage lines logged one by one at -v, want the first 20", got)
			}
			if n > 200 {
				t.Errorf("stderr at -v has %d lines for %d garbage lines, want it bounded", n, lines)
			}
		}
	}
	echo := []string{"srv--echo", `{"text":"still here"}`}
	runFaultCases(t, []faultCase{
		{
			name: "garbage/before", transports: bothTransports, cmd: "call",
			server: []string{"-garbage", strconv.Itoa(garbageBytes), "-at", "initialize"}, args: echo,
			code: exitOK, within: 30 * time.Second, stdout: []string{"still here"},
			inProcess: true, check: check(false),
		},
		{
			name: "garbage/between", transports: []string{"stdio"}, cmd: "call",
			server: []string{"-garbage", strconv.Itoa(garbageBytes), "-at", "tools/call"}, args: echo,
			code: exitOK, within: 30 * time.Second, stdout: []string{"still here"},
			check: check(false),
		},
		{
			name: "garbage/verbose", transports: []string{"stdio"}, cmd: "call",
			server: []string{"-garbage", strconv.Itoa(garbageBytes), "-at", "tools/call"}, args: append([]string{"-v"}, echo...),
			code: exitOK, within: 30 * time.Second, stdout: []string{"still here"},
			check: check(true),
		},
	})
}
