package content

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// A lane turns the content blocks a server sent into what an agent sees:
// text (a text block, a marker, a reference's stub) and inline media.

// Part is one piece of what an agent sees.
type Part struct {
	// Kind is KindText, KindImage or KindAudio.
	Kind     Kind
	Text     string
	MimeType string
	Data     string
	// Host says Text is the host's own (a marker, a stub), not a
	// server's text: an agent's lane frames only a server's (Body).
	Host bool
}

// Lane says where blocks come from.
type Lane struct {
	// Server delivered them ("" for none: its references are unbound).
	Server string
	// Provenance is the stubs' (ProvenanceChannelMessage, ...).
	Provenance string
	// Refs registers references, for fetch_reference to find; nil
	// registers them with a registry of this call's own.
	Refs *Refs
	// Now is the clock expiry is read against; nil means time.Now.
	Now func() time.Time
}

// View classifies blocks and returns what an agent sees of them, in order.
// A reference is registered and shown as its stub; an embedded resource's
// text is two parts, the host's line naming it and the server's text; a
// resource link is the host's line; a block this host can't show is its
// marker.
func (l Lane) View(blocks []json.RawMessage) []Part {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	refs := l.Refs
	out := make([]Part, 0, len(blocks))
	for _, raw := range blocks {
		b := Classify(raw)
		switch b.Kind {
		case KindImage, KindAudio:
			out = append(out, Part{Kind: b.Kind, MimeType: b.MimeType, Data: b.Data})
		case KindReference:
			if refs == nil {
				refs = NewRefs(0)
			}
			ref := refs.Register(*b.Ref, l.Server, l.Provenance)
			out = append(out, Part{Kind: KindText, Text: Stub(ref.ID, b.Ref, l.Provenance, Tail(b.Ref, len(ref.Servers) > 0, now())), Host: true})
		case KindText:
			out = append(out, Part{Kind: KindText, Text: b.Text})
		case KindResource:
			// The host's line, then the server's text, framed as any
			// server text is.
			out = append(out, Part{Kind: KindText, Text: b.Header, Host: true}, Part{Kind: KindText, Text: b.Text})
		default:
			out = append(out, Part{Kind: KindText, Text: b.Text, Host: true})
		}
	}
	return out
}

// Blocks reads content as it may arrive: an array of blocks, or a plain
// string (one text block). ok is false for anything else.
func Blocks(raw json.RawMessage) (blocks []json.RawMessage, ok bool) {
	if json.Unmarshal(raw, &blocks) == nil {
		return blocks, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		return []json.RawMessage{b}, true
	}
	return nil, false
}

// Shows reports whether blocks show an agent anything: media, a
// reference, a marker (a block it can't show still says something), or
// text that is not only white space. It only classifies: no stub is
// built and no reference registered, so a lane can ask at receipt.
func Shows(blocks []json.RawMessage) bool {
	for _, raw := range blocks {
		if b := Classify(raw); b.Kind != KindText || strings.TrimSpace(b.Text) != "" {
			return true
		}
	}
	return false
}

// ReasonEmptyContent is the reason a message or push with nothing visible
// is refused (-32602).
const ReasonEmptyContent = "empty-content"

// PlainText renders parts for a reader that takes text only (a
// terminal): each text part on its own, and a line for each inline image
// or audio, which such a reader can't show. Parts are separated by line
// breaks.
func PlainText(parts []Part) string {
	lines := make([]string, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case KindImage, KindAudio:
			what := "image"
			if p.Kind == KindAudio {
				what = "audio"
			}
			lines = append(lines, fmt.Sprintf("[inline %s: %s, %s]", what, Label(p.MimeType), SizeText(decodedLen(p.Data))))
		default:
			lines = append(lines, p.Text)
		}
	}
	return strings.Join(lines, "\n")
}

// decodedLen is how many bytes base64 data holds, padding or not.
func decodedLen(data string) int64 {
	return int64(len(strings.TrimRight(data, "=")) * 3 / 4)
}
