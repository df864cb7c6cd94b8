package config_test

import (
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
)

// inboxRetention is a duration more than 0, 168h when absent.
func TestInboxRetention(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want time.Duration
		err  string
	}{
		{src: "", want: config.DefaultInboxRetention},
		{src: "inboxRetention: 48h\n", want: 48 * time.Hour},
		{src: "inboxRetention: 30m\n", want: 30 * time.Minute},
		{src: "inboxRetention: 0s\n", err: `c.yaml:1: inboxRetention: must be more than 0`},
		{src: "inboxRetention: 7d\n", err: `c.yaml:1: inboxRetention: "7d" is not a duration (write it like 5s or 2m30s)`},
		{src: "inboxRetention: -1h\n", err: `c.yaml:1: inboxRetention: "-1h" is negative; a duration must be 0 or more`},
	} {
		cfg, err := parse(t, tc.src+"servers: []\n", t.TempDir())
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: err = %v\nwant %s", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if cfg.InboxRetention != tc.want {
			t.Errorf("%q: InboxRetention = %v, want %v", tc.src, cfg.InboxRetention, tc.want)
		}
	}
	if got := (config.Config{}).WithDefaults().InboxRetention; got != config.DefaultInboxRetention {
		t.Errorf("WithDefaults gives InboxRetention %v, want %v", got, config.DefaultInboxRetention)
	}
}
