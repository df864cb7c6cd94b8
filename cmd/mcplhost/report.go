package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/protocol"
)

// probeReport is what probe found, printed as text or as JSON. Every list
// is [] when empty, never null.
type probeReport struct {
	Server       probeServer        `json:"server"`
	MCPL         json.RawMessage    `json:"mcpl"`
	Policy       *probePolicy       `json:"policy"`
	Grant        *probeGrant        `json:"grant"`
	PolicyNotes  []probeNote        `json:"policyNotes"`
	FeatureSets  []probeFeatureSet  `json:"featureSets"`
	Channels     []probeChannel     `json:"channels"`
	ChannelsList *probeChannelsList `json:"channelsList"`
	Tools        []protocol.Tool    `json:"tools"`
	ToolsDenied  bool               `json:"toolsDenied"`
	ToolsNote    string             `json:"toolsNote,omitempty"`
	ToolsError   string             `json:"toolsError,omitempty"`
	Calls        []probeResult      `json:"calls"`
	// Events are the first maxEventsPerMethod privileged messages of
	// each method; EventsOmitted counts, by method, those left out ({}
	// when none were).
	Events        []probeEvent   `json:"events"`
	EventsOmitted map[string]int `json:"eventsOmitted"`
	// ChannelsIgnored counts the channels registered beyond the
	// maxChannels kept.
	ChannelsIgnored int `json:"channelsIgnored"`
	// StdoutNoise counts the lines a server over stdio wrote to its
	// stdout that were not JSON-RPC messages, which were skipped; null
	// when there were none, and over WebSocket.
	StdoutNoise *probeNoise `json:"stdoutNoise"`
	// Findings are what the server did that SPEC does not allow, each
	// with why it matters and what to do (probeFinding); [] when none.
	Findings []probeFinding `json:"findings"`
	// Ended says how the connection ended before the report was complete
	// (or during --wait); null when it did not.
	Ended *probeEnd `json:"ended"`
	// Error says why there is no report, when the connect failed.
	Error string `json:"error,omitempty"`
}

type probeServer struct {
	ID              string `json:"id"`
	Name            string `json:"name,omitempty"`
	Version         string `json:"version,omitempty"`
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Stateless says the connection speaks 2026-07-28, where MCPL is off.
	Stateless bool `json:"stateless,omitempty"`
	// SupportedVersions are the revisions the server said it speaks,
	// when it said (server/discover).
	SupportedVersions []string `json:"supportedVersions,omitempty"`
	Instructions      string   `json:"instructions,omitempty"`
}

type probePolicy struct {
	Outcome  grant.PolicyOutcome `json:"outcome"`
	Fallback string              `json:"fallback,omitempty"`
	Reason   string              `json:"reason,omitempty"`
	// Unavailable lists the receipt's unavailable feature sets.
	Unavailable []protocol.UnavailableFeature `json:"unavailableFeatures"`
	// Held lists the server's own requests held when the policy went
	// unanswered.
	Held []string `json:"held"`
}

// probeGrant is the grant with each denied path under its reason.
type probeGrant struct {
	Effective      []string `json:"effective"`
	DeniedByPolicy []string `json:"deniedByPolicy"`
	NotImplemented []string `json:"notImplemented"`
	NotEstablished []string `json:"notEstablished"`
}

// probeNote is an --enable or --disable pattern that does nothing here.
type probeNote struct {
	Flag    string   `json:"flag"`
	Pattern string   `json:"pattern"`
	Problem string   `json:"problem"`
	Paths   []string `json:"paths"`
}

type probeFeatureSet struct {
	Name    string   `json:"name"`
	State   string   `json:"state"`
	Reason  string   `json:"reason,omitempty"`
	Missing []string `json:"missing"`
	Invalid string   `json:"invalid,omitempty"`
}

// probeChannel is a channel the server registered, or listed.
type probeChannel struct {
	ID         string `json:"id"`
	Label      string `json:"label,omitempty"`
	Type       string `json:"type,omitempty"`
	Direction  string `json:"direction,omitempty"`
	Registered bool   `json:"registered"`
	Listed     bool   `json:"listed"`
}

type probeChannelsList struct {
	Asked     bool   `json:"asked"`
	Supported bool   `json:"supported"`
	Listed    int    `json:"listed"`
	Note      string `json:"note,omitempty"`
}

type probeResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// ErrorResult is set when the tool answered with an isError result;
	// Text is then the tool's own words.
	ErrorResult bool   `json:"errorResult"`
	Text        string `json:"text"`
}

type probeEvent struct {
	Method string `json:"method"`
	// Request is true for a message that came as a JSON-RPC request, false
	// for one that came as a notification (no id: nothing answers it).
	Request  bool   `json:"request"`
	Admitted bool   `json:"admitted"`
	Reason   string `json:"reason,omitempty"`
	// Note is what the text line says beyond the verdict (eventNote): for
	// a channels/incoming notification, that nothing tells the server
	// which messages were kept.
	Note   string          `json:"note,omitempty"`
	Params json.RawMessage `json:"params"`
	// Answer is what the host answered a request with: a result, or an
	// error object; null for a notification.
	Answer json.RawMessage `json:"answer"`
	// ParamsOmitted and AnswerOmitted give the size in bytes of params or
	// an answer over maxEventPart, which is not kept: it is null then.
	ParamsOmitted int `json:"paramsOmitted,omitempty"`
	AnswerOmitted int `json:"answerOmitted,omitempty"`
}

// probeNoise is what a server over stdio wrote to its stdout that was not
// a JSON-RPC message: how many lines, and the first of them, cut to
// maxNoiseFirst bytes.
type probeNoise struct {
	Lines int    `json:"lines"`
	First string `json:"first"`
}

// probeEnd is how the connection ended, and at which step.
type probeEnd struct {
	Step string `json:"step"`
	// ClosedHere is set when this host closed the connection because of
	// what the server did; Why says what.
	ClosedHere bool     `json:"closedHere"`
	Why        string   `json:"why,omitempty"`
	ExitCode   *int     `json:"exitCode,omitempty"`
	Signal     string   `json:"signal,omitempty"`
	WSCode     int      `json:"wsCode,omitempty"`
	WSReason   string   `json:"wsReason,omitempty"`
	Error      string   `json:"error,omitempty"`
	Stderr     []string `json:"stderr"`
}

// emptyReport is the report of the server id before anything is known,
// its lists [] and maps {} rather than null.
func emptyReport(id string) probeReport {
	return probeReport{
		Server:        probeServer{ID: id},
		PolicyNotes:   []probeNote{},
		FeatureSets:   []probeFeatureSet{},
		Channels:      []probeChannel{},
		Tools:         []protocol.Tool{},
		Calls:         []probeResult{},
		Events:        []probeEvent{},
		EventsOmitted: map[string]int{},
		Findings:      []probeFinding{},
	}
}

// newProbeReport fills what the handshake and policy exchange found.
func newProbeReport(id string, st session.State, notes []grant.PatternNote) probeReport {
	init := st.Init
	rep := emptyReport(id)
	rep.Server.ProtocolVersion, rep.Server.Instructions = init.ProtocolVersion, init.Instructions
	rep.Server.Stateless, rep.Server.SupportedVersions = st.Modern, st.ServerVersions
	rep.MCPL = init.Capabilities.MCPL()
	if init.ServerInfo != nil {
		rep.Server.Name, rep.Server.Version = init.ServerInfo.Name, init.ServerInfo.Version
	}
	for _, n := range notes {
		flag := "--enable"
		if n.Disable {
			flag = "--disable"
		}
		rep.PolicyNotes = append(rep.PolicyNotes, probeNote{Flag: flag, Pattern: n.Pattern, Problem: string(n.Problem), Paths: orEmpty(n.Paths)})
	}
	if p := st.Policy; p != nil {
		rep.Policy = &probePolicy{Outcome: p.Outcome, Fallback: p.Fallback, Reason: p.Reason,
			Unavailable: []protocol.UnavailableFeature{}, Held: orEmpty(p.Held)}
		if p.Receipt != nil && p.Receipt.UnavailableFeatures != nil {
			rep.Policy.Unavailable = p.Receipt.UnavailableFeatures
		}
	}
	if st.Advertisement != nil {
		g := st.Grant
		rep.Grant = &probeGrant{
			Effective:      orEmpty(g.Effective),
			DeniedByPolicy: g.DeniedFor(grant.DenialPolicy, grant.DenialDefault),
			NotImplemented: g.DeniedFor(grant.DenialNotImplemented),
			NotEstablished: g.DeniedFor(grant.DenialNotEstablished),
		}
		for _, fs := range g.FeatureSets {
			rep.FeatureSets = append(rep.FeatureSets, probeFeatureSet{Name: fs.Name, State: string(fs.State), Reason: string(fs.Reason),
				Missing: orEmpty(fs.Missing), Invalid: fs.Invalid})
		}
	}
	return rep
}

func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func printHeader(w io.Writer, rep probeReport) {
	out := printer{w}
	s := rep.Server
	switch {
	case s.Name == "" && s.ProtocolVersion == "":
		out.linef("server %q: no serverInfo given", s.ID)
	case s.ProtocolVersion != "":
		out.linef("server %q: %s %s (protocol %s)", s.ID, orDash(s.Name), s.Version, s.ProtocolVersion)
	default:
		out.linef("server %q: %s %s", s.ID, orDash(s.Name), s.Version)
	}
	if len(s.SupportedVersions) > 0 {
		out.linef("protocol versions it speaks: %s", strings.Join(s.SupportedVersions, ", "))
	}
	switch {
	case rep.Server.Stateless:
		out.linef("mcpl: none (MCP 2026-07-28 is stateless: MCPL needs an initialize session)")
	case rep.MCPL == nil:
		out.linef("mcpl: none (a plain MCP server)")
	default:
		out.linef("mcpl: %s", compact(rep.MCPL))
	}
	if rep.Policy != nil {
		out.linef("policy: %s", policyLine(*rep.Policy, rep.ToolsDenied))
		for _, u := range rep.Policy.Unavailable {
			out.linef("  unavailable: %s (%s; missing %s)", u.FeatureSet, u.Effect, listOrNone(u.MissingCapabilities))
		}
		if len(rep.Policy.Held) > 0 {
			out.linef("  note: the server's own %s waited on this host while the policy went unanswered: a server that waits for its own request's answer before it reads the policy deadlocks there",
				strings.Join(rep.Policy.Held, ", "))
		}
	}
	for _, n := range rep.PolicyNotes {
		out.linef("note: %s %s %s, so it does nothing", n.Flag, n.Pattern, noteProblem(n))
	}
	if g := rep.Grant; g != nil {
		out.linef("grant: effective: %s", listOrNone(g.Effective))
		if len(g.NotEstablished) > 0 {
			out.linef("grant: withheld, as the policy is not established: %s", strings.Join(g.NotEstablished, ", "))
		}
		out.linef("grant: denied by policy: %s", listOrNone(g.DeniedByPolicy))
		out.linef("grant: not implemented by this host: %s", listOrNone(g.NotImplemented))
		out.linef("feature sets (%d):", len(rep.FeatureSets))
		for _, fs := range rep.FeatureSets {
			var about string
			switch {
			case fs.Invalid != "":
				about = " (" + fs.Reason + ": " + fs.Invalid + ")"
			case len(fs.Missing) > 0:
				about = " (" + fs.Reason + ": missing " + strings.Join(fs.Missing, ", ") + ")"
			case fs.Reason != "":
				about = " (" + fs.Reason + ")"
			}
			out.linef("  %s: %s%s", fs.Name, fs.State, about)
		}
		printChannels(out, rep)
	}
	switch {
	case rep.ToolsDenied:
		out.linef("tools: not listed: host policy denies tools")
		return
	case rep.ToolsNote != "":
		out.linef("tools: %s", rep.ToolsNote)
		return
	case rep.ToolsError != "":
		out.linef("tools: error: %s", rep.ToolsError)
	}
	out.linef("tools (%d):", len(rep.Tools))
	for _, t := range rep.Tools {
		hints := toolHints(t)
		if t.Description != "" {
			out.linef("  %s: %s%s", t.Name, oneLine(t.Description), hints)
		} else {
			out.linef("  %s%s", t.Name, hints)
		}
	}
}

// toolHints words what a tool declares beyond its name and description:
// its annotations' hints that are true (hints: a server's word, which
// this host trusts for nothing) and a declared output schema, as
// " (read-only, structured output)"; "" for none.
func toolHints(t protocol.Tool) string {
	var a struct {
		ReadOnly    bool `json:"readOnlyHint"`
		Destructive bool `json:"destructiveHint"`
		Idempotent  bool `json:"idempotentHint"`
		OpenWorld   bool `json:"openWorldHint"`
	}
	var out []string
	if len(t.Annotations) > 0 && json.Unmarshal(t.Annotations, &a) == nil {
		for _, h := range []struct {
			on   bool
			word string
		}{{a.ReadOnly, "read-only"}, {a.Destructive, "destructive"}, {a.Idempotent, "idempotent"}, {a.OpenWorld, "open-world"}} {
			if h.on {
				out = append(out, h.word)
			}
		}
	}
	if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
		out = append(out, "structured output")
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, ", ") + ")"
}

func noteProblem(n probeNote) string {
	if n.Problem == string(grant.PatternNotImplemented) {
		return "matches only paths this host does not implement (" + strings.Join(n.Paths, ", ") + ")"
	}
	return "names no capability path"
}

// printChannels prints the channels as a table, as tools are, with what
// channels/list said.
func printChannels(out printer, rep probeReport) {
	if rep.ChannelsList == nil && len(rep.Channels) == 0 {
		out.linef("channels: not asked (channels.register is not granted)")
		return
	}
	out.linef("channels (%d):", len(rep.Channels))
	listed := 0
	for _, c := range rep.Channels {
		var about []string
		if c.Label != "" {
			about = append(about, c.Label)
		}
		if c.Type != "" {
			about = append(about, c.Type)
		}
		if c.Direction != "" {
			about = append(about, c.Direction)
		}
		line := c.ID
		if len(about) > 0 {
			line += ": " + strings.Join(about, ", ")
		}
		switch {
		case c.Registered && !c.Listed && rep.ChannelsList != nil && rep.ChannelsList.Supported:
			line += " (registered, not listed)"
		case !c.Registered:
			line += " (listed, not registered)"
		}
		if c.Listed {
			listed++
		}
		out.linef("  %s", line)
	}
	if l := rep.ChannelsList; l != nil {
		switch {
		case l.Supported && listed < l.Listed:
			out.linef("channels/list: answered with %d (those beyond the first %d channels are not shown)", l.Listed, maxChannels)
		case l.Supported:
			out.linef("channels/list: answered with %d", l.Listed)
		default:
			out.linef("channels/list: %s", l.Note)
		}
	}
}

// policyLine says how the policy exchange went, in one line: what the
// server answered, and what this host did about it. MCP's tools go on
// working when MCPL is off, unless host policy denies them.
func policyLine(p probePolicy, toolsDenied bool) string {
	off := "MCPL's privileged surface is off; MCP's tools work as plain MCP"
	if toolsDenied {
		off = "MCPL's privileged surface is off, and host policy denies tools"
	}
	switch p.Outcome {
	case grant.OutcomeRefused:
		s := "refused (fallback " + p.Fallback + ": " + off + ")"
		if p.Reason != "" {
			s += ": " + p.Reason
		}
		return s
	case grant.OutcomeNotification:
		return "notification (the 0.4 path: the server answered the Request with method-not-found, so this host sent the policy again as a notification)"
	case grant.OutcomeUnanswered:
		return "unanswered (" + off + "): " + p.Reason
	}
	return string(p.Outcome)
}

func printCall(w io.Writer, r probeResult) {
	out := printer{w}
	switch {
	case r.OK:
		out.linef("call %s: ok", r.Name)
		if r.Text != "" {
			out.block(r.Text, "")
		}
	case r.ErrorResult && r.Text == "":
		out.linef("call %s: error result with no text", r.Name)
	case r.ErrorResult:
		out.linef("call %s: error result: %s", r.Name, r.Text)
	default:
		out.linef("call %s: %s", r.Name, r.Text)
	}
}

// printNoise warns, once, of the lines the server wrote to its stdout that
// were not JSON-RPC messages, if there were any (noiseLine).
func printNoise(w io.Writer, prefix string, n *probeNoise) {
	if n != nil {
		printer{w}.linef("%s%s", prefix, noiseLine(n))
	}
}

// noiseLine says in one line that the server wrote lines to its stdout
// that are not JSON-RPC messages, how many, the first, and why that is
// wrong on stdio.
func noiseLine(n *probeNoise) string {
	const why = "on stdio every stdout line must be one whole JSON-RPC message (logs go to stderr)"
	if n.Lines == 1 {
		return fmt.Sprintf("warning: the server wrote 1 line to stdout that is not a JSON-RPC message (%q); it was skipped: %s", n.First, why)
	}
	return fmt.Sprintf("warning: the server wrote %d lines to stdout that are not JSON-RPC messages (the first: %q); they were skipped: %s", n.Lines, n.First, why)
}

// printEnd says how the connection ended, at which step (endLine), and the
// last lines of the server's stderr.
func printEnd(w io.Writer, prefix, id string, e *probeEnd) {
	out := printer{w}
	out.linef("%s%s", prefix, endLine(id, e))
	if len(e.Stderr) > 0 {
		out.linef("%sthe last lines of its stderr:", prefix)
		for _, l := range e.Stderr {
			out.linef("  | %s", l)
		}
	}
}

// endLine says in one line how the server's connection ended, and when.
func endLine(id string, e *probeEnd) string {
	if e.ClosedHere {
		return fmt.Sprintf("this host closed its connection to the %q server during %s: %s", id, e.Step, e.Why)
	}
	var how string
	switch {
	case e.ExitCode != nil && e.Signal != "":
		how = "was killed by " + e.Signal
	case e.ExitCode != nil:
		how = fmt.Sprintf("exited with status %d", *e.ExitCode)
	case e.WSCode != 0:
		how = fmt.Sprintf("closed the WebSocket connection (status %d", e.WSCode)
		if e.WSReason != "" {
			how += ": " + e.WSReason
		}
		how += ")"
	case e.Error != "":
		how = "ended the connection (" + e.Error + ")"
	default:
		how = "closed its connection"
	}
	return fmt.Sprintf("the %q server %s during %s", id, how, e.Step)
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "(none)"
	}
	return strings.Join(l, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
