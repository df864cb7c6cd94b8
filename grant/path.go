package grant

import (
	"slices"
	"strings"
)

// vocabulary is every capability path this host understands (SPEC §6.2),
// parents before their sub-capabilities.
var vocabulary = [...]string{
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

// deniedByDefault are the paths granted only when an enable pattern names
// them (SPEC §13.4, RFC-010): a server's text placed in the context around
// the user's is an injection risk.
var deniedByDefault = [...]string{
	"contextHooks.beforeInference.inject.system",
	"contextHooks.beforeInference.inject.beforeUser",
	"contextHooks.beforeInference.inject.afterUser",
}

// Vocabulary returns every capability path this host understands (SPEC
// §6.2), parents before their sub-capabilities. A path outside it is never
// granted. The slice is the caller's own.
func Vocabulary() []string { return slices.Clone(vocabulary[:]) }

// DeniedByDefault returns the paths granted only when a Policy.Enable
// pattern matches them: the context injections. The slice is the caller's
// own.
func DeniedByDefault() []string { return slices.Clone(deniedByDefault[:]) }

// Known reports whether path is in the vocabulary.
func Known(path string) bool { return slices.Contains(vocabulary[:], path) }

// children returns the vocabulary paths beneath path, in vocabulary order.
func children(path string) []string {
	var out []string
	for _, p := range vocabulary {
		if len(p) > len(path) && p[len(path)] == '.' && strings.HasPrefix(p, path) {
			out = append(out, p)
		}
	}
	return out
}

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
