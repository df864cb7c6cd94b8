package content

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The upstream bulk-reference vectors (testdata/bulk-reference-vectors.json,
// copied unchanged from the MCPL spec repository's conformance/), consumed
// as data, each case by its id: the "render" and "registry" cases here, the
// "fetch" cases in package fetchref (TestBulkReferenceFetchVectors).
//
// Not applicable to this host, and why:
//   - schemaValid and legacySchemaValid (with bulk-reference-legacy-
//     schema.json) are for schema validators: this host is a tolerant
//     reader that classifies every block, valid or not, and each case's
//     treatment is what is checked.
//   - emitterConformant and knownEmbeddedCredential describe the server
//     side of a case; the host's side of each is the case's expect.
//   - stubOrInlineBase64 (03-verified-ref): RFC-005 §3.1 lets a host
//     inline a verified "ref" payload; this host never inlines, so the
//     reference stays a stub after a fetch, and fetch_reference answers
//     with the saved file's path.

type vectorFile struct {
	Format string       `json:"format"`
	Cases  []vectorCase `json:"cases"`
}

type vectorCase struct {
	ID            string            `json:"id"`
	Operation     string            `json:"operation"`
	Blocks        []json.RawMessage `json:"blocks"`
	Registrations int               `json:"registrations"`
	Expect        struct {
		Stub          bool     `json:"stub"`
		Hidden        []string `json:"hidden"`
		Includes      []string `json:"includes"`
		MissingFields []string `json:"missingFields"`
		Bounded       bool     `json:"bounded"`
		Kind          string   `json:"kind"`
		DisplayField  string   `json:"displayField"`
	} `json:"expect"`
}

// vectorOrigin stands in for $ORIGIN: render cases make no request.
const vectorOrigin = "https://127.0.0.1:8443"

// expand substitutes $ORIGIN and $CASE and expands {"$repeat", "count"}.
func expand(t *testing.T, raw json.RawMessage, id string) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return strings.ReplaceAll(strings.ReplaceAll(x, "$ORIGIN", vectorOrigin), "$CASE", url.PathEscape(id))
		case map[string]any:
			if s, ok := x["$repeat"].(string); ok {
				return strings.Repeat(s, int(x["count"].(float64)))
			}
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	b, err := json.Marshal(walk(v))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBulkReferenceVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/bulk-reference-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if f.Format != "mcpl-bulk-references-1" || len(f.Cases) != 43 {
		t.Fatalf("format %q with %d cases; this test reads mcpl-bulk-references-1 with 43", f.Format, len(f.Cases))
	}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	rendered := 0
	for _, c := range f.Cases {
		t.Run(c.ID, func(t *testing.T) {
			switch c.Operation {
			case "fetch":
				t.Skip("a fetch case: it runs in package fetchref, TestBulkReferenceFetchVectors")
			case "registry":
				registryCase(t, c)
				return
			}
			rendered++
			var view []string
			stubs, refs := 0, []*Testimony{}
			for _, raw := range c.Blocks {
				blk := Classify(expand(t, raw, c.ID))
				switch blk.Kind {
				case KindReference:
					stubs++
					refs = append(refs, blk.Ref)
					view = append(view, Stub("ref_1", blk.Ref, ProvenancePushEvent, Tail(blk.Ref, true, now)))
				case KindImage, KindAudio:
					view = append(view, "<"+blk.MimeType+" inline>") // inline media goes to the model as media, not text
				default:
					view = append(view, blk.Text)
				}
				if c.Expect.Kind == "invalid" && blk.Kind != KindMarker {
					t.Errorf("kind %d, want the block rejected (a marker)", blk.Kind)
				}
			}
			text := strings.Join(view, "\n")
			if got := stubs > 0; got != c.Expect.Stub {
				t.Errorf("stub = %v, want %v: %q", got, c.Expect.Stub, text)
			}
			for _, h := range c.Expect.Hidden {
				h = strings.ReplaceAll(h, "$ORIGIN", vectorOrigin)
				if strings.Contains(text, h) {
					t.Errorf("model-visible text holds %q: %q", h, text)
				}
			}
			for _, s := range c.Expect.Includes {
				if !strings.Contains(text, s) {
					t.Errorf("model-visible text lacks %q: %q", s, text)
				}
			}
			for _, field := range c.Expect.MissingFields {
				if len(refs) != 1 || !slices.Contains(refs[0].Rejected, field) {
					t.Errorf("%s not treated as absent: %+v", field, refs)
				}
			}
			if c.Expect.Bounded && len([]rune(text)) > MaxStubRunes {
				t.Errorf("stub is %d runes, over %d", len([]rune(text)), MaxStubRunes)
			}
			if f := c.Expect.DisplayField; f != "" {
				var fields map[string]json.RawMessage
				json.Unmarshal(expand(t, c.Blocks[0], c.ID), &fields)
				v, _ := stringField(fields, f)
				if !strings.Contains(text, v[:20]) {
					t.Errorf("the stub doesn't show %s: %q", f, text)
				}
			}
		})
	}
	if rendered == 0 {
		t.Error("no render case ran")
	}
}

// registryCase registers the case's block, then as many other references
// as the case says (past DefaultMaxRefs), registers the block again, and
// looks up the old id and an unknown one: both are misses, and the new id
// is not the old.
func registryCase(t *testing.T, c vectorCase) {
	blk := Classify(expand(t, c.Blocks[0], c.ID))
	if blk.Kind != KindReference {
		t.Fatalf("block = %+v", blk)
	}
	refs := NewRefs(0)
	first := refs.Register(*blk.Ref, "s", ProvenancePushEvent)
	if again := refs.Register(*blk.Ref, "s", ProvenancePushEvent); again.ID != first.ID {
		t.Fatalf("registered twice: %s then %s", first.ID, again.ID)
	}
	if c.Registrations <= DefaultMaxRefs {
		t.Fatalf("registrations %d don't exceed the bound %d", c.Registrations, DefaultMaxRefs)
	}
	for i := range c.Registrations {
		refs.Register(Testimony{URI: fmt.Sprintf("%s/other/%d", vectorOrigin, i)}, "s", ProvenancePushEvent)
	}
	if _, ok := refs.Lookup(first.ID); ok {
		t.Errorf("the evicted id %s still resolves", first.ID)
	}
	back := refs.Register(*blk.Ref, "s", ProvenancePushEvent)
	if back.ID == first.ID {
		t.Errorf("re-registered under the old id %s", back.ID)
	}
	if _, ok := refs.Lookup("ref_unknown_zzzz"); ok {
		t.Error("an unknown id resolves")
	}
	stub := Stub(back.ID, &back.Testimony, ProvenancePushEvent, TailFetch)
	for _, h := range c.Expect.Hidden {
		if h = strings.ReplaceAll(h, "$ORIGIN", vectorOrigin); strings.Contains(stub, h) {
			t.Errorf("stub %q holds %q", stub, h)
		}
	}
}
