// Package advert builds an experimental.mcpl advertisement from capability
// paths: the one builder the host (what it implements) and the server SDK
// (what a server can do) share, so the two always say a set of paths the
// same way, as the other side's parser (grant.ParseAdvertisement) reads it.
package advert

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/ordered"
)

// Marshal returns an experimental.mcpl advertisement (SPEC
// §5.1): "version", then each of paths as a nested member in the order
// given, then "featureSets" (when it is not nil, as it is). It is the one
// builder for both sides: the host's advertisement of what it implements,
// and a server's of what it can do.
//
// It says what paths name, no more and no less: true is shorthand for
// every leaf beneath, so a capability that has sub-capabilities
// ("inferenceRequest" over "inferenceRequest.streaming") is written as an
// object whose sub-capabilities are each true or false, never as a bare
// true. Since an object advertises its own path, a sub-capability whose
// parent capability is not in paths cannot be said, and is left out (see
// Orphan). Members that are only groupings ("channels", "contextHooks")
// hold just the leaves named. "tools", MCP's own capability, and paths
// outside the vocabulary are left out.
func Marshal(version string, paths []string, featureSets json.RawMessage) json.RawMessage {
	root := &ordered.Object{}
	root.Set("version", version)
	for _, p := range paths {
		if p == "tools" || !grant.Known(p) || Orphan(p, paths) != "" {
			continue
		}
		n := root
		segs := strings.Split(p, ".")
		for i, seg := range segs {
			prefix := strings.Join(segs[:i+1], ".")
			subs := children(prefix)
			if len(subs) == 0 {
				n.Set(seg, true) // a leaf: the last segment
				break
			}
			next, ok := n.Get(seg).(*ordered.Object)
			if !ok {
				next = &ordered.Object{}
				n.Set(seg, next)
				if grant.Known(prefix) {
					// A capability object: each sub-capability said, true
					// or false.
					for _, sub := range subs {
						if strings.Count(sub, ".") == i+1 {
							next.Set(sub[len(prefix)+1:], false)
						}
					}
				}
			}
			n = next
		}
	}
	if featureSets != nil {
		root.Set("featureSets", featureSets)
	}
	b, err := json.Marshal(root)
	if err != nil {
		panic("advert: encoding an advertisement: " + err.Error()) // strings, bools and valid raw JSON only
	}
	return b
}

// Orphan returns the capability above path that paths leave out, or "":
// a sub-capability ("inferenceRequest.streaming") cannot be advertised
// without its parent capability ("inferenceRequest"), since the object
// that carries it advertises the parent too.
func Orphan(path string, paths []string) string {
	for i := len(path) - 1; i > 0; i-- {
		if path[i] == '.' && grant.Known(path[:i]) && !slices.Contains(paths, path[:i]) {
			return path[:i]
		}
	}
	return ""
}

// children returns the vocabulary paths beneath path, in vocabulary order.
func children(path string) []string {
	var out []string
	for _, p := range grant.Vocabulary() {
		if strings.HasPrefix(p, path+".") {
			out = append(out, p)
		}
	}
	return out
}
