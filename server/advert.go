package server

import (
	"encoding/json"
	"slices"

	"github.com/mcpl-go/mcpl/internal/advert"
	"github.com/mcpl-go/mcpl/internal/ordered"
	"github.com/mcpl-go/mcpl/protocol"
)

// advertisement builds experimental.mcpl (SPEC §5.1) with
// advert.Marshal, the one builder host and servers share: each
// capability path as a nested member, in the order declared, then
// featureSets in the 0.5 record form when any is declared, in the order
// declared too, so the advertisement reads as the server's author wrote it.
func advertisement(caps []string, sets []FeatureSet) json.RawMessage {
	var fs json.RawMessage
	if len(sets) > 0 {
		record := &ordered.Object{}
		for _, set := range sets {
			decl := &ordered.Object{}
			decl.Set("description", set.Description)
			decl.Set("uses", set.Uses)
			record.Set(set.Name, decl)
		}
		fs, _ = json.Marshal(record) // strings only
	}
	return advert.Marshal(protocol.MCPLVersion05, caps, fs)
}

// advertised returns the capability paths to advertise: those
// Options.Capabilities declares, then each a handler's setting advertises
// that it does not, in vocabulary order. The caller holds s.mu.
func (s *Server) advertised() []string {
	paths := s.opts.Capabilities
	for _, h := range []struct {
		path string
		set  bool
	}{
		{"channels.streaming", s.outgoing != nil},
		{"channels.acknowledge", s.acknowledge != nil},
		{"channels.typing", s.typing != nil},
	} {
		if h.set && !slices.Contains(paths, h.path) {
			paths = append(slices.Clip(paths), h.path)
		}
	}
	return paths
}
