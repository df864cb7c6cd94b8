package content

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRefsSameLinkOneRecord(t *testing.T) {
	r := NewRefs(0)
	a := Testimony{URI: "https://x/a", Name: "a.wav"}
	first := r.Register(a, "s", ProvenanceChannelMessage)
	a.Name = "renamed.wav"
	again := r.Register(a, "t", ProvenancePushEvent)
	if again.ID != first.ID || again.Testimony.Name != "renamed.wav" || !slices.Equal(again.Servers, []string{"s", "t"}) {
		t.Errorf("second registration = %+v, want the same record, refreshed, bound to s and t", again)
	}
	r.Fetched(first.ID, "/ws/refs/x.wav")
	a.Name = "late.wav"
	if got := r.Register(a, "s", ProvenanceToolResult); got.Testimony.Name != "renamed.wav" || !got.Fetched || len(got.Servers) != 2 {
		t.Errorf("after the fetch = %+v, want its testimony kept", got)
	}
	other := r.Register(Testimony{URI: "https://x/b"}, "", ProvenanceToolResult)
	if other.ID == first.ID || len(other.Servers) != 0 {
		t.Errorf("another link = %+v", other)
	}
}

// TestRefsEviction: past the bound the oldest records go; their ids are a
// miss, never another record, and ids are never reused.
func TestRefsEviction(t *testing.T) {
	r := NewRefs(10)
	ids := map[string]bool{}
	var first string
	for i := range 25 {
		ref := r.Register(Testimony{URI: fmt.Sprintf("https://x/%d", i)}, "s", ProvenanceToolResult)
		if ids[ref.ID] {
			t.Fatalf("id %s reused", ref.ID)
		}
		ids[ref.ID] = true
		if i == 0 {
			first = ref.ID
		}
	}
	if _, ok := r.Lookup(first); ok {
		t.Errorf("the evicted id %s still resolves", first)
	}
	again := r.Register(Testimony{URI: "https://x/0"}, "s", ProvenanceToolResult)
	if again.ID == first || ids[again.ID] {
		t.Errorf("the link registered again got id %s, one already used", again.ID)
	}
	if _, ok := r.Lookup("ref_nope_0000"); ok {
		t.Error("an unknown id resolves")
	}
	if !strings.HasPrefix(again.ID, "ref_") {
		t.Errorf("id %q", again.ID)
	}
}

func TestLaneView(t *testing.T) {
	refs := NewRefs(0)
	lane := Lane{Server: "chat", Provenance: ProvenanceChannelMessage, Refs: refs, Now: func() time.Time { return time.Unix(1_780_000_000, 0) }}
	blocks := []json.RawMessage{
		json.RawMessage(`{"type":"text","text":"look"}`),
		json.RawMessage(`{"type":"image","data":"AAAA","mimeType":"image/png"}`),
		json.RawMessage(`{"type":"resource","uri":"https://x/a.wav?sig=s","name":"a.wav","mimeType":"audio/wav","sizeBytes":12,"disposition":"never"}`),
		json.RawMessage(`{"type":"video"}`),
	}
	parts := lane.View(blocks)
	if len(parts) != 4 || parts[0].Text != "look" || parts[1].Kind != KindImage || parts[3].Text != MarkerUnknownType("video") {
		t.Fatalf("parts = %+v", parts)
	}
	ref, ok := refs.Lookup(strings.TrimPrefix(strings.SplitN(parts[2].Text, "]", 2)[0], "["))
	if !ok || ref.Testimony.URI != "https://x/a.wav?sig=s" || !slices.Equal(ref.Servers, []string{"chat"}) {
		t.Errorf("the stub %q names no record bound to chat: %+v", parts[2].Text, ref)
	}
	if want := "[" + ref.ID + "] a.wav — audio/wav, ~12 bytes claimed — attachment on channel message — fetch with fetch_reference"; parts[2].Text != want {
		t.Errorf("stub = %q, want %q", parts[2].Text, want)
	}
	if !Shows(blocks) {
		t.Error("shows nothing")
	}
}

func TestBlocksAndShows(t *testing.T) {
	blocks, ok := Blocks(json.RawMessage(`"plain words"`))
	if !ok || len(blocks) != 1 || Classify(blocks[0]).Text != "plain words" {
		t.Errorf("a plain string = %s %v", blocks, ok)
	}
	if _, ok := Blocks(json.RawMessage(`{"type":"text"}`)); ok {
		t.Error("an object read as content")
	}
	for _, tc := range []struct {
		content string
		want    bool
	}{
		{`[]`, false},
		{`[{"type":"text","text":"  \n"}]`, false},
		{`[{"type":"text","text":""},{"type":"text","text":" "}]`, false},
		{`[{"type":"text","text":"hi"}]`, true},
		{`[{"type":"image","data":"AA","mimeType":"image/png"}]`, true},
		{`[{"type":"video"}]`, true}, // a marker is something to see
		{`"  "`, false},
	} {
		blocks, _ := Blocks(json.RawMessage(tc.content))
		if got := Shows(blocks); got != tc.want {
			t.Errorf("Shows(%s) = %v, want %v", tc.content, got, tc.want)
		}
	}
}

func TestPlainText(t *testing.T) {
	parts := []Part{{Kind: KindText, Text: "a"}, {Kind: KindImage, MimeType: "image/png", Data: "iVBORw0KGgo="},
		{Kind: KindAudio, MimeType: "audio/\u202ewav", Data: strings.Repeat("A", 4096)}, {Kind: KindText, Text: MarkerNoType}}
	want := "a\n[inline image: image/png, 8 bytes]\n[inline audio: audio/wav, 3.0 KiB]\n" + MarkerNoType
	if got := PlainText(parts); got != want {
		t.Errorf("PlainText = %q\nwant %q", got, want)
	}
}
