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
}

// Lane says where blocks come from.
type Lane struct {
	// Server delivered them ("" for none: its references are unbound).
	Server string
	// Provenance is the stubs' (ProvenanceChannelMessage, ...).
	Provenance string
	// Refs registers references; nil shows each as a stub with no id
	// to fetch it by.
	Refs *Refs
	// Now is the clock expiry is read against; nil means time.Now.
	Now func() time.Time
}

// View classifies blocks and returns what an agent sees of them, in order.
// A reference is registered and shown as its stub; a block this host
// can't show is its marker.
func (l Lane) View(blocks []json.RawMessage) []Part {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	out := make([]Part, 0, len(blocks))
	for _, raw := range blocks {
		b := Classify(raw)
		switch b.Kind {
		case KindImage, KindAudio:
			out = append(out, Part{Kind: b.Kind, MimeType: b.MimeType, Data: b.Data})
		case KindReference:
			id := "ref_unregistered"
			bound := l.Server != ""
			if l.Refs != nil {
				ref := l.Refs.Register(*b.Ref, l.Server, l.Provenance)
				id, bound = ref.ID, len(ref.Servers) > 0
			}
			out = append(out, Part{Kind: KindText, Text: Stub(id, b.Ref, l.Provenance, Tail(b.Ref, bound, now()))})
		default:
			out = append(out, Part{Kind: KindText, Text: b.Text})
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

// Visible reports whether parts show an agent anything: media, or text
// that is not only white space.
func Visible(parts []Part) bool {
	for _, p := range parts {
		if p.Kind != KindText || strings.TrimSpace(p.Text) != "" {
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
