package grant

import "slices"

// PatternProblem says why a policy pattern can grant nothing here.
type PatternProblem string

// Pattern problems.
const (
	// PatternUnknown: the pattern matches no capability path of the
	// vocabulary (a typo, or a path from a newer specification).
	PatternUnknown PatternProblem = "unknown"
	// PatternNotImplemented: the pattern matches only paths this host
	// does not implement, so it grants nothing.
	PatternNotImplemented PatternProblem = "not_implemented"
)

// PatternNote is one policy pattern that can grant (or, for Disable, deny)
// nothing, and why.
type PatternNote struct {
	// Disable is true for a Disable pattern, false for an Enable one.
	Disable bool
	Pattern string
	Problem PatternProblem
	// Paths are the vocabulary paths the pattern matches, for
	// PatternNotImplemented.
	Paths []string
}

// Notes returns the patterns of p that do nothing here, in list order
// (Enable, then Disable): an Enable pattern that matches no capability
// path, or only paths this host does not implement, and a Disable pattern
// that matches no capability path nor any path's ancestor. A caller shows
// them to whoever wrote the policy, so no pattern is silently ignored.
func (p Policy) Notes(implemented []string) []PatternNote {
	var out []PatternNote
	for _, pat := range p.Enable {
		var matched []string
		for _, v := range vocabulary {
			if Match(pat, v) {
				matched = append(matched, v)
			}
		}
		switch {
		case len(matched) == 0:
			out = append(out, PatternNote{Pattern: pat, Problem: PatternUnknown})
		case !slices.ContainsFunc(matched, func(v string) bool { return slices.Contains(implemented, v) }):
			out = append(out, PatternNote{Pattern: pat, Problem: PatternNotImplemented, Paths: matched})
		}
	}
	for _, pat := range p.Disable {
		if !slices.ContainsFunc(vocabulary[:], func(v string) bool { return coversAny([]string{pat}, v) }) {
			out = append(out, PatternNote{Disable: true, Pattern: pat, Problem: PatternUnknown})
		}
	}
	return out
}
