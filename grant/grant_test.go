package grant

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var injectLeaves = []string{
	"contextHooks.beforeInference.inject.system",
	"contextHooks.beforeInference.inject.beforeUser",
	"contextHooks.beforeInference.inject.afterUser",
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		// SPEC §5.4's pinned examples.
		{"channels.*", "channels.publish", true},
		{"channels.*", "channels.publish.anything", false},
		{"contextHooks.*", "contextHooks.beforeInference.inject.system", false},
		{"contextHooks.*", "contextHooks.beforeInference.inject.beforeUser", false},
		{"contextHooks.*", "contextHooks.beforeInference.inject.afterUser", false},
		{"contextHooks.*", "contextHooks.beforeInference.observe", false},
		{"contextHooks.*", "contextHooks.beforeInference", true},
		{"*", "pushEvents", true},
		{"*", "channels.publish", false},
		{"*", "contextHooks.beforeInference.inject.system", false},
		// A bare parent grants only itself; a trailing * is no subtree.
		{"channels", "channels", true},
		{"channels", "channels.publish", false},
		{"inferenceRequest", "inferenceRequest.streaming", false},
		// The input-stream vectors' consequences.
		{"channels.*", "channels.incoming.streaming", false},
		{"channels.incoming.*", "channels.incoming.streaming", true},
		// Segment counts must be equal, both ways.
		{"channels.publish.x", "channels.publish", false},
		{"*.*", "channels.publish", true},
		{"*.*", "pushEvents", false},
		{"*.*.*.*", "contextHooks.beforeInference.inject.system", true},
		{"contextHooks.beforeInference.inject.*", "contextHooks.beforeInference.inject.system", true},
		{"contextHooks.*.inject.system", "contextHooks.beforeInference.inject.system", true},
		{"pushEvents", "pushevents", false},
		{"", "", true},
		{"", "pushEvents", false},
	} {
		if got := Match(tc.pattern, tc.path); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

func parse(t *testing.T, raw string, tools bool) Advertisement {
	t.Helper()
	ad, err := ParseAdvertisement(json.RawMessage(raw), tools)
	if err != nil {
		t.Fatal(err)
	}
	return ad
}

func TestParseAdvertisementShorthand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raw     string
		tools   bool
		want    []string
		ignored []string
	}{
		{"nothing", `{"version":"0.5"}`, false, []string{}, []string{}},
		{"tools come from MCP only", `{"version":"0.5","tools":true}`, true, []string{"tools"}, []string{"tools"}},
		{"channels true is every channel leaf", `{"version":"0.4","channels":true}`, false,
			[]string{"channels.acknowledge", "channels.incoming", "channels.lifecycle", "channels.publish", "channels.register", "channels.streaming", "channels.typing"}, []string{}},
		{"channels false is none", `{"channels":false}`, false, []string{}, []string{}},
		{"channels object with a non-spec leaf", `{"channels":{"register":true,"publish":true,"observe":true}}`, false,
			[]string{"channels.publish", "channels.register"}, []string{"channels.observe"}},
		{"beforeInference true is observe and every injection", `{"contextHooks":{"beforeInference":true}}`, false,
			append([]string{"contextHooks.beforeInference.observe"}, "contextHooks.beforeInference.inject.afterUser", "contextHooks.beforeInference.inject.beforeUser", "contextHooks.beforeInference.inject.system"), []string{}},
		{"nested leaves", `{"contextHooks":{"beforeInference":{"observe":false,"inject":{"system":false,"beforeUser":true}}}}`, false,
			[]string{"contextHooks.beforeInference.inject.beforeUser"}, []string{}},
		{"an object advertises its own capability", `{"inferenceRequest":{"streaming":false}}`, false, []string{"inferenceRequest"}, []string{}},
		{"true covers the node and its leaves", `{"inferenceRequest":true,"pushEvents":true,"modelInfo":false}`, false,
			[]string{"inferenceRequest", "inferenceRequest.streaming", "pushEvents"}, []string{}},
		{"unknown members are ignored", `{"eventCoalescing":true,"toolLifecycle":{"observe":true},"pushEvents":"yes"}`, false,
			[]string{}, []string{"eventCoalescing", "toolLifecycle"}},
		{"a whole true advertisement", `true`, false, []string{
			"channels.acknowledge", "channels.incoming", "channels.lifecycle", "channels.publish", "channels.register", "channels.streaming", "channels.typing",
			"contextHooks.beforeInference.inject.afterUser", "contextHooks.beforeInference.inject.beforeUser", "contextHooks.beforeInference.inject.system", "contextHooks.beforeInference.observe",
			"inferenceLifecycle", "inferenceRequest", "inferenceRequest.streaming", "modelInfo", "pushEvents"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad := parse(t, tc.raw, tc.tools)
			if diff := cmp.Diff(tc.want, ad.Capabilities, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ignored, ad.Ignored); diff != "" {
				t.Errorf("ignored (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAdvertisementVersionAndErrors(t *testing.T) {
	if ad := parse(t, `{"version":"0.4"}`, false); ad.Version != "0.4" {
		t.Errorf("version = %q", ad.Version)
	}
	if ad := parse(t, `{"version":5}`, false); ad.Version != "" {
		t.Errorf("a non-string version read as %q", ad.Version)
	}
	if _, err := ParseAdvertisement(json.RawMessage(`{"version":`), false); err == nil {
		t.Error("broken JSON parsed")
	}
}

func TestParseFeatureSetShapes(t *testing.T) {
	want := []FeatureSet{
		{Name: "memory.proactive", Description: "Push reminders", Uses: []string{"pushEvents"}},
		{Name: "memory.retrieval", Description: "Retrieve", Uses: []string{"contextHooks.beforeInference.observe"}},
	}
	for name, raw := range map[string]string{
		"array (0.4)":       `{"featureSets":[{"name":"memory.retrieval","description":"Retrieve","uses":["contextHooks.beforeInference.observe"]},{"name":"memory.proactive","description":"Push reminders","uses":["pushEvents"]}]}`,
		"record (0.5)":      `{"featureSets":{"memory.retrieval":{"description":"Retrieve","uses":["contextHooks.beforeInference.observe"]},"memory.proactive":{"description":"Push reminders","uses":["pushEvents"]}}}`,
		"record with names": `{"featureSets":{"a":{"name":"memory.retrieval","description":"Retrieve","uses":["contextHooks.beforeInference.observe"]},"b":{"name":"memory.proactive","description":"Push reminders","uses":["pushEvents"]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(want, parse(t, raw, false).FeatureSets); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFeatureSetUsesValidation(t *testing.T) {
	ad := parse(t, `{"featureSets":{
		"absent":{"description":"x"},
		"empty":{"description":"x","uses":[]},
		"unknown":{"description":"x","uses":["pushEvents","contextHooks.beforeInference"]},
		"notstring":{"description":"x","uses":[42]},
		"notalist":{"description":"x","uses":"pushEvents"},
		"ok":{"description":"x","uses":["pushEvents","tools"]}}}`, false)
	got := map[string]string{}
	for _, fs := range ad.FeatureSets {
		got[fs.Name] = fs.Invalid
	}
	want := map[string]string{
		"absent":    "uses is missing",
		"empty":     "uses is empty",
		"unknown":   `"contextHooks.beforeInference" is not a capability path`,
		"notstring": "42 is not a string",
		"notalist":  "uses is not a list",
		"ok":        "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// all is every path this host could implement.
var all = Vocabulary()

func TestComputeDefaults(t *testing.T) {
	ad := parse(t, `{"version":"0.5","pushEvents":true,"channels":true,"contextHooks":{"beforeInference":true}}`, true)
	g := Compute(ad, all, Policy{})
	for _, p := range injectLeaves {
		if g.Has(p) {
			t.Errorf("%s granted without being enabled explicitly", p)
		}
	}
	for _, p := range []string{"tools", "pushEvents", "channels.register", "channels.incoming", "contextHooks.beforeInference.observe"} {
		if !g.Has(p) {
			t.Errorf("%s not granted by default", p)
		}
	}
	if diff := cmp.Diff(injectLeaves, g.DeniedFor(DenialDefault), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
	if g.Has("channels") || g.Has("contextHooks.beforeInference") {
		t.Error("a parent path was granted")
	}
}

func TestComputePolicy(t *testing.T) {
	ad := parse(t, `{"pushEvents":true,"inferenceRequest":true,"modelInfo":true,"channels":true,"contextHooks":{"beforeInference":true}}`, true)
	for _, tc := range []struct {
		name        string
		implemented []string
		pol         Policy
		want        []string
	}{
		{"only what the host implements", []string{"pushEvents", "channels.register"}, Policy{}, []string{"channels.register", "pushEvents"}},
		{"enable is an allowlist", all, Policy{Enable: []string{"channels.*", "tools"}},
			[]string{"channels.acknowledge", "channels.incoming", "channels.lifecycle", "channels.publish", "channels.register", "channels.streaming", "channels.typing", "tools"}},
		{"an empty enable grants nothing", all, Policy{Enable: []string{}}, []string{}},
		{"contextHooks.* enables no injection", all, Policy{Enable: []string{"contextHooks.*", "*"}},
			[]string{"inferenceRequest", "modelInfo", "pushEvents", "tools"}},
		{"an injection enabled explicitly", all, Policy{Disable: []string{"channels", "inferenceRequest", "modelInfo", "pushEvents", "tools"}, Enable: nil},
			[]string{"contextHooks.beforeInference.observe"}},
		{"inject.* enables injections beside the defaults", []string{"contextHooks.beforeInference.inject.system", "pushEvents"}, Policy{Enable: []string{"contextHooks.beforeInference.inject.*", "pushEvents"}},
			[]string{"contextHooks.beforeInference.inject.system", "pushEvents"}},
		{"disable covers the subtree", all, Policy{Disable: []string{"channels", "contextHooks", "inferenceRequest"}},
			[]string{"modelInfo", "pushEvents", "tools"}},
		{"deny wins", all, Policy{Enable: []string{"pushEvents", "tools"}, Disable: []string{"pushEvents"}}, []string{"tools"}},
		{"deny wins over an explicit injection", all, Policy{Enable: []string{"contextHooks.beforeInference.inject.system"}, Disable: []string{"contextHooks.*.inject.system"}}, []string{}},
		{"enabling what was not advertised grants nothing", all, Policy{Enable: []string{"inferenceLifecycle", "tools"}}, []string{"tools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Compute(ad, tc.implemented, tc.pol)
			if diff := cmp.Diff(tc.want, g.Effective); diff != "" {
				t.Errorf("effective (-want +got):\n%s", diff)
			}
			for _, p := range g.Effective {
				for _, d := range g.DeniedPaths() {
					if p == d {
						t.Errorf("%s both granted and denied", p)
					}
				}
			}
			if len(g.Effective)+len(g.Denied) != len(ad.Capabilities) {
				t.Errorf("effective %v + denied %v do not partition the advertisement %v", g.Effective, g.Denied, ad.Capabilities)
			}
		})
	}
}

func TestFeatureSetDerivation(t *testing.T) {
	ad := parse(t, `{"pushEvents":true,"inferenceRequest":true,"contextHooks":{"beforeInference":true},
		"featureSets":{
		"memory.retrieval":{"description":"r","uses":["contextHooks.beforeInference.observe"]},
		"memory.extraction":{"description":"e","uses":["inferenceLifecycle"]},
		"memory.consolidation":{"description":"c","uses":["inferenceRequest"]},
		"memory.proactive":{"description":"p","uses":["pushEvents"]},
		"memory.inject":{"description":"i","uses":["contextHooks.beforeInference.inject.system"]},
		"legacy":{"description":"l","uses":["contextHooks.beforeInference"]},
		"other.x":{"description":"o","uses":["pushEvents"]}}}`, false)
	states := func(g Grant) map[string]string {
		m := map[string]string{}
		for _, fs := range g.FeatureSets {
			m[fs.Name] = string(fs.State) + "/" + string(fs.Reason)
		}
		return m
	}
	g := Compute(ad, all, Policy{})
	want := map[string]string{
		"legacy":               "disabled/invalid_uses",
		"memory.consolidation": "enabled/",
		"memory.extraction":    "disabled/capability_denied",
		"memory.inject":        "disabled/capability_denied",
		"memory.proactive":     "enabled/",
		"memory.retrieval":     "enabled/",
		"other.x":              "enabled/",
	}
	if diff := cmp.Diff(want, states(g)); diff != "" {
		t.Errorf("default policy (-want +got):\n%s", diff)
	}
	if fs, _ := g.FeatureSet("memory.extraction"); !cmp.Equal(fs.Missing, []string{"inferenceLifecycle"}) {
		t.Errorf("missing = %v", fs.Missing)
	}

	g = Compute(ad, all, Policy{Disable: []string{"pushEvents"}, EnableFeatureSets: []string{"memory.*", "legacy"}, DisableFeatureSets: []string{"memory.consolidation"}})
	want = map[string]string{
		"legacy":               "disabled/invalid_uses",
		"memory.consolidation": "disabled/disabled",
		"memory.extraction":    "disabled/capability_denied",
		"memory.inject":        "disabled/capability_denied",
		"memory.proactive":     "disabled/capability_denied",
		"memory.retrieval":     "enabled/",
		"other.x":              "disabled/not_selected",
	}
	if diff := cmp.Diff(want, states(g)); diff != "" {
		t.Errorf("narrowed policy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"memory.retrieval"}, g.Enabled()); diff != "" {
		t.Errorf("enabled (-want +got):\n%s", diff)
	}
	if got := len(g.Enabled()) + len(g.Disabled()); got != len(ad.FeatureSets) {
		t.Errorf("enabled+disabled = %d sets, want all %d", got, len(ad.FeatureSets))
	}
	// Selecting a set never supplies what its uses lack.
	g = Compute(ad, all, Policy{EnableFeatureSets: []string{"memory.inject"}})
	if fs, _ := g.FeatureSet("memory.inject"); fs.State != StateDisabled {
		t.Errorf("memory.inject = %+v: selection widened the grant", fs)
	}
	if g.Enabled() == nil || g.Disabled() == nil {
		t.Error("Enabled/Disabled must be non-nil so the policy message always carries them")
	}
}

func TestCheckPolicyMessage(t *testing.T) {
	if err := CheckPolicyMessage([]string{"tools", "pushEvents"}, []string{"channels.publish"}); err != nil {
		t.Errorf("disjoint lists rejected: %v", err)
	}
	err := CheckPolicyMessage([]string{"tools", "pushEvents"}, []string{"pushEvents"})
	if err == nil || err.Error() != "malformed policy: pushEvents is in both effectiveCapabilities and deniedCapabilities" {
		t.Errorf("a path in both lists: %v", err)
	}
}

func FuzzParseAdvertisement(f *testing.F) {
	f.Add([]byte(`{"version":"0.5","channels":{"register":true},"featureSets":[{"name":"a","uses":["pushEvents"]}]}`))
	f.Add([]byte(`true`))
	f.Add([]byte(`{"contextHooks":{"beforeInference":{"inject":{"system":true}}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ad, err := ParseAdvertisement(raw, true)
		if err != nil {
			return
		}
		for _, p := range ad.Capabilities {
			if !Known(p) {
				t.Fatalf("unknown path %q advertised", p)
			}
		}
		g := Compute(ad, Vocabulary(), Policy{})
		for _, p := range DeniedByDefault() {
			if g.Has(p) {
				t.Fatalf("%s granted by default", p)
			}
		}
	})
}
