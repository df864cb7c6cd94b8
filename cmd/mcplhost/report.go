package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/protocol"
)

// probeReport is what probe found, printed as text or as JSON.
type probeReport struct {
	Server        *probeServer      `json:"server"`
	MCPL          json.RawMessage   `json:"mcpl"`
	Policy        *probePolicy      `json:"policy"`
	Grant         *probeGrant       `json:"grant"`
	FeatureSets   []probeFeatureSet `json:"featureSets"`
	Channels      json.RawMessage   `json:"channels"`
	ChannelsError string            `json:"channelsError,omitempty"`
	Tools         []protocol.Tool   `json:"tools"`
	ToolsError    string            `json:"toolsError,omitempty"`
	Calls         []probeResult     `json:"calls"`
	Events        []probeEvent      `json:"events"`
}

type probeServer struct {
	Name            string `json:"name,omitempty"`
	Version         string `json:"version,omitempty"`
	ProtocolVersion string `json:"protocolVersion,omitempty"`
}

type probePolicy struct {
	Outcome  string `json:"outcome"`
	Fallback string `json:"fallback,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Degraded lists the receipt's unavailable feature sets.
	Unavailable []protocol.UnavailableFeature `json:"unavailableFeatures,omitempty"`
}

type probeGrant struct {
	Effective []string `json:"effective"`
	Denied    []string `json:"denied"`
}

type probeFeatureSet struct {
	Name    string   `json:"name"`
	State   string   `json:"state"`
	Reason  string   `json:"reason,omitempty"`
	Missing []string `json:"missing,omitempty"`
}

type probeResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Text string `json:"text"`
}

type probeEvent struct {
	Method   string          `json:"method"`
	Admitted bool            `json:"admitted"`
	Reason   string          `json:"reason,omitempty"`
	Params   json.RawMessage `json:"params"`
}

// newProbeReport fills what the handshake and policy exchange found.
func newProbeReport(st session.State) probeReport {
	init := st.Init
	rep := probeReport{MCPL: init.Capabilities.MCPL(), Calls: []probeResult{}, Events: []probeEvent{}, Tools: []protocol.Tool{}, FeatureSets: []probeFeatureSet{}}
	if init.ServerInfo != nil || init.ProtocolVersion != "" {
		rep.Server = &probeServer{ProtocolVersion: init.ProtocolVersion}
		if init.ServerInfo != nil {
			rep.Server.Name, rep.Server.Version = init.ServerInfo.Name, init.ServerInfo.Version
		}
	}
	if st.Policy != nil {
		rep.Policy = &probePolicy{Outcome: st.Policy.Outcome, Fallback: st.Policy.Fallback, Reason: st.Policy.Reason}
		if st.Policy.Receipt != nil {
			rep.Policy.Unavailable = st.Policy.Receipt.UnavailableFeatures
		}
	}
	if st.Advertisement != nil {
		rep.Grant = &probeGrant{Effective: st.Grant.Effective, Denied: st.Grant.Denied}
		for _, fs := range st.Grant.FeatureSets {
			rep.FeatureSets = append(rep.FeatureSets, probeFeatureSet{Name: fs.Name, State: fs.State, Reason: fs.Reason, Missing: fs.Missing})
		}
	}
	return rep
}

func printHeader(w io.Writer, id string, rep probeReport) {
	switch {
	case rep.Server == nil:
		fmt.Fprintf(w, "server %q: no serverInfo given\n", id)
	default:
		fmt.Fprintf(w, "server %q: %s %s", id, orDash(rep.Server.Name), rep.Server.Version)
		if rep.Server.ProtocolVersion != "" {
			fmt.Fprintf(w, " (protocol %s)", rep.Server.ProtocolVersion)
		}
		fmt.Fprintln(w)
	}
	if rep.MCPL == nil {
		fmt.Fprintln(w, "mcpl: none (a plain MCP server)")
	} else {
		fmt.Fprintf(w, "mcpl: %s\n", compact(rep.MCPL))
	}
	if rep.Policy != nil {
		fmt.Fprintf(w, "policy: %s\n", policyLine(*rep.Policy))
		for _, u := range rep.Policy.Unavailable {
			fmt.Fprintf(w, "  unavailable: %s (%s; missing %s)\n", u.FeatureSet, u.Effect, listOrNone(u.MissingCapabilities))
		}
	}
	if rep.Grant != nil {
		fmt.Fprintf(w, "grant: effective: %s\n", listOrNone(rep.Grant.Effective))
		fmt.Fprintf(w, "grant: denied: %s\n", listOrNone(rep.Grant.Denied))
		fmt.Fprintf(w, "feature sets (%d):\n", len(rep.FeatureSets))
		for _, fs := range rep.FeatureSets {
			line := "  " + fs.Name + ": " + fs.State
			if fs.Reason != "" {
				line += " (" + fs.Reason
				if len(fs.Missing) > 0 {
					line += ": missing " + strings.Join(fs.Missing, ", ")
				}
				line += ")"
			}
			fmt.Fprintln(w, line)
		}
		switch {
		case rep.ChannelsError != "":
			fmt.Fprintf(w, "channels: error: %s\n", rep.ChannelsError)
		case rep.Channels != nil:
			fmt.Fprintf(w, "channels: %s\n", compact(rep.Channels))
		default:
			fmt.Fprintln(w, "channels: not listed (channels.register is not granted)")
		}
	}
	if rep.ToolsError != "" {
		fmt.Fprintf(w, "tools: error: %s\n", rep.ToolsError)
	}
	fmt.Fprintf(w, "tools (%d):\n", len(rep.Tools))
	for _, t := range rep.Tools {
		if t.Description != "" {
			fmt.Fprintf(w, "  %s: %s\n", t.Name, oneLine(t.Description))
		} else {
			fmt.Fprintf(w, "  %s\n", t.Name)
		}
	}
}

// policyLine says how the policy exchange went, in one line.
func policyLine(p probePolicy) string {
	switch p.Outcome {
	case session.OutcomeRefused:
		s := "refused (fallback " + p.Fallback + ")"
		if p.Reason != "" {
			s += ": " + p.Reason
		}
		return s
	case session.OutcomeNotification:
		return "notification (the 0.4 path: the server took the policy as a notification)"
	case session.OutcomeUnanswered:
		return "unanswered (MCPL's privileged surface is off; tools work): " + p.Reason
	}
	return p.Outcome
}

func printCall(w io.Writer, r probeResult) {
	if !r.OK {
		fmt.Fprintf(w, "call %s: error: %s\n", r.Name, r.Text)
		return
	}
	fmt.Fprintf(w, "call %s: ok\n", r.Name)
	if r.Text != "" {
		fmt.Fprintln(w, r.Text)
	}
}

func printEvent(w io.Writer, e probeEvent) {
	verdict := "admitted"
	if !e.Admitted {
		verdict = "rejected: " + e.Reason
	} else if e.Reason != "" {
		verdict += " (" + e.Reason + ")"
	}
	fmt.Fprintf(w, "event %s: %s %s\n", e.Method, verdict, compact(e.Params))
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
