package server

import (
	"encoding/json"

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
