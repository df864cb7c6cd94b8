package session

import (
	"testing"
	"time"
)

// TestBackoff pins the reconnect schedule: 5 s doubling to at most 300 s,
// each delay varied by ±25% (jitter 0 is -25%, 0.5 none, toward 1 +25%).
func TestBackoff(t *testing.T) {
	want := []time.Duration{5, 10, 20, 40, 80, 160, 300, 300, 300}
	for n, base := range want {
		base *= time.Second
		if got := backoff(n, 0, 0, 0.5); got != base {
			t.Errorf("backoff(%d) without jitter = %v, want %v", n, got, base)
		}
		if got, lo := backoff(n, 0, 0, 0), base*3/4; got != lo {
			t.Errorf("backoff(%d) at the low end = %v, want %v", n, got, lo)
		}
		// The high end is open: jitter is in [0,1).
		hi := base * 5 / 4
		if got := backoff(n, 0, 0, 0.999999); got >= hi || got < hi-hi/1000 {
			t.Errorf("backoff(%d) at the high end = %v, want just under %v", n, got, hi)
		}
	}
	// Forever: a long run of failures neither overflows nor passes the cap.
	for _, n := range []int{10, 62, 63, 64, 1000, 1 << 30} {
		if got := backoff(n, 0, 0, 0.5); got != 300*time.Second {
			t.Errorf("backoff(%d) = %v, want the 300s cap", n, got)
		}
	}
}

func TestBackoffConfigured(t *testing.T) {
	for _, tc := range []struct {
		n            int
		initial, max time.Duration
		want         time.Duration
	}{
		{0, 50 * time.Millisecond, 400 * time.Millisecond, 50 * time.Millisecond},
		{1, 50 * time.Millisecond, 400 * time.Millisecond, 100 * time.Millisecond},
		{3, 50 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond},
		{9, 50 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond},
		// A cap that is not a doubling of the start still caps.
		{2, 5 * time.Second, 12 * time.Second, 12 * time.Second},
		// A start above the cap is cut to it.
		{0, time.Minute, 10 * time.Second, 10 * time.Second},
		// Zero fields take the defaults.
		{2, 0, 0, 20 * time.Second},
		{1, 0, 7 * time.Second, 7 * time.Second},
		{7, time.Second, 0, 128 * time.Second},
	} {
		if got := backoff(tc.n, tc.initial, tc.max, 0.5); got != tc.want {
			t.Errorf("backoff(%d, %v, %v) = %v, want %v", tc.n, tc.initial, tc.max, got, tc.want)
		}
	}
}
