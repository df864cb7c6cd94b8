package content

import (
	"fmt"
	"strings"
)

// The markers a block this host can't show reads as, on every lane that
// shows content to an agent (seeds/002, "Blocks the host can't show"). Each
// is one constant or function, read by every lane: what kind of thing the
// block was, and why it isn't shown. They are a contract, pinned verbatim
// by tests. No lane ever puts a block's raw JSON or base64 in an agent's
// history instead.
const (
	MarkerImageNoMediaType = "[Image not shown: its data arrived without a media type.]"
	MarkerImageNoData      = "[Image not shown: it arrived with no usable data or link.]"
	MarkerAudioNoMediaType = "[Audio not shown: its data arrived without a media type.]"
	MarkerAudioNoData      = "[Audio not shown: it arrived with no usable inline data.]"
	MarkerNoType           = "[Content not shown: a part arrived with no type.]"
	MarkerUnreadable       = "[Content not shown: a part arrived in a form this host can't read.]"
	MarkerReferenceNoLink  = "[Reference not shown: it arrived without a link.]"
	MarkerReferenceLong    = "[Reference not shown: its link is longer than this host accepts.]"
	MarkerWithheld         = "[Content not shown: its inline data arrived marked as a reference too, so this host withheld it.]"
	MarkerTextUnreadable   = "[Text not shown: a text part arrived without readable text.]"
)

// MarkerUnknownType is the marker of a block of a type this host can't
// display; label is the type as Label sanitized it.
func MarkerUnknownType(label string) string {
	// A quote in the label would end the quoted type early.
	return fmt.Sprintf(`[Content not shown: this host can't display "%s" content.]`, strings.ReplaceAll(label, `"`, "'"))
}
