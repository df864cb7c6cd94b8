// Package retryafter reads how long a provider asks a client to wait
// before trying again, from an HTTP error response's headers, for
// model.Error.RetryAfter.
//
// Decisions:
//
//   - retry-after-ms (milliseconds, which OpenAI and Anthropic send
//     beside Retry-After, and which both official SDKs prefer) is read
//     first; then Retry-After, as delta-seconds or as an HTTP-date
//     (RFC 9110 §10.2.3), a date being taken relative to now.
//   - A value that is absent, unparsable, negative, not finite, or a date
//     already past is no answer (0); an unusable retry-after-ms falls
//     back to Retry-After.
//   - The wait is capped at Max: a provider asking for more is still
//     asking to wait, and the agent layer decides what to do with a long
//     wait; a cap keeps a broken header from parking an agent for hours.
package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Max is the longest wait Parse returns.
const Max = 10 * time.Minute

// Parse returns the wait h asks for, 0 when it asks for none (see the
// package doc).
func Parse(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return capped(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && !math.IsInf(s, 0) {
			return capped(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, Max)
		}
	}
	return 0
}

// capped is d, in nanoseconds, as a Duration no longer than Max.
func capped(d float64) time.Duration {
	if d >= float64(Max) {
		return Max
	}
	return time.Duration(d)
}
