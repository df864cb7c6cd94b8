package grant

import (
	"slices"
	"strings"
)

// Policy is host policy for one server, from configuration.
type Policy struct {
	// Enable, when not nil, is an allowlist of capability patterns: only
	// paths one of them matches can be granted. Nil constrains nothing,
	// except that the DeniedByDefault paths are granted only when an Enable
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

// State is a declared feature set's state under the grant.
type State string

// Feature-set states.
const (
	StateEnabled  State = "enabled"
	StateDisabled State = "disabled"
)

// Reason says why a feature set is disabled (SPEC §6.6).
type Reason string

// Reasons a feature set is disabled.
const (
	ReasonInvalidUses      Reason = "invalid_uses"      // uses absent, empty or unrecognized
	ReasonDisabledByPolicy Reason = "disabled"          // named by DisableFeatureSets
	ReasonNotSelected      Reason = "not_selected"      // left out of EnableFeatureSets
	ReasonCapabilityDenied Reason = "capability_denied" // a path its uses needs is not granted
	// ReasonPolicyNotEstablished: the policy exchange did not establish a
	// grant (refused, unanswered), so MCPL's privileged surface is off.
	ReasonPolicyNotEstablished Reason = "policy_not_established"
)

// FeatureSetState is what the grant makes of one declared feature set.
type FeatureSetState struct {
	Name   string
	State  State
	Reason Reason // empty when enabled
	// Missing lists the uses not granted, for ReasonCapabilityDenied.
	Missing []string
	// Invalid says what is wrong with the declaration, for
	// ReasonInvalidUses (FeatureSet.Invalid).
	Invalid string
}

// DenialReason says why an advertised capability path is not granted.
type DenialReason string

// Reasons a path is denied.
const (
	// DenialNotImplemented: this host has no consumer for the path, so it
	// neither advertises nor grants it (a grant is a promise, SPEC §5.4).
	DenialNotImplemented DenialReason = "not_implemented"
	// DenialPolicy: host policy disables the path, or its Enable allowlist
	// leaves it out.
	DenialPolicy DenialReason = "policy"
	// DenialDefault: a context injection no Enable pattern names.
	DenialDefault DenialReason = "denied_by_default"
	// DenialNotEstablished: the policy exchange established no grant.
	DenialNotEstablished DenialReason = "policy_not_established"
)

// Denial is one advertised path left out of the grant, and why.
type Denial struct {
	Path   string
	Reason DenialReason
}

// Grant is the effective grant for one connection.
type Grant struct {
	// Effective is the sole allowlist: every path not in it is denied.
	Effective []string
	// Denied lists the advertised paths left out of Effective, with why,
	// in path order: diagnostic only, it takes no part in any decision.
	Denied []Denial
	// FeatureSets holds each declared feature set's state, in name order.
	FeatureSets []FeatureSetState
}

// Compute returns the effective grant: the paths the server advertised
// that this host implements, intersected with policy. Implemented lists the
// capability paths this host supports; a path outside it is never granted,
// whatever is advertised or enabled.
func Compute(ad Advertisement, implemented []string, pol Policy) Grant {
	g := Grant{Effective: []string{}, Denied: []Denial{}}
	for _, p := range ad.Capabilities {
		if why := denial(p, implemented, pol); why != "" {
			g.Denied = append(g.Denied, Denial{Path: p, Reason: why})
		} else {
			g.Effective = append(g.Effective, p)
		}
	}
	for _, fs := range ad.FeatureSets {
		g.FeatureSets = append(g.FeatureSets, featureSetState(fs, g, pol))
	}
	return g
}

// Grantable reports whether the policy can ever grant path, on any
// connection, whatever the server advertises: it is in the vocabulary, this
// host implements it, and pol allows it. A request needing a path that is
// not grantable can be refused before the policy exchange settles.
func Grantable(path string, implemented []string, pol Policy) bool {
	return denial(path, implemented, pol) == ""
}

// denial says why p is not granted, or "" when it is.
func denial(p string, implemented []string, pol Policy) DenialReason {
	switch {
	case !Known(p), !slices.Contains(implemented, p):
		return DenialNotImplemented
	case coversAny(pol.Disable, p):
		return DenialPolicy
	case slices.Contains(deniedByDefault[:], p):
		if !matchAny(pol.Enable, p) {
			return DenialDefault
		}
	case pol.Enable != nil && !matchAny(pol.Enable, p):
		return DenialPolicy
	}
	return ""
}

func featureSetState(fs FeatureSet, g Grant, pol Policy) FeatureSetState {
	st := FeatureSetState{Name: fs.Name, State: StateDisabled}
	switch {
	case fs.Invalid != "":
		st.Reason, st.Invalid = ReasonInvalidUses, fs.Invalid
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

// Withheld returns g as it stands when the policy exchange established no
// grant: nothing effective, every path that would have been granted denied
// as DenialNotEstablished, and every feature set that would have been
// enabled disabled as ReasonPolicyNotEstablished.
func (g Grant) Withheld() Grant {
	off := Grant{Effective: []string{}, Denied: slices.Clone(g.Denied)}
	for _, p := range g.Effective {
		off.Denied = append(off.Denied, Denial{Path: p, Reason: DenialNotEstablished})
	}
	slices.SortFunc(off.Denied, func(a, b Denial) int { return strings.Compare(a.Path, b.Path) })
	for _, fs := range g.FeatureSets {
		if fs.State == StateEnabled {
			fs.State, fs.Reason = StateDisabled, ReasonPolicyNotEstablished
		}
		off.FeatureSets = append(off.FeatureSets, fs)
	}
	return off
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

// Clone returns a copy of g that shares no memory with it.
func (g Grant) Clone() Grant {
	c := Grant{Effective: slices.Clone(g.Effective), Denied: slices.Clone(g.Denied)}
	if g.FeatureSets != nil {
		c.FeatureSets = make([]FeatureSetState, len(g.FeatureSets))
		for i, fs := range g.FeatureSets {
			fs.Missing = slices.Clone(fs.Missing)
			c.FeatureSets[i] = fs
		}
	}
	return c
}

// Has reports whether path is granted. It is an exact lookup: a parent
// path grants only itself.
func (g Grant) Has(path string) bool { return slices.Contains(g.Effective, path) }

// DeniedPaths returns the denied paths, in path order: the policy
// message's deniedCapabilities. It is never nil.
func (g Grant) DeniedPaths() []string { return g.deniedWhere(func(DenialReason) bool { return true }) }

// DeniedFor returns the denied paths whose reason is one of reasons, in
// path order. It is never nil.
func (g Grant) DeniedFor(reasons ...DenialReason) []string {
	return g.deniedWhere(func(r DenialReason) bool { return slices.Contains(reasons, r) })
}

func (g Grant) deniedWhere(keep func(DenialReason) bool) []string {
	out := []string{}
	for _, d := range g.Denied {
		if keep(d.Reason) {
			out = append(out, d.Path)
		}
	}
	return out
}

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

// Enabled returns the names of the enabled feature sets, for the policy
// message's enabled list: every declared set is in exactly one of Enabled
// and Disabled. It is never nil.
func (g Grant) Enabled() []string { return g.namesIn(StateEnabled) }

// Disabled returns the names of the disabled feature sets, for the policy
// message's disabled list. It is never nil.
func (g Grant) Disabled() []string { return g.namesIn(StateDisabled) }

func (g Grant) namesIn(state State) []string {
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
