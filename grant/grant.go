package grant

import (
	"slices"
	"strings"
)

// Policy is host policy for one server, from configuration.
type Policy struct {
	// Enable, when not nil, is an allowlist of capability patterns: only
	// paths one of them matches can be granted. Nil constrains nothing,
	// except that DeniedByDefault paths are granted only when an Enable
	// pattern matches them.
	Enable []string
	// Disable lists capability patterns that are never granted. A pattern
	// also covers the paths beneath it ("channels" disables every channels
	// path). Disable wins over Enable.
	Disable []string
	// EnableFeatureSets, when not nil, is an allowlist of feature-set
	// names: a declared set it does not name is disabled as not_selected.
	// Naming a set never supplies capabilities its uses lacks.
	EnableFeatureSets []string
	// DisableFeatureSets always subtracts.
	DisableFeatureSets []string
}

// Feature-set states and the reasons a set is disabled.
const (
	StateEnabled  = "enabled"
	StateDisabled = "disabled"

	ReasonInvalidUses      = "invalid_uses"      // uses absent, empty or unrecognized
	ReasonDisabledByPolicy = "disabled"          // named by DisableFeatureSets
	ReasonNotSelected      = "not_selected"      // left out of EnableFeatureSets
	ReasonCapabilityDenied = "capability_denied" // a path its uses needs is not granted
)

// FeatureSetState is what the grant makes of one declared feature set.
type FeatureSetState struct {
	Name   string
	State  string
	Reason string // empty when enabled
	// Missing lists the uses not granted, for ReasonCapabilityDenied.
	Missing []string
}

// Grant is the effective grant for one connection.
type Grant struct {
	// Effective is the sole allowlist: every path not in it is denied.
	Effective []string
	// Denied lists advertised paths left out of Effective: diagnostic
	// only, it takes no part in any decision.
	Denied []string
	// FeatureSets holds each declared feature set's state, in name order.
	FeatureSets []FeatureSetState
}

// Compute returns the effective grant: the paths the server advertised
// that this host implements, intersected with policy. Implemented lists the
// capability paths this host supports; a path outside it is never granted,
// whatever is advertised or enabled.
func Compute(ad Advertisement, implemented []string, pol Policy) Grant {
	g := Grant{Effective: []string{}, Denied: []string{}}
	for _, p := range ad.Capabilities {
		if allowed(p, implemented, pol) {
			g.Effective = append(g.Effective, p)
		} else {
			g.Denied = append(g.Denied, p)
		}
	}
	for _, fs := range ad.FeatureSets {
		g.FeatureSets = append(g.FeatureSets, featureSetState(fs, g, pol))
	}
	return g
}

func allowed(p string, implemented []string, pol Policy) bool {
	switch {
	case !Known(p), !slices.Contains(implemented, p):
		return false
	case coversAny(pol.Disable, p):
		return false
	case slices.Contains(DeniedByDefault, p):
		return matchAny(pol.Enable, p)
	case pol.Enable != nil:
		return matchAny(pol.Enable, p)
	}
	return true
}

func featureSetState(fs FeatureSet, g Grant, pol Policy) FeatureSetState {
	st := FeatureSetState{Name: fs.Name, State: StateDisabled}
	switch {
	case !fs.UsesValid:
		st.Reason = ReasonInvalidUses
	case MatchFeatureSet(pol.DisableFeatureSets, fs.Name):
		st.Reason = ReasonDisabledByPolicy
	case pol.EnableFeatureSets != nil && !MatchFeatureSet(pol.EnableFeatureSets, fs.Name):
		st.Reason = ReasonNotSelected
	default:
		for _, u := range fs.Uses {
			if !g.Has(u) {
				st.Missing = append(st.Missing, u)
			}
		}
		if len(st.Missing) > 0 {
			st.Reason = ReasonCapabilityDenied
		} else {
			st.State = StateEnabled
		}
	}
	return st
}

// MatchFeatureSet reports whether any pattern matches a feature-set name: a
// pattern is a name, "*" for every set, or "prefix.*" for every set whose
// name starts with "prefix." (SPEC §6.3: "memory.*" is all memory
// features).
func MatchFeatureSet(patterns []string, name string) bool {
	for _, p := range patterns {
		switch {
		case p == "*", p == name:
			return true
		case strings.HasSuffix(p, ".*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*")):
			return true
		}
	}
	return false
}

// Has reports whether path is granted. It is an exact lookup: a parent
// path grants only itself.
func (g Grant) Has(path string) bool { return slices.Contains(g.Effective, path) }

// FeatureSet returns the state of the named feature set, and whether the
// server declared it.
func (g Grant) FeatureSet(name string) (FeatureSetState, bool) {
	for _, fs := range g.FeatureSets {
		if fs.Name == name {
			return fs, true
		}
	}
	return FeatureSetState{}, false
}

// Enabled and Disabled return the feature-set names for featureSets/update:
// every declared set is in exactly one of them.
func (g Grant) Enabled() []string  { return g.namesIn(StateEnabled) }
func (g Grant) Disabled() []string { return g.namesIn(StateDisabled) }

func (g Grant) namesIn(state string) []string {
	out := []string{}
	for _, fs := range g.FeatureSets {
		if fs.State == state {
			out = append(out, fs.Name)
		}
	}
	return out
}

// CheckPolicyMessage is the receiving side's check of a featureSets/update
// (SPEC §5.4): a path in both effectiveCapabilities and deniedCapabilities
// makes the message malformed, and it must be rejected whole.
func CheckPolicyMessage(effective, denied []string) error {
	for _, p := range effective {
		if slices.Contains(denied, p) {
			return &MalformedPolicyError{Path: p}
		}
	}
	return nil
}

// MalformedPolicyError names a path that a policy message both grants and
// denies.
type MalformedPolicyError struct{ Path string }

func (e *MalformedPolicyError) Error() string {
	return "malformed policy: " + e.Path + " is in both effectiveCapabilities and deniedCapabilities"
}
