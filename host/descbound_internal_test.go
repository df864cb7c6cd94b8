package host

import (
	"testing"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/channels"
)

// The config's descriptor bounds reach the registry, and the defaults the
// config documents are the registry's.
func TestChannelConfigDescriptorLimits(t *testing.T) {
	if config.DefaultMaxDescriptorBytes != channels.MaxDescriptorBytes || config.DefaultMaxTotalDescriptorBytes != channels.MaxTotalDescriptorBytes {
		t.Errorf("config's defaults %d, %d; the registry's %d, %d", config.DefaultMaxDescriptorBytes, config.DefaultMaxTotalDescriptorBytes, channels.MaxDescriptorBytes, channels.MaxTotalDescriptorBytes)
	}
	var s config.Server
	s.Channels.MaxDescriptorBytes, s.Channels.MaxTotalDescriptorBytes = 1000, 5000
	if c := channelConfig(s.WithDefaults()); c.MaxDescriptorBytes != 1000 || c.MaxTotalDescriptorBytes != 5000 {
		t.Errorf("channelConfig gives %d, %d; want 1000, 5000", c.MaxDescriptorBytes, c.MaxTotalDescriptorBytes)
	}
}
