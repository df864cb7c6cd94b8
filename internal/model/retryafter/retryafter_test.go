package retryafter

import (
	"net/http"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fraction", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"zero", map[string]string{"Retry-After": "0"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"date", map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:00:30 GMT"}, 30 * time.Second},
		{"date past", map[string]string{"Retry-After": "Sun, 01 Mar 2026 11:00:00 GMT"}, 0},
		{"date far", map[string]string{"Retry-After": "Mon, 02 Mar 2026 12:00:00 GMT"}, Max},
		{"capped", map[string]string{"Retry-After": "86400"}, Max},
		{"ms", map[string]string{"retry-after-ms": "250"}, 250 * time.Millisecond},
		{"ms first", map[string]string{"retry-after-ms": "1500", "Retry-After": "2"}, 1500 * time.Millisecond},
		{"bad ms falls back", map[string]string{"retry-after-ms": "x", "Retry-After": "2"}, 2 * time.Second},
		{"ms capped", map[string]string{"retry-after-ms": "1e12"}, Max},
		{"inf", map[string]string{"Retry-After": "+Inf"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			if got := Parse(h, now); got != tc.want {
				t.Errorf("Parse(%v) = %v, want %v", tc.headers, got, tc.want)
			}
		})
	}
	if got := Parse(nil, now); got != 0 {
		t.Errorf("Parse(nil) = %v", got)
	}
}
