package server

import (
	"bytes"
	"encoding/json"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/protocol"
)

// advertisement builds experimental.mcpl (SPEC §5.1) with
// grant.MarshalAdvertisement, the one builder host and servers share: each
// capability path as a nested member, in the order declared, then
// featureSets in the 0.5 record form when any is declared, in the order
// declared too, so the advertisement reads as the server's author wrote it.
func advertisement(caps []string, sets []FeatureSet) json.RawMessage {
	var fs json.RawMessage
	if len(sets) > 0 {
		var b bytes.Buffer
		b.WriteByte('{')
		for i, set := range sets {
			if i > 0 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(set.Name)
			decl, _ := json.Marshal(struct {
				Description string   `json:"description"`
				Uses        []string `json:"uses"`
			}{set.Description, set.Uses})
			b.Write(name)
			b.WriteByte(':')
			b.Write(decl)
		}
		b.WriteByte('}')
		fs = b.Bytes()
	}
	return grant.MarshalAdvertisement(protocol.MCPLVersion05, caps, fs)
}
