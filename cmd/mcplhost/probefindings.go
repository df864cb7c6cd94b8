package main

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/protocol"
)

// kindIncomingNotification is the finding that the server sent
// channels/incoming as a notification (no id), as a public Telegram
// connector does. SPEC §14.3 makes it a request, whose answer is the
// per-message results; a notification can't be answered, so the server
// can't learn which of its messages a host accepted. Every such
// notification is counted, admitted or rejected. Probe answers none (a
// notification has no answer); the event line of each says what probe did
// with its messages (eventNote).
const kindIncomingNotification = "channels-incoming-notification"

// The parts of the kindIncomingNotification finding past what was seen.
const (
	incomingNotificationWhy = "SPEC §14.3 makes it a request, and a notification gets no per-message results, so the server can't learn which messages a host accepted, and one the host refused or dropped as a duplicate is lost without the server knowing"
	incomingNotificationFix = "send channels/incoming as a request (with an id) and read the per-message results in its answer"
)

// probeFinding is a finding: something the server did during the probe
// that SPEC does not allow, which a host puts up with and the server's
// author should fix; it says what was seen, why it matters and what to do.
// Findings are counted over the whole probe (the handshake, the calls and
// --wait), not only over the events the report keeps (maxEventsPerMethod
// of each method), and given once each, at the end of the report, when the
// count is final:
//
//   - text: one line each, "warning: " and what findingLine says, after
//     the events, the calls and the stdout-noise warning, before how the
//     connection ended (on stderr, after "mcplhost probe: ", when the
//     connect failed). "warning:", as the stdout-noise line, for something
//     the server did wrong; "note:" is kept for this host's own flags.
//   - JSON: "findings", a list of probeFinding ([] when there are none).
//
// Stdout noise, found before findings were, keeps its own line and its
// own "stdoutNoise" member.
//
// The one finding so far is kindIncomingNotification.
type probeFinding struct {
	// Kind names the finding, for a program reading the JSON report.
	Kind string `json:"kind"`
	// Count is how many times it was seen.
	Count int `json:"count"`
	// Seen says what was seen, Why why it matters and Fix what to do.
	Seen string `json:"seen"`
	Why  string `json:"why"`
	Fix  string `json:"fix"`
}

// findings counts what the findings are made of as the server's
// privileged messages arrive (observe, from OnInbound, on the session's
// goroutines).
type findings struct {
	incomingNotified atomic.Int64
}

// observe counts in if it makes a finding.
func (f *findings) observe(in session.Inbound) {
	if in.Method == protocol.MethodChannelsIncoming && !in.Request {
		f.incomingNotified.Add(1)
	}
}

// list returns the findings so far ([] when there are none).
func (f *findings) list() []probeFinding {
	out := []probeFinding{}
	if n := int(f.incomingNotified.Load()); n > 0 {
		seen := "the server sent channels/incoming as a notification (no id) once"
		if n > 1 {
			seen = fmt.Sprintf("the server sent channels/incoming as a notification (no id) %d times", n)
		}
		out = append(out, probeFinding{Kind: kindIncomingNotification, Count: n, Seen: seen,
			Why: incomingNotificationWhy, Fix: incomingNotificationFix})
	}
	return out
}

// findingLine is a finding's line in the text report, after "warning: ":
// what was seen, why it matters, what to do.
func findingLine(f probeFinding) string {
	return f.Seen + ": " + f.Why + "; " + f.Fix
}

// printFindings prints each finding's line, after prefix.
func printFindings(w io.Writer, prefix string, fs []probeFinding) {
	for _, f := range fs {
		printer{w}.linef("%swarning: %s", prefix, findingLine(f))
	}
}
