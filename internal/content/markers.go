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

// The markers of MCP's embedded resources ("type":"resource" with a
// resource object) and resource links ("type":"resource_link") this host
// can't show. An embedded resource's binary contents are never shown: no
// lane puts base64 in an agent's history.
const (
	MarkerResourceNoURI       = "[Resource not shown: the server embedded one without a uri.]"
	MarkerResourceLongURI     = "[Resource not shown: the server embedded one whose uri is longer than this host accepts.]"
	MarkerResourceUnreadable  = "[Resource not shown: the server embedded one with neither readable text nor binary data.]"
	MarkerResourceLinkNoURI   = "[Resource link not shown: it arrived without a uri.]"
	MarkerResourceLinkLongURI = "[Resource link not shown: its uri is longer than this host accepts.]"
)

// MarkerResourceBinary is the marker of an embedded resource whose
// contents arrived as binary data (a blob): its uri and media type, as the
// server gave them (uriText and typeText sanitize them), and not its data.
func MarkerResourceBinary(uri, mimeType string) string {
	return fmt.Sprintf(`[Resource not shown: the server embedded "%s"%s as binary data, which this host doesn't show.]`, uriText(uri), typeText(mimeType, ""))
}

// textResource is the host's line before an embedded resource's text,
// which follows it as the server's own text (framed as any server text
// is): what it is, its uri and its media type.
func textResource(uri, mimeType string) string {
	return fmt.Sprintf(`[Resource "%s"%s, embedded by the server; its text follows:]`, uriText(uri), typeText(mimeType, ""))
}

// textResourceLink is the host's line for a resource link: the host never
// reads a link's resource, and the line says so. name, the size part and
// the description are left out when the server gave none.
func textResourceLink(uri, name, mimeType, size, description string) string {
	if name = Field(name, linkNameRunes); name != "" {
		name += " "
	}
	if description = Field(description, linkDescriptionRunes); description != "" {
		description = " — " + description
	}
	return fmt.Sprintf(`[Resource link, not fetched by this host: %s"%s"%s%s]`, name, uriText(uri), typeText(mimeType, size), description)
}

// Display bounds of a resource link's parts, in runes.
const (
	linkNameRunes        = 80
	linkDescriptionRunes = 300
)

// uriText makes a server's uri safe to stand quoted in a line the host
// writes: Clean's rules (one line, framing characters escaped), and a
// quote written as a URI writes one, %22, so it can't end the quoted uri
// early.
func uriText(uri string) string { return strings.ReplaceAll(Clean(uri), `"`, "%22") }

// typeText is the part of a line that gives a resource's media type
// (Label sanitizes it) and a size, as " (<media type>, <size>)", either
// alone, or "" when there is neither.
func typeText(mimeType, size string) string {
	parts := make([]string, 0, 2)
	if m := Label(mimeType); m != "" {
		parts = append(parts, m)
	}
	if size != "" {
		parts = append(parts, size)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
