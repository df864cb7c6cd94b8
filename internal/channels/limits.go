package channels

import (
	"encoding/json"
	"fmt"

	"github.com/mcpl-go/mcpl/protocol"
)

// Descriptor bytes (docs/limits.md). A server's descriptors are kept whole
// for as long as they are registered, so what they cost is bounded twice:
// each descriptor, and all of one server's live descriptors together.
//
// What counts is a descriptor's JSON as it was received: the bytes of its
// element of the request's channels (or added, updated) array, whitespace
// and all, which is what the server sent and what it can measure. A
// descriptor given as a value (Register, Changed) counts its JSON encoding.
//
// The total is the sum over the server's registered channels of the bytes
// of the descriptor each was last accepted with: a channel registered
// again, or updated, has its new bytes replace its old ones (the check is
// made with the old ones taken out); a removal, a disconnect, frees them. A
// descriptor refused for either bound is refused alone, itemized, with its
// reason; the rest of the request goes on, and a channel already
// registered keeps the registration it had. A descriptor over the
// per-descriptor bound is never decoded past its id: none of its bytes is
// kept.
//
// The bounds are each server's: ServerConfig.MaxDescriptorBytes and
// MaxTotalDescriptorBytes (the config file's channels.maxDescriptorBytes and
// channels.maxTotalDescriptorBytes), with the defaults below when 0. With
// MaxChannelsPerServer, the defaults bound what one server's
// registrations hold to about 16 MiB, whatever it sends.
const (
	// MaxDescriptorBytes is the default bound on one descriptor's JSON.
	MaxDescriptorBytes = 64 << 10
	// MaxTotalDescriptorBytes is the default bound on the JSON of all one
	// server's registered descriptors together.
	MaxTotalDescriptorBytes = 16 << 20
	// MaxLabelBytes bounds a descriptor's label: it enters texts agents
	// and operators read.
	MaxLabelBytes = 256
	// MaxTypeBytes bounds a descriptor's type: it enters texts too, and
	// is sent back in every channels/open.
	MaxTypeBytes = 128
)

// Reasons a descriptor is refused for its size, as the server reads them.
const (
	reasonLongLabel = "invalid descriptor: the label is longer than 256 bytes"
	reasonLongType  = "invalid descriptor: the type is longer than 128 bytes"
)

func reasonDescriptorSize(n, limit int) string {
	return fmt.Sprintf("descriptor too large: it is %d bytes; this host keeps at most %d bytes per channel descriptor", n, limit)
}

func reasonTotalSize(total, limit int) string {
	return fmt.Sprintf("descriptors too large in total: this server's channel descriptors would total %d bytes; this host keeps at most %d bytes per server", total, limit)
}

// descriptorLimits returns cfg's bounds, the defaults where 0.
func (cfg ServerConfig) descriptorLimits() (perDesc, total int) {
	perDesc, total = cfg.MaxDescriptorBytes, cfg.MaxTotalDescriptorBytes
	if perDesc <= 0 {
		perDesc = MaxDescriptorBytes
	}
	if total <= 0 {
		total = MaxTotalDescriptorBytes
	}
	return perDesc, total
}

// descriptorLimits returns server's bounds (the defaults for a server not
// added).
func (m *machine) descriptorLimits(server string) (perDesc, total int) {
	return m.servers[server].descriptorLimits()
}

// maxDescriptorBytes returns server's per-descriptor bound, read off the
// owner: Serve's decoding refuses a descriptor over it before decoding it.
func (r *Registry) maxDescriptorBytes(server string) int {
	var cfg ServerConfig
	if s := r.server(server); s != nil {
		cfg = s.cfg
	}
	perDesc, _ := cfg.descriptorLimits()
	return perDesc
}

// sizeOf returns the bytes descs[i] counts: sizes[i] as received, or, for
// a descriptor given as a value, its JSON encoding's.
func sizeOf(descs []protocol.ChannelDescriptor, sizes []int, i int) int {
	if i < len(sizes) {
		return sizes[i]
	}
	b, err := json.Marshal(descs[i])
	if err != nil {
		return 0
	}
	return len(b)
}

// checkSize says why a descriptor of n bytes is refused for c's server
// ("" when it is not): over the per-descriptor bound, or taking the
// server's total over its bound, with c's current bytes (c nil: none)
// replaced by n.
func (m *machine) checkSize(server string, c *chanState, n int) string {
	perDesc, total := m.descriptorLimits(server)
	if n > perDesc {
		return reasonDescriptorSize(n, perDesc)
	}
	sum := m.descBytes[server] + n
	if c != nil && c.registered {
		sum -= c.size
	}
	if sum > total {
		return reasonTotalSize(sum, total)
	}
	return ""
}

// setSize makes n the bytes c's registration counts in its server's total.
func (m *machine) setSize(c *chanState, n int) {
	m.descBytes[c.key.Server] += n - c.size
	c.size = n
	if m.descBytes[c.key.Server] == 0 {
		delete(m.descBytes, c.key.Server)
	}
}
