package host_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/model/schema"
)

// TestHostToolSchemas: every host tool's input schema is one both
// providers take as it is (no repair: the host's own tools are right at
// the source), an object schema at the top, and every property at every
// depth has a description, since the agent reads nothing else about it.
func TestHostToolSchemas(t *testing.T) {
	h, err := host.New(host.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	tools := h.HostTools()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	want := []string{"channel_list", "channel_open", "channel_close", "channel_decline", "channel_publish", "fetch_reference"}
	if !slices.Equal(names, want) {
		t.Fatalf("host tools %q, want %q", names, want)
	}
	fits := []struct {
		provider string
		fit      func(json.RawMessage) (json.RawMessage, error)
	}{{"OpenAI", schema.OpenAI}, {"Anthropic", schema.Anthropic}}
	for _, tl := range tools {
		t.Run(tl.Name, func(t *testing.T) {
			if tl.Description == "" {
				t.Errorf("no description")
			}
			for _, f := range fits {
				got, err := f.fit(tl.InputSchema)
				if err != nil {
					t.Errorf("%s refuses it: %v", f.provider, err)
				} else if !bytes.Equal(got, tl.InputSchema) {
					t.Errorf("%s needs it repaired:\n got %s\nwant %s", f.provider, got, tl.InputSchema)
				}
			}
			var top map[string]any
			if err := json.Unmarshal(tl.InputSchema, &top); err != nil {
				t.Fatalf("the schema is not a JSON object: %v", err)
			}
			if top["type"] != "object" {
				t.Errorf("the top level's type is %v, want object", top["type"])
			}
			if _, ok := top["properties"].(map[string]any); !ok {
				t.Errorf("the top level has no properties")
			}
			for _, missing := range undescribed(top, "") {
				t.Errorf("property %s has no description", missing)
			}
		})
	}
}

// undescribed lists the properties under s, at every depth (in items,
// additionalProperties and the unions too), that have no description.
func undescribed(s map[string]any, at string) []string {
	var out []string
	if props, ok := s["properties"].(map[string]any); ok {
		for name, v := range props {
			p, _ := v.(map[string]any)
			if d, _ := p["description"].(string); d == "" {
				out = append(out, at+name)
			}
			out = append(out, undescribed(p, at+name+".")...)
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := s[k].(map[string]any); ok {
			out = append(out, undescribed(sub, at+k+".")...)
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		list, _ := s[k].([]any)
		for i, v := range list {
			if sub, ok := v.(map[string]any); ok {
				out = append(out, undescribed(sub, fmt.Sprintf("%s%s.%d.", at, k, i))...)
			}
		}
	}
	return out
}

// The check itself: a property without a description, nested in items,
// is found.
func TestUndescribed(t *testing.T) {
	var s map[string]any
	json.Unmarshal([]byte(`{"properties":{"a":{"description":"A.","type":"array","items":{"properties":{"b":{"type":"string"}}}},"c":{}}}`), &s)
	got := undescribed(s, "")
	slices.Sort(got)
	if want := []string{"a.items.b", "c"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
