// Package grant computes what an MCPL server may do: its capability paths,
// the effective grant (the server's advertisement as this host understands
// it, intersected with host policy) and the feature sets derived from it.
// It is pure: no I/O, no clocks, no goroutines (SPEC §5.4, §6; RFC-002).
package grant

import (
	"slices"
	"strings"
)

// Vocabulary is every capability path this host understands (SPEC §6.2).
// A path outside it is never granted.
var Vocabulary = []string{
	"pushEvents",
	"tools",
	"modelInfo",
	"inferenceRequest",
	"inferenceRequest.streaming",
	"inferenceLifecycle",
	"contextHooks.beforeInference.observe",
	"contextHooks.beforeInference.inject.system",
	"contextHooks.beforeInference.inject.beforeUser",
	"contextHooks.beforeInference.inject.afterUser",
	"channels.register",
	"channels.lifecycle",
	"channels.publish",
	"channels.incoming",
	"channels.streaming",
	"channels.acknowledge",
	"channels.typing",
}

// DeniedByDefault are granted only when host policy enables them by an
// enable pattern (SPEC §13.4, RFC-010): a server's text placed in the
// context around the user's is an injection risk.
var DeniedByDefault = []string{
	"contextHooks.beforeInference.inject.system",
	"contextHooks.beforeInference.inject.beforeUser",
	"contextHooks.beforeInference.inject.afterUser",
}

// Known reports whether path is in the vocabulary.
func Known(path string) bool { return slices.Contains(Vocabulary, path) }

// Match reports whether pattern matches path (SPEC §5.4): both are
// dot-separated, they must have the same number of segments, and each
// pattern segment is either "*", matching exactly one segment, or equal to
// the path's. So "channels.*" matches "channels.publish" but not
// "channels.publish.x", a bare "*" matches only one-segment paths, and a
// bare parent matches only itself.
func Match(pattern, path string) bool {
	for {
		pseg, prest, pmore := strings.Cut(pattern, ".")
		seg, rest, more := strings.Cut(path, ".")
		if pseg != "*" && pseg != seg {
			return false
		}
		if pmore != more {
			return false
		}
		if !more {
			return true
		}
		pattern, path = prest, rest
	}
}

// matchAny reports whether any pattern matches path.
func matchAny(patterns []string, path string) bool {
	for _, p := range patterns {
		if Match(p, path) {
			return true
		}
	}
	return false
}

// coversAny reports whether any pattern matches path or one of its
// ancestors. Host policy's disable list reads this way: disabling
// "channels" denies every channels leaf. Reading a deny widely can only
// under-grant, which is the safe direction.
func coversAny(patterns []string, path string) bool {
	for p := path; ; {
		if matchAny(patterns, p) {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}
