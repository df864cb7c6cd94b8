// Package content classifies the content blocks servers send, for every
// lane that shows them to an agent (channel messages, push events, tool
// results, context injections): one classifier, one set of markers for
// what can't be shown (markers.go), the host's lines for MCP's embedded
// resources and resource links (markers.go), the reference testimony of RFC-005
// and its model-visible stub (reference.go), and the closure of event tags
// (SPEC §16, tags.go). It is pure: no I/O, no clocks but the one a caller
// passes.
package content

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/term"
)

// Kind is what a block is to an agent.
type Kind int

// Block kinds.
const (
	// KindMarker: the block can't be shown; Text is its marker.
	KindMarker Kind = iota
	// KindText: Text is the text.
	KindText
	// KindImage, KindAudio: inline media, MimeType and Data (base64).
	KindImage
	KindAudio
	// KindReference: an RFC-005 reference (a resource block, or an
	// image or audio block in uri form); Ref is its testimony.
	KindReference
	// KindResource: an MCP embedded resource with text contents; Header
	// is the host's line naming it, Text the server's text.
	KindResource
	// KindResourceLink: an MCP resource link, which this host never
	// fetches; Text is the host's line describing it.
	KindResourceLink
)

// Block is one classified content block.
type Block struct {
	Kind Kind
	// Text is a text block's text, an embedded resource's text, a
	// resource link's line, or a marker.
	Text string
	// Header is an embedded resource's line, the host's, shown before
	// its Text.
	Header string
	// MimeType and Data are inline media's.
	MimeType, Data string
	// Media is the block's type for a reference in image or audio form
	// ("image", "audio"; "" for a resource).
	Media string
	// Ref is a reference's testimony.
	Ref *Testimony
}

// MaxURIChars bounds a reference's link, in characters (RFC-005 §8).
const MaxURIChars = 4096

// Classify reads one content block as it arrived. It never fails: a block
// this host can't show is a KindMarker with the marker saying why.
func Classify(raw json.RawMessage) Block {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return marker(MarkerUnreadable)
	}
	typ, ok := stringField(fields, "type")
	if !ok || Label(typ) == "" {
		return marker(MarkerNoType)
	}
	switch typ {
	case "text":
		text, ok := stringField(fields, "text")
		if !ok {
			return marker(MarkerTextUnreadable)
		}
		return Block{Kind: KindText, Text: text}
	case "image", "audio":
		return classifyMedia(typ, fields)
	case "resource":
		if embedded(fields) {
			return classifyEmbedded(fields["resource"])
		}
		uri, ok := stringField(fields, "uri")
		if !ok || uri == "" {
			return marker(MarkerReferenceNoLink)
		}
		return reference("", fields)
	case "resource_link":
		return classifyLink(fields)
	}
	return marker(MarkerUnknownType(Label(typ)))
}

// embedded reports whether a resource block is MCP's embedded resource (a
// resource object, its contents) rather than an RFC-005 reference: it has
// a resource field and no uri of its own. A block with a uri on it, of
// any value but null, stays a reference, as it always was.
func embedded(fields map[string]json.RawMessage) bool {
	res, hasResource := fields["resource"]
	uri, hasURI := fields["uri"]
	return hasResource && string(res) != "null" && (!hasURI || string(uri) == "null")
}

// classifyEmbedded reads an embedded resource's contents: text is shown
// after a line of the host's that names it; binary data (a blob) is
// never shown, and its marker names it. Text wins when a server sends
// both, so no blob is ever shown.
func classifyEmbedded(raw json.RawMessage) Block {
	var res map[string]json.RawMessage
	if json.Unmarshal(raw, &res) != nil || res == nil {
		return marker(MarkerResourceUnreadable)
	}
	uri, _ := stringField(res, "uri")
	mime, _ := stringField(res, "mimeType")
	text, hasText := stringField(res, "text")
	_, hasBlob := stringField(res, "blob")
	switch {
	case !hasText && !hasBlob:
		return marker(MarkerResourceUnreadable)
	case Clean(uri) == "":
		return marker(MarkerResourceNoURI)
	case utf8.RuneCountInString(uri) > MaxURIChars:
		return marker(MarkerResourceLongURI)
	case hasText:
		return Block{Kind: KindResource, Header: textResource(uri, mime), Text: text}
	}
	return marker(MarkerResourceBinary(uri, mime))
}

// classifyLink reads a resource link: a line of the host's that describes
// it, which this host never fetches. A field that isn't what MCP says it
// is (a string, or an integer size) is left out.
func classifyLink(fields map[string]json.RawMessage) Block {
	uri, _ := stringField(fields, "uri")
	switch {
	case Clean(uri) == "":
		return marker(MarkerResourceLinkNoURI)
	case utf8.RuneCountInString(uri) > MaxURIChars:
		return marker(MarkerResourceLinkLongURI)
	}
	name, _ := stringField(fields, "name")
	if Clean(name) == "" {
		name, _ = stringField(fields, "title")
	}
	mime, _ := stringField(fields, "mimeType")
	description, _ := stringField(fields, "description")
	size := ""
	if v, ok := fields["size"]; ok {
		if n, ok := safeInteger(v); ok {
			size = SizeText(n)
		}
	}
	return Block{Kind: KindResourceLink, Text: textResourceLink(uri, name, mime, size, description)}
}

// classifyMedia reads an image or audio block: inline data with a media
// type; a link (a reference, RFC-005 §8); or neither.
func classifyMedia(typ string, fields map[string]json.RawMessage) Block {
	data, hasData := stringField(fields, "data")
	uri, hasURI := stringField(fields, "uri")
	_, hasDisposition := fields["disposition"]
	noMediaType, noData := MarkerImageNoMediaType, MarkerImageNoData
	if typ == "audio" {
		noMediaType, noData = MarkerAudioNoMediaType, MarkerAudioNoData
	}
	switch {
	case hasData && (hasURI || hasDisposition):
		// Inline data that also claims a link or a bulk disposition:
		// fail closed (RFC-005 §8.1). Any string uri counts, an empty
		// one included.
		return marker(MarkerWithheld)
	case hasData:
		mime, _ := stringField(fields, "mimeType")
		if mime == "" {
			return marker(noMediaType)
		}
		return Block{Kind: mediaKind(typ), MimeType: mime, Data: data}
	case hasURI && uri != "":
		return reference(typ, fields)
	}
	// No data, and no link (an empty one is none).
	return marker(noData)
}

func mediaKind(typ string) Kind {
	if typ == "audio" {
		return KindAudio
	}
	return KindImage
}

// reference reads a block in reference form: a link too long rejects the
// block whole.
func reference(media string, fields map[string]json.RawMessage) Block {
	t := readTestimony(fields)
	if utf8.RuneCountInString(t.URI) > MaxURIChars {
		return marker(MarkerReferenceLong)
	}
	return Block{Kind: KindReference, Media: media, Ref: &t}
}

func marker(text string) Block { return Block{Kind: KindMarker, Text: text} }

// stringField reads fields[key] as a string: ok is false when it is
// missing or not a string.
func stringField(fields map[string]json.RawMessage, key string) (string, bool) {
	v, present := fields[key]
	if !present || string(v) == "null" { // null decodes to "" without an error; it is no string
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// MaxLabelRunes bounds a label a server's string becomes in agent text.
const MaxLabelRunes = 40

// Label makes a server's short string (a label, a name, a type) safe and
// short for a line the host writes: Field, cut to MaxLabelRunes. It is ""
// when nothing printable is left.
func Label(s string) string { return Field(s, MaxLabelRunes) }

// Clean makes a server's string safe for a line the host writes, as Label
// does, without cutting it: for ids an agent may have to repeat (their
// framing characters read escaped; the channel tools' answers and the
// invitation give them exactly, as JSON strings).
func Clean(s string) string { return Field(s, 0) }

// clean drops what term would escape (controls, bidirectional controls,
// invalid UTF-8) and the invisible format characters (Unicode Cf:
// zero-width characters, tag characters), and collapses runs of white
// space (line breaks and separators included) to one space.
func clean(s string) string {
	var b strings.Builder
	space := false
	for i, r := range s {
		if r == utf8.RuneError && !validAt(s, i) {
			continue
		}
		if dropped(r) {
			// Controls, bidirectional controls, and the invisible format
			// characters (zero-width, tag characters) go.
			space = space || unicode.IsSpace(r)
			continue
		}
		if r == ' ' || r == '\u00a0' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// dropped reports whether clean drops r: what term would escape
// (controls, bidirectional controls, line and paragraph separators) and
// the invisible format characters (Unicode Cf).
func dropped(r rune) bool {
	return term.Line(string(r)) != string(r) || unicode.Is(unicode.Cf, r)
}

func validAt(s string, i int) bool {
	r, n := utf8.DecodeRuneInString(s[i:])
	return r != utf8.RuneError || n > 1
}

// bound cuts s to n runes, marking the cut with "…".
func bound(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return strings.TrimRight(string(runes[:n-1]), " ") + "…"
}
