package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/config"
)

// channels.maxDescriptorBytes and channels.maxTotalDescriptorBytes: bounds
// in bytes, more than 0, absent meaning the host's defaults (0 here).
func TestChannelDescriptorLimits(t *testing.T) {
	s, err := one(t, "    channels: {maxDescriptorBytes: 1024, maxTotalDescriptorBytes: 1_048_576}\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Channels.MaxDescriptorBytes != 1024 || s.Channels.MaxTotalDescriptorBytes != 1<<20 {
		t.Errorf("limits = %d, %d; want 1024, 1048576", s.Channels.MaxDescriptorBytes, s.Channels.MaxTotalDescriptorBytes)
	}
	s, err = one(t, "    channels: {subscription: auto}\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Channels.MaxDescriptorBytes != 0 || s.Channels.MaxTotalDescriptorBytes != 0 {
		t.Errorf("absent limits = %d, %d; want 0, 0 (the defaults)", s.Channels.MaxDescriptorBytes, s.Channels.MaxTotalDescriptorBytes)
	}

	for _, tc := range []struct{ extra, want string }{
		{"    channels: {maxDescriptorBytes: 0}\n", `c.yaml:4: servers[0].channels.maxDescriptorBytes: must be a number of bytes more than 0, not 0 (leave it out for 65536)`},
		{"    channels: {maxTotalDescriptorBytes: -5}\n", `c.yaml:4: servers[0].channels.maxTotalDescriptorBytes: must be a number of bytes more than 0, not -5 (leave it out for 16777216)`},
		{"    channels: {maxDescriptorBytes: 64KiB}\n", `c.yaml:4: servers[0].channels.maxDescriptorBytes: must be a whole number`},
		{"    channels: {maxDescriptorBytes: \"1024\"}\n", `c.yaml:4: servers[0].channels.maxDescriptorBytes: must be a whole number without quotes`},
	} {
		_, err := one(t, tc.extra)
		var cerr *config.Error
		if !errors.As(err, &cerr) {
			t.Errorf("%q: err = %v, want a config.Error", tc.extra, err)
			continue
		}
		if !strings.HasPrefix(cerr.Error(), tc.want) {
			t.Errorf("%q:\n got %s\nwant %s", tc.extra, cerr.Error(), tc.want)
		}
	}
}
