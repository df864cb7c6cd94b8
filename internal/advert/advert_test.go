package advert

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpl-go/mcpl/grant"
)

func TestMarshal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		fs    json.RawMessage
		want  string
	}{
		{"nothing but tools", []string{"tools"}, json.RawMessage(`true`),
			`{"version":"0.5","featureSets":true}`},
		{"leaves in the order given", []string{"channels.publish", "pushEvents", "channels.register"}, nil,
			`{"version":"0.5","channels":{"publish":true,"register":true},"pushEvents":true}`},
		{"a capability with sub-capabilities is an object", []string{"inferenceRequest"}, nil,
			`{"version":"0.5","inferenceRequest":{"streaming":false}}`},
		{"a sub-capability without its parent cannot be said", []string{"inferenceRequest.streaming", "modelInfo"}, nil,
			`{"version":"0.5","modelInfo":true}`},
		{"sub-capability then parent", []string{"inferenceRequest.streaming", "inferenceRequest"}, nil,
			`{"version":"0.5","inferenceRequest":{"streaming":true}}`},
		{"parent then sub-capability", []string{"inferenceRequest", "inferenceRequest.streaming"}, nil,
			`{"version":"0.5","inferenceRequest":{"streaming":true}}`},
		{"depth four", []string{"contextHooks.beforeInference.inject.beforeUser", "contextHooks.beforeInference.observe"}, nil,
			`{"version":"0.5","contextHooks":{"beforeInference":{"inject":{"beforeUser":true},"observe":true}}}`},
		{"unknown paths are left out", []string{"channels.observe", "toolLifecycle", "modelInfo"}, json.RawMessage(`{"a":{"description":"d","uses":["modelInfo"]}}`),
			`{"version":"0.5","modelInfo":true,"featureSets":{"a":{"description":"d","uses":["modelInfo"]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(Marshal("0.5", tc.paths, tc.fs)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// What the builder writes, the parser reads back as exactly the paths
// given (less a sub-capability without its parent), for a spread of the
// vocabulary's subsets (every 97th of them, in every nesting).
func TestMarshalAdvertisementRoundTrip(t *testing.T) {
	vocab := grant.Vocabulary()
	for mask := 0; mask < 1<<len(vocab); mask += 97 {
		var paths []string
		for i, p := range vocab {
			if mask>>i&1 == 1 {
				paths = append(paths, p)
			}
		}
		want := map[string]bool{}
		for _, p := range paths {
			if p == "tools" {
				continue
			}
			if p != "inferenceRequest.streaming" || slices.Contains(paths, "inferenceRequest") {
				want[p] = true
			}
		}
		ad, err := grant.ParseAdvertisement(Marshal("0.5", paths, nil), false)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), ad.Capabilities, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("paths %v: (-want +parsed):\n%s", paths, diff)
		}
		if len(ad.Ignored) != 0 {
			t.Fatalf("paths %v: ignored %v", paths, ad.Ignored)
		}
	}
}
