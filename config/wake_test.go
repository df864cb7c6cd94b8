package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/config"
)

// agents[].wake: the debounce, its bound and the treatment rules, with
// the defaults; every mistake named with its line.
func TestAgentWake(t *testing.T) {
	const m = "    model: {provider: scripted, echo: true}\n"
	def := config.Wake{Debounce: config.DefaultDebounce, MaxDelay: config.DefaultMaxDelay}
	for _, tc := range []struct {
		src  string
		want config.Wake
		err  string
	}{
		{src: "", want: def},
		{src: "    wake: {debounce: 0s}\n", want: config.Wake{Debounce: config.NoDebounce, MaxDelay: config.DefaultMaxDelay}},
		{src: "    wake: {debounce: 2s, maxDelay: 10s}\n", want: config.Wake{Debounce: 2 * time.Second, MaxDelay: 10 * time.Second}},
		{src: "    wake:\n      rules:\n        - {channel: support, tagsAny: [chat:ambient], treat: wake}\n        - {server: [noisy, \"spam-*\"], source: push, treat: ignore}\n",
			want: config.Wake{Debounce: config.DefaultDebounce, MaxDelay: config.DefaultMaxDelay, Rules: []config.WakeRule{
				{Channels: []string{"support"}, TagsAny: []string{"chat:ambient"}, Treat: config.TreatWake},
				{Servers: []string{"noisy", "spam-*"}, Source: "push", Treat: config.TreatIgnore},
			}}},
		{src: "    wake: {debounce: 5s, maxDelay: 2s}\n", err: "c.yaml:4: agents[0].wake: maxDelay 2s is shorter than debounce 5s"},
		{src: "    wake: {maxDelay: 0s}\n", err: "c.yaml:4: agents[0].wake.maxDelay: must be more than 0"},
		{src: "    wake: {debounce: soon}\n", err: `c.yaml:4: agents[0].wake.debounce: "soon" is not a duration`},
		{src: "    wake: {rules: [{tagsAny: [chat:ambient]}]}\n", err: "c.yaml:4: agents[0].wake.rules[0]: has no treat; give one of wake, batch, ignore"},
		{src: "    wake: {rules: [{treat: sleep}]}\n", err: `c.yaml:4: agents[0].wake.rules[0].treat: "sleep" is not a treatment; write wake, batch or ignore`},
		{src: "    wake: {rules: [{source: dm, treat: wake}]}\n", err: `c.yaml:4: agents[0].wake.rules[0].source: "dm" is not a source; write channel or push`},
		{src: "    wake: {rules: [{tagsAny: [\"\"], treat: wake}]}\n", err: "c.yaml:4: agents[0].wake.rules[0].tagsAny[0]: is empty; write * to match anything"},
		{src: "    wake: {rules: [{tags: [x], treat: wake}]}\n", err: "c.yaml:4: agents[0].wake.rules[0].tags: unknown key"},
		{src: "    wake: {rules: {treat: wake}}\n", err: "c.yaml:4: agents[0].wake.rules: "},
	} {
		a, err := agentOne(t, m+tc.src)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v\nwant it to hold %s", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, a.Wake); diff != "" {
			t.Errorf("%q: Wake (-want +got):\n%s", tc.src, diff)
		}
	}
}

// servers[].acceptTreatment: a pin, or nothing.
func TestAcceptTreatment(t *testing.T) {
	pin := "sha256:" + strings.Repeat("0f", 32)
	s, err := one(t, "    acceptTreatment: "+pin+"\n")
	if err != nil || s.AcceptTreatment != pin {
		t.Errorf("AcceptTreatment %q, %v; want %s", s.AcceptTreatment, err, pin)
	}
	if s, err := one(t, ""); err != nil || s.AcceptTreatment != "" {
		t.Errorf("absent: %q, %v", s.AcceptTreatment, err)
	}
	for _, bad := range []string{"true", "sha256:abc", "SHA256:" + strings.Repeat("0F", 32)} {
		_, err := one(t, "    acceptTreatment: "+bad+"\n")
		if err == nil || !strings.Contains(err.Error(), "c.yaml:4: servers[0].acceptTreatment: ") || !strings.Contains(err.Error(), "is not a pin") {
			t.Errorf("%s: err = %v, want it named as not a pin", bad, err)
		}
	}
}

// servers[].protocolVersion: a revision this host speaks, or nothing.
func TestProtocolVersionPin(t *testing.T) {
	for _, v := range []string{"2026-07-28", "2025-11-25", "2024-11-05"} {
		if s, err := one(t, "    protocolVersion: \""+v+"\"\n"); err != nil || s.ProtocolVersion != v {
			t.Errorf("%s: %q, %v", v, s.ProtocolVersion, err)
		}
	}
	if s, err := one(t, ""); err != nil || s.ProtocolVersion != "" {
		t.Errorf("absent: %q, %v", s.ProtocolVersion, err)
	}
	_, err := one(t, "    protocolVersion: \"2025-01-01\"\n")
	want := `c.yaml:4: servers[0].protocolVersion: "2025-01-01" is not an MCP revision this host speaks (2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05); leave it out to negotiate`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %s", err, want)
	}
}
