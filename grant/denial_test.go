package grant

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTablesAreCopies(t *testing.T) {
	v := Vocabulary()
	v[0] = "channels.everything"
	d := DeniedByDefault()
	d[0] = "pushEvents"
	if Known("channels.everything") || !slices.Contains(Vocabulary(), "pushEvents") {
		t.Error("changing Vocabulary's slice changed the vocabulary")
	}
	g := Compute(parse(t, `{"pushEvents":true,"contextHooks":{"beforeInference":{"inject":{"system":true}}}}`, false), Vocabulary(), Policy{})
	if !g.Has("pushEvents") || g.Has("contextHooks.beforeInference.inject.system") {
		t.Errorf("changing DeniedByDefault's slice changed the policy: %v", g.Effective)
	}
}

func TestDenialReasons(t *testing.T) {
	ad := parse(t, `{"pushEvents":true,"modelInfo":true,"inferenceRequest":true,"channels":{"register":true,"publish":true},"contextHooks":{"beforeInference":{"inject":{"system":true,"afterUser":true}}}}`, true)
	implemented := []string{"tools", "pushEvents", "modelInfo", "channels.register", "contextHooks.beforeInference.inject.system", "contextHooks.beforeInference.inject.afterUser"}
	g := Compute(ad, implemented, Policy{Disable: []string{"modelInfo"}, Enable: []string{"tools", "pushEvents", "modelInfo", "contextHooks.beforeInference.inject.afterUser"}})
	want := []Denial{
		{"channels.publish", DenialNotImplemented},
		{"channels.register", DenialPolicy},
		{"contextHooks.beforeInference.inject.system", DenialDefault},
		{"inferenceRequest", DenialNotImplemented},
		{"inferenceRequest.streaming", DenialNotImplemented},
		{"modelInfo", DenialPolicy},
	}
	if diff := cmp.Diff(want, g.Denied); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"contextHooks.beforeInference.inject.afterUser", "pushEvents", "tools"}, g.Effective); diff != "" {
		t.Errorf("effective (-want +got):\n%s", diff)
	}
	if got := g.DeniedFor(DenialNotImplemented); !cmp.Equal(got, []string{"channels.publish", "inferenceRequest", "inferenceRequest.streaming"}) {
		t.Errorf("DeniedFor(not implemented) = %v", got)
	}
	if got := g.DeniedPaths(); len(got) != len(want) {
		t.Errorf("DeniedPaths = %v", got)
	}
	if got := (Grant{}).DeniedPaths(); got == nil {
		t.Error("DeniedPaths of nothing is nil; the policy message must carry []")
	}
}

func TestGrantable(t *testing.T) {
	impl := []string{"tools", "pushEvents", "channels.register", "contextHooks.beforeInference.inject.system"}
	for _, tc := range []struct {
		path string
		pol  Policy
		want bool
	}{
		{"pushEvents", Policy{}, true},
		{"channels.incoming", Policy{}, false}, // not implemented
		{"channels.bogus", Policy{}, false},    // not a path
		{"channels.register", Policy{Disable: []string{"channels"}}, false},
		{"channels.register", Policy{Enable: []string{"tools"}}, false},
		{"channels.register", Policy{Enable: []string{"channels.*"}}, true},
		{"contextHooks.beforeInference.inject.system", Policy{}, false},
		{"contextHooks.beforeInference.inject.system", Policy{Enable: []string{"contextHooks.beforeInference.inject.*"}}, true},
	} {
		if got := Grantable(tc.path, impl, tc.pol); got != tc.want {
			t.Errorf("Grantable(%s, %+v) = %v, want %v", tc.path, tc.pol, got, tc.want)
		}
	}
}

func TestWithheld(t *testing.T) {
	ad := parse(t, `{"pushEvents":true,"channels":{"publish":true},"featureSets":{
		"a":{"description":"a","uses":["pushEvents"]},
		"b":{"description":"b","uses":["channels.publish"]}}}`, true)
	g := Compute(ad, []string{"tools", "pushEvents"}, Policy{}).Withheld()
	if len(g.Effective) != 0 || g.Effective == nil {
		t.Errorf("effective = %#v, want empty and not nil", g.Effective)
	}
	want := []Denial{{"channels.publish", DenialNotImplemented}, {"pushEvents", DenialNotEstablished}, {"tools", DenialNotEstablished}}
	if diff := cmp.Diff(want, g.Denied); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
	wantFS := []FeatureSetState{
		{Name: "a", State: StateDisabled, Reason: ReasonPolicyNotEstablished},
		{Name: "b", State: StateDisabled, Reason: ReasonCapabilityDenied, Missing: []string{"channels.publish"}},
	}
	if diff := cmp.Diff(wantFS, g.FeatureSets); diff != "" {
		t.Errorf("feature sets (-want +got):\n%s", diff)
	}
}

func TestPolicyNotes(t *testing.T) {
	pol := Policy{
		Enable:  []string{"pushEvents", "channels.publish", "channels.*", "nope", "contextHooks.*", "*"},
		Disable: []string{"channels", "channels.typo", "contextHooks.beforeInference.inject"},
	}
	got := pol.Notes([]string{"tools", "pushEvents", "channels.register"})
	want := []PatternNote{
		{Pattern: "channels.publish", Problem: PatternNotImplemented, Paths: []string{"channels.publish"}},
		{Pattern: "nope", Problem: PatternUnknown},
		{Pattern: "contextHooks.*", Problem: PatternUnknown},
		{Disable: true, Pattern: "channels.typo", Problem: PatternUnknown},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestOutcomeEstablished(t *testing.T) {
	for o, want := range map[PolicyOutcome]bool{
		OutcomeAccepted: true, OutcomeDegraded: true, OutcomeNotification: true,
		OutcomeRefused: false, OutcomeUnanswered: false,
	} {
		if o.Established() != want {
			t.Errorf("%s.Established() = %v", o, !want)
		}
	}
}
