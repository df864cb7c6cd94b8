package session_test

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
)

func TestHostAdvertisementDefault(t *testing.T) {
	got := session.HostAdvertisement(session.DefaultImplemented())
	want := `{"version":"0.5","featureSets":true}`
	if !jsonEqual(got, json.RawMessage(want)) {
		t.Errorf("HostAdvertisement(DefaultImplemented) = %s, want %s", got, want)
	}
}

// TestHostAdvertisementExact: the host advertises exactly what it
// implements, read back by the same rules a server reads it (SPEC §5.1:
// true at any level means every leaf beneath), no more and no less. MCP's
// own "tools" is not MCPL's to advertise.
func TestHostAdvertisementExact(t *testing.T) {
	check := func(impl []string) {
		t.Helper()
		raw := session.HostAdvertisement(impl)
		ad, err := grant.ParseAdvertisement(raw, false)
		if err != nil {
			t.Fatalf("HostAdvertisement(%v) = %s: %v", impl, raw, err)
		}
		// A sub-capability cannot be advertised without its parent (the
		// object that carries it advertises the parent too): without the
		// parent implemented, it is left out.
		want := []string{}
		for _, p := range impl {
			if p == "inferenceRequest.streaming" && !slices.Contains(impl, "inferenceRequest") {
				continue
			}
			if p != "tools" && !slices.Contains(want, p) {
				want = append(want, p)
			}
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, ad.Capabilities); diff != "" {
			t.Errorf("HostAdvertisement(%v) = %s reads back as (-implemented +advertised):\n%s", impl, raw, diff)
		}
		if len(ad.Ignored) != 0 {
			t.Errorf("HostAdvertisement(%v) = %s advertises unknown %v", impl, raw, ad.Ignored)
		}
		if ad.Version != "0.5" {
			t.Errorf("version %q", ad.Version)
		}
	}
	check(nil)
	check(grant.Vocabulary())
	check([]string{"tools"})
	for _, tc := range []struct {
		impl []string
		want string
	}{
		{[]string{"inferenceRequest"}, `{"version":"0.5","featureSets":true,"inferenceRequest":{"streaming":false}}`},
		{[]string{"inferenceRequest", "inferenceRequest.streaming"}, `{"version":"0.5","featureSets":true,"inferenceRequest":{"streaming":true}}`},
		{[]string{"inferenceRequest.streaming", "inferenceRequest"}, `{"version":"0.5","featureSets":true,"inferenceRequest":{"streaming":true}}`},
		{[]string{"inferenceRequest.streaming", "modelInfo"}, `{"version":"0.5","featureSets":true,"modelInfo":true}`},
		{[]string{"contextHooks.beforeInference.observe"}, `{"version":"0.5","featureSets":true,"contextHooks":{"beforeInference":{"observe":true}}}`},
	} {
		if got := session.HostAdvertisement(tc.impl); !jsonEqual(got, json.RawMessage(tc.want)) {
			t.Errorf("HostAdvertisement(%v) = %s, want %s", tc.impl, got, tc.want)
		}
	}
	vocab := grant.Vocabulary()
	for i, a := range vocab {
		check([]string{a})
		for _, b := range vocab[i+1:] {
			check([]string{a, b})
			check([]string{b, a})
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var impl []string
		for _, p := range vocab {
			if r.IntN(2) == 0 {
				impl = append(impl, p)
			}
		}
		r.Shuffle(len(impl), func(i, j int) { impl[i], impl[j] = impl[j], impl[i] })
		check(impl)
	}
}
