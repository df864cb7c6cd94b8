package main

// The fault suite: mcplhost against the hostile server (internal/hostile)
// over stdio and WebSocket. Each case states a bound in time and in memory
// (the peak RSS of mcplhost built without -race, run as a subprocess), the
// exit status and the text the operator or agent reads; over stdio, that
// nothing of the server's process group is alive once mcplhost has
// returned. Cases that also run in this process are covered by TestMain's
// goroutine-leak check. The acceptance items are named in each test's doc:
// A (a server that stops reading), B (memory), C (no process left, signals),
// D (escapes), E (the fault table).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Texts the cases expect, as host/texts_request.go words them for the
// server "srv".
var (
	tooLargeCallText   = `error: This host closed its connection to the "srv" server because the server sent a message over the size limit, before it answered, so whether the request took effect is unknown. Check its effect before trying again. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.` + "\n"
	deadlineCallText   = `error: The "srv" server didn't answer within 2 seconds, so whether the request took effect is unknown: it was abandoned here, and the server was asked to cancel it, but it may still complete on the server. Check its effect before trying again, since repeating something that changes state may do it twice.` + "\n"
	notWrittenCallText = `error: The request wasn't sent: this host couldn't write it to the "srv" server within 2 seconds, so nothing ran. Try again later.` + "\n"
	// A server that stops reading right after initialize floods pings,
	// and what the call reads depends on how far this host's writes got
	// before the pipe filled: the call waits behind them and is not
	// written within its 2 s (notWrittenCallText), or it was written and
	// goes unanswered (deadlineCallText); or the pipe filled before this
	// host's notifications/initialized was written, the connect waits on
	// that write (10 s, wire.DefaultWriteTimeout), and the call reads that
	// the server is connecting, or, once the stalled write has closed the
	// connection, that it is not connected or stopped reading.
	connectingCallText    = `error: This host is connecting to the "srv" server that provides srv--echo, so the call didn't run. Try again in a moment.` + "\n"
	notConnectedCallText  = `error: The "srv" server that provides srv--echo isn't connected, and this host won't reconnect to it on its own, so the call didn't run. If you need it, ask whoever runs this host.` + "\n"
	notSentClosedCallText = `error: The request wasn't sent: the connection to the "srv" server is closed, so nothing ran. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.` + "\n"
	stalledCallText       = `error: The request wasn't sent: the "srv" server stopped reading what this host sends (it took nothing for 10 seconds), so this host closed its connection to it and nothing ran. This host won't reconnect to it on its own. If you need it, ask whoever runs this host.` + "\n"
)

// TestFaultTable is acceptance E over both transports: each row's exit
// status, time bound, key text and peak RSS, and no process left.
func TestFaultTable(t *testing.T) {
	t.Parallel()
	runFaultCases(t, []faultCase{
		{
			// E: a message over the 16 MiB limit closes the connection
			// here, and the pending call reads why.
			name: "oversize/probe", transports: bothTransports, cmd: "probe",
			server: []string{"-oversize", "20000000", "-at", "tools/call"},
			args:   []string{"--call", "echo", `{"text":"x"}`},
			code:   exitFail, within: 10 * time.Second, inProcess: true,
			stdout: []string{`call echo: tools/call to "srv": no answer: this side closed the connection because the peer sent a message over the size limit` + "\n"},
			stderr: []string{"message over the size limit; closing the connection"},
		},
		{
			name: "oversize/call", transports: bothTransports, cmd: "call",
			server: []string{"-oversize", "20000000", "-at", "tools/call"},
			code:   exitFail, within: 10 * time.Second, inProcess: true,
			check: wantStdout(tooLargeCallText),
		},
		{
			// E: requests whose method is "" or 42 are answered -32600.
			// The answers go out through a writer of their own, and what
			// it has not written when the connection closes is not sent:
			// --wait keeps the connection open a second longer.
			name: "bad method/probe", transports: bothTransports, cmd: "probe",
			server: []string{"-bad-method", "-record", "$DIR/record", "-at", "initialize"},
			args:   []string{"--wait", "1s"},
			code:   exitOK, within: 10 * time.Second, inProcess: true,
			stdout: []string{"tools (1):\n"},
			check:  wantInvalidRequestAnswers,
		},
		{
			name: "bad method/call", transports: bothTransports, cmd: "call",
			server: []string{"-bad-method", "-record", "$DIR/record", "-at", "initialize"},
			code:   exitOK, within: 10 * time.Second, inProcess: true,
			// call closes right after its call: the refusals may not all
			// have been written by then (see the probe row), so here the
			// log says they were refused, and what was written is -32600.
			stderr: []string{`msg="request without a valid method refused (-32600)" server=srv id="\"bad1\""`},
			check: func(t *testing.T, dir string, r hostRun) {
				wantStdout("ok\nfault\n")(t, dir, r)
				wantNoOtherAnswer(t, dir, "bad", -32600)
			},
		},
		{
			// E: capabilities.experimental that is not an object: a plain
			// MCP server whose tools work.
			name: "experimental not an object/probe", transports: bothTransports, cmd: "probe",
			server: []string{"-experimental", `"x"`},
			args:   []string{"--call", "echo", `{"text":"plain"}`},
			code:   exitOK, within: 10 * time.Second, inProcess: true,
			stdout: []string{"mcpl: none (a plain MCP server)\n", "call echo: ok\nplain\n"},
			stderr: []string{"treated as a plain MCP server"},
		},
		{
			name: "experimental not an object/call", transports: bothTransports, cmd: "call",
			server: []string{"-experimental", `"x"`},
			code:   exitOK, within: 10 * time.Second, inProcess: true,
			check: wantStdout("ok\nfault\n"),
		},
		{
			// E: a million notifications at once: dropped and counted,
			// not logged one a line, and the report completes.
			name: "notification flood/probe", transports: bothTransports, cmd: "probe",
			server: []string{"-flood", "notifications/x", "-count", "1000000", "-size", "0", "-notify"},
			args:   []string{"--call", "echo", `{"text":"through"}`},
			code:   exitOK, within: 20 * time.Second, inProcess: true,
			stdout: []string{"tools (1):\n", "call echo: ok\nthrough\n"},
			check:  fewDropLines,
		},
		{
			name: "notification flood/call", transports: bothTransports, cmd: "call",
			server: []string{"-flood", "notifications/x", "-count", "1000000", "-size", "0", "-notify"},
			code:   exitOK, within: 20 * time.Second, inProcess: true,
			check: func(t *testing.T, dir string, r hostRun) {
				wantStdout("ok\nfault\n")(t, dir, r)
				fewDropLines(t, dir, r)
			},
		},
		{
			// E: one write (stdio) of a million notification lines before
			// the initialize answer: each line is a message; memory stays
			// bounded and the report completes. (Over WebSocket the same
			// frame is over the 16 MiB frame limit: fault_ws_test.go.)
			name: "split million lines/probe", transports: []string{"stdio"}, cmd: "probe",
			server: []string{"-ws-split", "1000000", "-at", "initialize"},
			args:   []string{"--call", "echo", `{"text":"after"}`},
			code:   exitOK, within: 20 * time.Second,
			stdout: []string{"tools (1):\n", "call echo: ok\nafter\n"},
			check:  fewDropLines,
		},
	})
}

// wantStdout checks that stdout is want exactly.
func wantStdout(want string) func(*testing.T, string, hostRun) {
	return func(t *testing.T, _ string, r hostRun) {
		t.Helper()
		if r.stdout != want {
			t.Errorf("stdout:\n%q\nwant:\n%q", r.stdout, want)
		}
	}
}

// wantStdoutOneOf checks that stdout is one of texts.
func wantStdoutOneOf(texts ...string) func(*testing.T, string, hostRun) {
	return func(t *testing.T, _ string, r hostRun) {
		t.Helper()
		for _, want := range texts {
			if r.stdout == want {
				return
			}
		}
		t.Errorf("stdout:\n%q\nwant one of:\n%q", r.stdout, texts)
	}
}

// wantInvalidRequestAnswers checks the record of what the server received
// for this host's -32600 answers to its requests "bad1" and "bad2".
func wantInvalidRequestAnswers(t *testing.T, dir string, _ hostRun) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "record"))
	if err != nil {
		t.Fatalf("the server's record: %v", err)
	}
	for _, id := range []string{"bad1", "bad2"} {
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			var m struct {
				ID    string `json:"id"`
				Error *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.ID == id && m.Error != nil && m.Error.Code == -32600 {
				found = true
			}
		}
		if !found {
			t.Errorf("the server received no -32600 answer for %q; it received:\n%s", id, clip(string(b)))
		}
	}
}

// wantNoOtherAnswer checks that the server received no answer to its
// requests whose id begins with prefix other than an error with code.
func wantNoOtherAnswer(t *testing.T, dir, prefix string, code int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "record"))
	if err != nil {
		t.Fatalf("the server's record: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var m struct {
			ID     string          `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m.ID, prefix) && (m.Error == nil || m.Error.Code != code) {
			t.Errorf("the server's request %s was answered %s, want an error %d", m.ID, line, code)
		}
	}
}

// fewDropLines checks that stderr has fewer than 20 lines about dropped
// or refused messages or the queue: a flood is counted, not logged a line
// each.
func fewDropLines(t *testing.T, _ string, r hostRun) {
	t.Helper()
	n := 0
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "dropped") || strings.Contains(l, "queue") || strings.Contains(l, "refused") {
			n++
		}
	}
	if n >= 20 {
		t.Errorf("stderr has %d lines about dropped messages or the queue, want fewer than 20", n)
	}
}

// TestFaultCallServerStopsReading is acceptance A: `mcplhost call` against
// a server that stops reading its stdin, with requestTimeout 2s, returns
// within 10 s (30 s when it stops at initialize) with the agent's text and
// exit 1, and leaves no process.
//
// hostile -stop-reading answers the message that is its moment before it
// stops (its package doc), so -at tools/call answers the call: that row
// checks the call succeeds and the host still ends in bounded time. The
// deadline text comes from a server that stops after tools/list: the call
// is written and never answered.
func TestFaultCallServerStopsReading(t *testing.T) {
	t.Parallel()
	runFaultCases(t, []faultCase{
		{
			// About 7 s over WebSocket: the 2 s deadline, then the close
			// handshake the server never reads; the bound leaves a loaded
			// CI machine room. The server floods pings as it stops
			// reading, and the host's refusals of them race the call for
			// the room left in the pipe: the call is written and
			// unanswered, or it waits its turn behind a refusal the
			// server doesn't take, past its deadline, and is not sent.
			// Either text is what happened.
			name: "after tools/list", transports: bothTransports, cmd: "call",
			server: []string{"-stop-reading", "-at", "tools/list", "-grandchild", "background"},
			config: []string{"requestTimeout: 2s"},
			code:   exitFail, within: 15 * time.Second, inProcess: true,
			check: wantStdoutOneOf(deadlineCallText, notWrittenCallText),
		},
		{
			name: "at tools/call, answered first", transports: []string{"stdio"}, cmd: "call",
			server: []string{"-stop-reading", "-at", "tools/call"},
			config: []string{"requestTimeout: 2s"},
			code:   exitOK, within: 10 * time.Second, inProcess: true,
			check: wantStdout("ok\nfault\n"),
		},
		{
			// It floods pings and reads nothing after initialize: any
			// of the texts above, within 30 s.
			// Not in this process: its connection stalls and closes after
			// wire.DefaultWriteTimeout (10 s) just as the log's count of
			// refused pings reaches lograte.Window (10 s), and the count's
			// line came after call had returned, racing with the reader
			// of its stderr, until lograte's Close waited for it
			// (internal/lograte TestCloseWaitsForSummary).
			name: "at initialize", transports: []string{"stdio"}, cmd: "call",
			server: []string{"-stop-reading", "-at", "initialize", "-grandchild", "background"},
			config: []string{"requestTimeout: 2s"},
			code:   exitFail, within: 30 * time.Second,
			check: wantStdoutOneOf(notWrittenCallText, deadlineCallText, connectingCallText, notConnectedCallText, stalledCallText),
		},
	})
}

// The advertisements the memory cases need: channels.register grantable
// (probe implements it), and push events of a declared feature set.
const (
	channelsMCPL = `{"version":"0.5","channels":true}`
	eventsMCPL   = `{"version":"0.5","pushEvents":true,"featureSets":{"events":{"description":"events","uses":["pushEvents"]}}}`
)

// TestFaultHeldMessagesPeakRSS is acceptance B: channel registrations of 4
// MB each (100, 400 MB in all: at most 8 fit the inbound budget, so the
// rest are refused whatever their number; 300, as it was first, took 28 s
// of the 30 s initialize deadline on a loaded 2-core machine under -race),
// and 300 push events with 1 MB eventIds, sent right after initialize (so
// before the policy exchange: held), keep the peak RSS of probe and of
// call under 300 MB; the report says what became of them.
func TestFaultHeldMessagesPeakRSS(t *testing.T) {
	t.Parallel()
	const registrations = 100
	flood := []string{"-mcpl", channelsMCPL, "-flood", "channels/register", "-count", fmt.Sprint(registrations), "-size", "4000000", "-at", "initialize"}
	events := []string{"-mcpl", eventsMCPL, "-events", "300", "-event-id-size", "1000000", "-at", "initialize"}
	// The initialize answer comes after all of it: 400 MB to read before
	// the connect settles, longer than call's default 10 s wait on a
	// loaded machine.
	call := []string{"--wait", "60s", "srv--echo", `{"text":"fault"}`}
	runFaultCases(t, []faultCase{
		{
			name: "registrations/probe", transports: []string{"stdio"}, cmd: "probe",
			server: flood, args: []string{"--json"},
			code: exitOK, within: 60 * time.Second, rssKiB: maxRSSKiB,
			check: func(t *testing.T, _ string, r hostRun) {
				rep := decodeReport(t, r.stdout)
				admitted := rep.count("channels/register", func(e probeEvent) bool {
					return e.Admitted && e.Request && e.ParamsOmitted > 4000000
				})
				// Held, they count against the 32 MiB inbound budget: at
				// most 8 of 4 MB fit; the rest are refused by the queue.
				if admitted < 1 || admitted > 9 || admitted != len(rep.Channels) {
					t.Errorf("%d registrations admitted and %d channels kept; want between 1 and 9, the same", admitted, len(rep.Channels))
				}
				if len(rep.EventsOmitted) != 0 {
					t.Errorf("eventsOmitted = %v, want none", rep.EventsOmitted)
				}
				if refused := refusedCount(r.stderr); admitted+refused != registrations {
					t.Errorf("%d admitted and %d refused by the queue (stderr), want %d in all", admitted, refused, registrations)
				}
			},
		},
		{
			name: "long event ids/probe", transports: []string{"stdio"}, cmd: "probe",
			server: events, args: []string{"--json"},
			code: exitOK, within: 60 * time.Second, rssKiB: maxRSSKiB,
			check: func(t *testing.T, _ string, r hostRun) {
				rep := decodeReport(t, r.stdout)
				const reason = "Invalid params: the eventId is 1000000 bytes; this host takes eventIds of at most 512 bytes"
				for _, e := range rep.Events {
					var answer struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					}
					json.Unmarshal(e.Answer, &answer)
					if e.Method != "push/event" || e.Admitted || e.Reason != reason || answer.Code != -32602 || answer.Message != reason {
						t.Errorf("event %s %v %q answered %s; want push/event rejected with -32602 %q", e.Method, e.Admitted, e.Reason, e.Answer, reason)
					}
				}
				seen := len(rep.Events) + rep.EventsOmitted["push/event"]
				if len(rep.Events) == 0 || seen+refusedCount(r.stderr) != 300 {
					t.Errorf("%d events in the report, %d refused by the queue (stderr), want some and 300 in all", seen, refusedCount(r.stderr))
				}
			},
		},
		{
			// The host serves channels.register: each registration that
			// fits the inbound byte budget is answered, the rest are
			// refused by the queue, and the call works. It does not
			// implement push events: each is rejected as it comes.
			name: "registrations/call", transports: []string{"stdio"}, cmd: "call",
			server: append(flood, "-record", "$DIR/record"), args: call, code: exitOK, within: 60 * time.Second, rssKiB: maxRSSKiB,
			check: func(t *testing.T, dir string, r hostRun) {
				wantStdout("ok\nfault\n")(t, dir, r)
				wantRegisteredWithinBudget(t, dir, "h")
			},
		},
		{
			name: "long event ids/call", transports: []string{"stdio"}, cmd: "call",
			server: append(events, "-record", "$DIR/record"), args: call, code: exitOK, within: 60 * time.Second, rssKiB: maxRSSKiB,
			check: func(t *testing.T, dir string, r hostRun) {
				wantStdout("ok\nfault\n")(t, dir, r)
				wantNotImplemented(t, dir, "e", `push/event rejected: capability \"pushEvents\" is not implemented by this host`)
			},
		},
	})
}

// wantNotImplemented checks the record of what the server received: the
// host answered its requests (ids prefix1, prefix2, ...) with errors, never
// a result, and those it took in with -32002 and message.
func wantNotImplemented(t *testing.T, dir, prefix, message string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "record"))
	if err != nil {
		t.Fatalf("the server's record: %v", err)
	}
	rejected := 0
	for _, line := range strings.Split(string(b), "\n") {
		var m struct {
			ID     string          `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || !strings.HasPrefix(m.ID, prefix) {
			continue
		}
		switch {
		case m.Result != nil:
			t.Errorf("the host answered %s with a result: %s", m.ID, m.Result)
		case m.Error != nil && m.Error.Code == -32002 && m.Error.Message == strings.ReplaceAll(message, `\"`, `"`):
			rejected++
		}
	}
	if rejected == 0 {
		t.Errorf("the host answered none of the server's requests with -32002 %q", message)
	}
	t.Logf("%d requests rejected with -32002", rejected)
}

// wantRegisteredWithinBudget checks the server's record of the host's
// answers to its flood of 4 MB registrations: at most 9 fit the 32 MiB
// inbound budget and are answered with every channel accepted; the others
// are refused as overload.
func wantRegisteredWithinBudget(t *testing.T, dir, prefix string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "record"))
	if err != nil {
		t.Fatalf("the server's record: %v", err)
	}
	answered, refused := 0, 0
	for _, line := range strings.Split(string(b), "\n") {
		var m struct {
			ID     string `json:"id"`
			Result *struct {
				Results []protocol.ChannelResult `json:"results"`
			} `json:"result"`
			Error *protocol.Error `json:"error"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || !strings.HasPrefix(m.ID, prefix) {
			continue
		}
		switch {
		case m.Result != nil && len(m.Result.Results) == 1 && m.Result.Results[0].Accepted:
			answered++
		case m.Error != nil && m.Error.Code == wire.CodeOverloaded:
			refused++
		default:
			t.Errorf("the host answered %s with %s", m.ID, line)
		}
	}
	if answered < 1 || answered > 9 || refused == 0 {
		t.Errorf("%d registrations answered and %d refused as overload; want 1 to 9 answered, the rest refused", answered, refused)
	}
}

// faultReport is the part of probe's JSON report the fault tests read.
type faultReport struct {
	Server        probeServer    `json:"server"`
	Channels      []probeChannel `json:"channels"`
	Events        []probeEvent   `json:"events"`
	EventsOmitted map[string]int `json:"eventsOmitted"`
	Ended         *probeEnd      `json:"ended"`
	Error         string         `json:"error"`
}

func decodeReport(t *testing.T, stdout string) faultReport {
	t.Helper()
	var rep faultReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON report: %v\n%s", err, clip(stdout))
	}
	return rep
}

// count counts the kept events of method that ok accepts.
func (rep faultReport) count(method string, ok func(probeEvent) bool) int {
	n := 0
	for _, e := range rep.Events {
		if e.Method == method && ok(e) {
			n++
		}
	}
	return n
}

var refusedRE = regexp.MustCompile(`refused ([0-9,]+) requests from server`)

// refusedCount is how many requests the log says the inbound queue
// refused: the first is logged alone, the rest counted.
func refusedCount(stderr string) int {
	n := strings.Count(stderr, `msg="inbound queue full; request refused"`)
	for _, m := range refusedRE.FindAllStringSubmatch(stderr, -1) {
		v, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		n += v
	}
	return n
}

// TestFaultNoProcessLeftAfterReturn is acceptance C (returns): whatever a
// server started in its process group, a grandchild holding nothing or
// one holding the server's stdout after the server has exited, is gone
// once probe or call has returned.
func TestFaultNoProcessLeftAfterReturn(t *testing.T) {
	t.Parallel()
	runFaultCases(t, []faultCase{
		{
			name: "grandchild in the background/probe", transports: []string{"stdio"}, cmd: "probe",
			server: []string{"-grandchild", "background"},
			code:   exitOK, within: 10 * time.Second, inProcess: true,
			stdout: []string{"tools (1):\n"},
			check:  wantGrandchild,
		},
		{
			name: "grandchild in the background/call", transports: []string{"stdio"}, cmd: "call",
			server: []string{"-grandchild", "background"},
			code:   exitOK, within: 10 * time.Second, inProcess: true,
			check: func(t *testing.T, dir string, r hostRun) {
				wantStdout("ok\nfault\n")(t, dir, r)
				wantGrandchild(t, dir, r)
			},
		},
		{
			// The server exits after initialize; its grandchild holds its
			// stdout open.
			name: "grandchild holding stdout/probe", transports: []string{"stdio"}, cmd: "probe",
			server: []string{"-grandchild", "stdout", "-exit-after", "initialize"},
			code:   exitFail, within: 10 * time.Second, inProcess: true,
			check: func(t *testing.T, dir string, r hostRun) {
				// On stdout, or on stderr when it ends the connect.
				if !strings.Contains(r.stdout+r.stderr, `the "srv" server exited with status 0 during`) {
					t.Errorf("neither stdout nor stderr says the server exited")
				}
				wantGrandchild(t, dir, r)
			},
		},
		{
			name: "grandchild holding stdout/call", transports: []string{"stdio"}, cmd: "call",
			server: []string{"-grandchild", "stdout", "-exit-after", "initialize"},
			code:   exitFail, within: 10 * time.Second, inProcess: true,
			stdout: []string{`error: `, `"srv" server`},
			check:  wantGrandchild,
		},
	})
}

// wantGrandchild checks that the server did start a grandchild (so that
// the run's no-process check means something).
func wantGrandchild(t *testing.T, dir string, _ hostRun) {
	t.Helper()
	p := readPids(t, filepath.Join(dir, "pids.json"))
	if p.Grandchild <= 0 {
		t.Errorf("the server started no grandchild: %+v", p)
	}
}

// TestFaultEvilStrings is acceptance D: a server whose every string
// carries terminal escapes, C1 controls, bidirectional overrides and
// forged lines. The text report carries none of them raw; the JSON report
// is valid JSON carrying none raw, with the server's name exactly as sent.
func TestFaultEvilStrings(t *testing.T) {
	t.Parallel()
	evil := []string{"-evil", "-mcpl", `{"version":"0.5","pushEvents":true,"channels":true,"featureSets":{"events":{"description":"e","uses":["pushEvents"]}}}`,
		"-events", "3", "-flood", "channels/register", "-count", "2", "-at", "initialize"}
	noControl := func(t *testing.T, _ string, r hostRun) {
		t.Helper()
		for _, out := range []struct{ name, s string }{{"stdout", r.stdout}, {"stderr", r.stderr}} {
			if c := controlRune(out.s); c >= 0 {
				t.Errorf("%s carries %U raw", out.name, c)
			}
			if !utf8.ValidString(out.s) {
				t.Errorf("%s is not valid UTF-8", out.name)
			}
		}
	}
	runFaultCases(t, []faultCase{
		{
			name: "text", transports: bothTransports, cmd: "probe",
			server: evil, args: []string{"--call", "echo", `{"text":"hi"}`},
			code: exitOK, within: 10 * time.Second, inProcess: true,
			stdout: []string{`call echo: ok`, `event push/event: admitted`, `event channels/register: admitted`},
			check: func(t *testing.T, dir string, r hostRun) {
				noControl(t, dir, r)
				// The forged "policy: accepted" stays inside the server's
				// line: the one policy line is the report's own.
				first, _, _ := strings.Cut(r.stdout, "\n")
				if want := `server "srv": evil\x1b]0;pwned\x07\x1b[2J\npolicy: accepted 6.6.6\u009b2J (protocol 2025-11-25)`; first != want {
					t.Errorf("first line %q, want %q", first, want)
				}
				if n := strings.Count("\n"+r.stdout, "\npolicy: "); n != 1 {
					t.Errorf("%d lines begin \"policy: \", want the report's one", n)
				}
			},
		},
		{
			name: "json", transports: bothTransports, cmd: "probe",
			server: evil, args: []string{"--json", "--call", "echo", `{"text":"hi"}`},
			code: exitOK, within: 10 * time.Second, inProcess: true,
			check: func(t *testing.T, dir string, r hostRun) {
				noControl(t, dir, r)
				rep := decodeReport(t, r.stdout)
				if rep.Server.Name != hostile.EvilName || rep.Server.Version != hostile.EvilVersion || rep.Server.Instructions != hostile.EvilInstructions {
					t.Errorf("server = %+v, want the hostile's name, version and instructions exactly", rep.Server)
				}
				if len(rep.Events) != 5 {
					t.Errorf("%d events in the report, want 5 (3 push events, 2 registrations)", len(rep.Events))
				}
			},
		},
	})
}

// TestFaultProbeEndLineSaysHostClosed: when this host closes the
// connection because the server sent a message over the size limit, the
// end line says this host closed it, and why, not that the server did
// (the fault suite found probe wording every end as the server's).
func TestFaultProbeEndLineSaysHostClosed(t *testing.T) {
	t.Parallel()
	for _, tr := range bothTransports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			var target []string
			if tr == "ws" {
				target = []string{"--url", hostile.StartWS(t, "-oversize", "20000000", "-at", "tools/call")}
			} else {
				target = []string{"--", hostile.Binary(t), "-oversize", "20000000", "-at", "tools/call", "-pidfile", pidfilePath(t, t.TempDir())}
			}
			r := runInProcess(append([]string{"probe", "--id", "srv", "--call", "echo", `{"text":"x"}`}, target...)...)
			if r.code != exitFail {
				t.Errorf("exit %d, want 1", r.code)
			}
			want := `this host closed its connection to the "srv" server during call echo: the server sent a message over the size limit of 16777216 bytes`
			if !strings.Contains(r.stdout, want+"\n") {
				t.Errorf("probe's end line: want %q in\n%s", want, r)
			}
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(l, `the "srv" server closed its connection`) || strings.HasPrefix(l, `the "srv" server ended the connection`) {
					t.Errorf("probe says %q, but this host closed the connection\n%s", l, r)
				}
			}
		})
	}
}

// TestFaultProbeConnectClosedHere: when the oversize message comes during
// initialize, the connect fails, and probe's one line says this host
// closed the connection, and why, with the limit (the close cause rides on
// the failed call's error).
func TestFaultProbeConnectClosedHere(t *testing.T) {
	t.Parallel()
	r := runInProcess("probe", "--id", "srv", "--", hostile.Binary(t), "-oversize", "20000000", "-at", "initialize", "-pidfile", pidfilePath(t, t.TempDir()))
	want := "mcplhost probe: this host closed its connection to the \"srv\" server during initialize: the server sent a message over the size limit of 16777216 bytes\n"
	if r.code != exitFail || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("want exit 1 and stderr ending %q:\n%s", want, r)
	}
}
