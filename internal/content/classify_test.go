package content

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestClassifyMarkers pins the marker every malformed shape reads as, the
// seed's list and the issue's, verbatim.
func TestClassifyMarkers(t *testing.T) {
	for _, tc := range []struct {
		name, block, want string
	}{
		{"not an object", `"just a string"`, "[Content not shown: a part arrived in a form this host can't read.]"},
		{"an array", `[1,2]`, "[Content not shown: a part arrived in a form this host can't read.]"},
		{"null", `null`, "[Content not shown: a part arrived in a form this host can't read.]"},
		{"no type", `{"text":"hi"}`, "[Content not shown: a part arrived with no type.]"},
		{"type not a string", `{"type":7}`, "[Content not shown: a part arrived with no type.]"},
		{"type that sanitizes to nothing", `{"type":"\u202e\u0007"}`, "[Content not shown: a part arrived with no type.]"},
		{"unknown type", `{"type":"video","data":"AAAA"}`, `[Content not shown: this host can't display "video" content.]`},
		{"unknown type with controls", `{"type":"vi\u001b[31mdeo\u202e"}`, `[Content not shown: this host can't display "vi\[31mdeo" content.]`},
		{"unknown long type", `{"type":"` + strings.Repeat("x", 100) + `"}`, `[Content not shown: this host can't display "` + strings.Repeat("x", 39) + `…" content.]`},
		{"text without text", `{"type":"text"}`, "[Text not shown: a text part arrived without readable text.]"},
		{"text not a string", `{"type":"text","text":{"a":1}}`, "[Text not shown: a text part arrived without readable text.]"},
		{"text null", `{"type":"text","text":null}`, "[Text not shown: a text part arrived without readable text.]"},
		{"image data null", `{"type":"image","data":null,"mimeType":"image/png"}`, "[Image not shown: it arrived with no usable data or link.]"},
		{"type with a quote and invisible characters", `{"type":"a\"b\u200b\u2060\udb40\udc41c"}`, `[Content not shown: this host can't display "a'bc" content.]`},
		{"image without media type", `{"type":"image","data":"AAAA"}`, "[Image not shown: its data arrived without a media type.]"},
		{"image with empty media type", `{"type":"image","data":"AAAA","mimeType":""}`, "[Image not shown: its data arrived without a media type.]"},
		{"image with nothing", `{"type":"image"}`, "[Image not shown: it arrived with no usable data or link.]"},
		{"image with empty uri", `{"type":"image","uri":""}`, "[Image not shown: it arrived with no usable data or link.]"},
		{"image with data not a string", `{"type":"image","data":5,"mimeType":"image/png"}`, "[Image not shown: it arrived with no usable data or link.]"},
		{"image with uri not a string", `{"type":"image","uri":5}`, "[Image not shown: it arrived with no usable data or link.]"},
		{"audio without media type", `{"type":"audio","data":"AAAA"}`, "[Audio not shown: its data arrived without a media type.]"},
		{"audio with nothing", `{"type":"audio"}`, "[Audio not shown: it arrived with no usable inline data.]"},
		{"audio with empty uri", `{"type":"audio","uri":""}`, "[Audio not shown: it arrived with no usable inline data.]"},
		{"resource without uri", `{"type":"resource","name":"a.wav"}`, "[Reference not shown: it arrived without a link.]"},
		{"resource with uri not a string", `{"type":"resource","uri":7}`, "[Reference not shown: it arrived without a link.]"},
		{"resource with empty uri", `{"type":"resource","uri":""}`, "[Reference not shown: it arrived without a link.]"},
		{"resource with a long uri", `{"type":"resource","uri":"https://x/` + strings.Repeat("a", 4096) + `"}`, "[Reference not shown: its link is longer than this host accepts.]"},
		{"image in uri form with a long uri", `{"type":"image","uri":"https://x/` + strings.Repeat("a", 4096) + `"}`, "[Reference not shown: its link is longer than this host accepts.]"},
		{"inline data beside a uri", `{"type":"image","data":"AAAA","mimeType":"image/png","uri":"https://x/a"}`, "[Content not shown: its inline data arrived marked as a reference too, so this host withheld it.]"},
		{"inline data beside an empty uri", `{"type":"audio","data":"AAAA","mimeType":"audio/wav","uri":""}`, "[Content not shown: its inline data arrived marked as a reference too, so this host withheld it.]"},
		{"inline data beside a disposition", `{"type":"image","data":"AAAA","mimeType":"image/png","disposition":"never"}`, "[Content not shown: its inline data arrived marked as a reference too, so this host withheld it.]"},
	} {
		b := Classify(json.RawMessage(tc.block))
		if b.Kind != KindMarker || b.Text != tc.want {
			t.Errorf("%s: Classify(%.60s) = kind %d %q\nwant the marker %q", tc.name, tc.block, b.Kind, b.Text, tc.want)
		}
	}
}

func TestClassifyShown(t *testing.T) {
	b := Classify(json.RawMessage(`{"type":"text","text":"hello"}`))
	if b.Kind != KindText || b.Text != "hello" {
		t.Errorf("text = %+v", b)
	}
	b = Classify(json.RawMessage(`{"type":"text","text":""}`))
	if b.Kind != KindText || b.Text != "" {
		t.Errorf("empty text = %+v", b)
	}
	b = Classify(json.RawMessage(`{"type":"image","data":"AAAA","mimeType":"image/png"}`))
	if b.Kind != KindImage || b.MimeType != "image/png" || b.Data != "AAAA" {
		t.Errorf("image = %+v", b)
	}
	b = Classify(json.RawMessage(`{"type":"audio","data":"AAAA","mimeType":"audio/wav"}`))
	if b.Kind != KindAudio || b.MimeType != "audio/wav" {
		t.Errorf("audio = %+v", b)
	}
	b = Classify(json.RawMessage(`{"type":"image","uri":"https://x/a.png","mimeType":"image/png","disposition":"ref"}`))
	if b.Kind != KindReference || b.Media != "image" || b.Ref.URI != "https://x/a.png" || b.Ref.Disposition != "ref" {
		t.Errorf("image by link = %+v", b)
	}
	b = Classify(json.RawMessage(`{"type":"audio","data":"AAAA","mimeType":"audio/wav","uri":null}`))
	if b.Kind != KindAudio {
		t.Errorf("inline audio beside a null uri = %+v, want inline: null is no link", b)
	}
	b = Classify(json.RawMessage(`{"type":"resource","uri":"https://x/a.wav","extra":{"ignored":true}}`))
	if b.Kind != KindReference || b.Media != "" || b.Ref.URI != "https://x/a.wav" {
		t.Errorf("resource = %+v", b)
	}
}

func TestLabel(t *testing.T) {
	for in, want := range map[string]string{
		"video":                 "video",
		"  spaced\t\tout  ":     "spaced out",
		"\u202eevil\u202c":      "evil",
		"a\x00b":                "ab",
		"\xff\xfe":              "",
		strings.Repeat("é", 50): strings.Repeat("é", 39) + "…",
		"emoji 👍🏽 and 中文":       "emoji 👍🏽 and 中文",
	} {
		if got := Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}
