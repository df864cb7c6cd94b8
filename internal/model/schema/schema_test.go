package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// same marks a case whose schema must come back as the very bytes given.
const same = "<same>"

type fitCase struct {
	name string
	in   string
	// want is the fitted schema (same: raw unchanged); "" when rejected.
	want string
	// rule and path are the rejection's, or (for refusal) the first
	// repair's.
	rule, path string
}

func run(t *testing.T, fn func(json.RawMessage) (json.RawMessage, error), refuse func(json.RawMessage) *Error, cases []fitCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := json.RawMessage(c.in)
			got, err := fn(raw)
			ref := refuse(raw)
			switch {
			case c.want == "":
				var se *Error
				if !errors.As(err, &se) {
					t.Fatalf("got %s, %v; want a *Error of rule %s", got, err, c.rule)
				}
				if se.Rule != c.rule || se.Path != c.path {
					t.Errorf("got rule %q at %q (%v); want %q at %q", se.Rule, se.Path, err, c.rule, c.path)
				}
				if !strings.Contains(err.Error(), c.rule) {
					t.Errorf("the error %q doesn't name its rule", err)
				}
				if ref == nil || ref.Rule != c.rule {
					t.Errorf("refusal: got %v, want rule %s", ref, c.rule)
				}
			case err != nil:
				t.Fatalf("got error %v, want %s", err, c.want)
			case c.want == same:
				if len(raw) > 0 && (len(got) != len(raw) || &got[0] != &raw[0]) {
					t.Errorf("got %s, want raw itself", got)
				}
				if ref != nil {
					t.Errorf("refusal: got %v, want none", ref)
				}
			default:
				if !jsonEqual(t, got, c.want) {
					t.Errorf("got %s, want %s", got, c.want)
				}
				if bytes.Equal(got, raw) {
					t.Errorf("a repaired schema must be a copy")
				}
				if ref == nil || ref.Rule != c.rule || ref.Path != c.path {
					t.Errorf("refusal: got %+v, want rule %q at %q", ref, c.rule, c.path)
				}
				// A repaired schema needs nothing more.
				again, err := fn(got)
				if err != nil || !bytes.Equal(again, got) {
					t.Errorf("fitting the repaired schema again: %s, %v", again, err)
				}
			}
		})
	}
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("the result %s is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatalf("the case's want %s is not JSON: %v", want, err)
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// both are the rules the two providers share.
var both = []fitCase{
	{name: "fine", in: `{"type":"object","properties":{"a":{"type":"string","description":"A."}},"required":["a"]}`, want: same},
	{name: "fine with whitespace", in: ` { "type" : "object", "properties" : { } } `, want: same},
	{name: "empty", in: ``, want: emptySchema, rule: RuleTopObject},
	{name: "null", in: `null`, want: emptySchema, rule: RuleTopObject},
	{name: "empty object", in: `{}`, want: emptySchema, rule: RuleTopObject},
	{name: "malformed", in: `{"type":"object",`, rule: RuleJSON},
	{name: "not an object", in: `["type"]`, rule: RuleTopObject},
	{name: "top array type", in: `{"type":"array","items":{}}`, rule: RuleTopObject},
	{name: "top type list", in: `{"type":["object","null"],"properties":{}}`, rule: RuleTopObject},
	{name: "bad type name", in: `{"type":"object","properties":{"n":{"type":"int"}}}`, rule: RuleTypeName, path: "properties.n.type"},
	{name: "bad type in a list", in: `{"type":"object","properties":{"n":{"type":["string","file"]}}}`, rule: RuleTypeName, path: "properties.n.type"},
	{name: "repeated type", in: `{"type":"object","properties":{"n":{"type":["string","string"]}}}`, rule: RuleTypeName, path: "properties.n.type"},
	{name: "empty type list", in: `{"type":"object","properties":{"n":{"type":[]}}}`, rule: RuleTypeName, path: "properties.n.type"},
	{name: "type not a string", in: `{"type":"object","properties":{"n":{"type":3}}}`, rule: RuleTypeName, path: "properties.n.type"},
	{name: "type list fine", in: `{"type":"object","properties":{"n":{"type":["string","null"]}}}`, want: same},
	{name: "property not a schema", in: `{"type":"object","properties":{"n":"string"}}`, rule: RuleSubschema, path: "properties.n"},
	{name: "boolean schema", in: `{"type":"object","properties":{"n":true},"additionalProperties":false}`, want: same},
	{name: "properties not an object", in: `{"type":"object","properties":[]}`, rule: RuleSubschema, path: "properties"},
	{name: "anyOf empty", in: `{"type":"object","properties":{"n":{"anyOf":[]}}}`, rule: RuleSubschema, path: "properties.n.anyOf"},
	{name: "anyOf not a list", in: `{"type":"object","properties":{"n":{"anyOf":{}}}}`, rule: RuleSubschema, path: "properties.n.anyOf"},
	{name: "bad type in anyOf", in: `{"type":"object","properties":{"n":{"anyOf":[{"type":"string"},{"type":"str"}]}}}`, rule: RuleTypeName, path: "properties.n.anyOf.1.type"},
	{name: "bad type in $defs", in: `{"type":"object","properties":{},"$defs":{"D":{"type":"date"}}}`, rule: RuleTypeName, path: "$defs.D.type"},
	{name: "bad type in definitions", in: `{"type":"object","properties":{},"definitions":{"D":{"type":"date"}}}`, rule: RuleTypeName, path: "definitions.D.type"},
	{name: "bad type in additionalProperties", in: `{"type":"object","properties":{},"additionalProperties":{"type":"any"}}`, rule: RuleTypeName, path: "additionalProperties.type"},
	{name: "additionalProperties not a schema", in: `{"type":"object","properties":{},"additionalProperties":"yes"}`, rule: RuleSubschema, path: "additionalProperties"},
	{name: "bad type in items", in: `{"type":"object","properties":{"l":{"type":"array","items":{"type":"float"}}}}`, rule: RuleTypeName, path: "properties.l.items.type"},
	{name: "required not strings", in: `{"type":"object","properties":{},"required":[1]}`, rule: RuleRequired, path: "required"},
	{name: "required not a list", in: `{"type":"object","properties":{},"required":"a"}`, rule: RuleRequired, path: "required"},
	{name: "too deep", in: `{"type":"object","properties":{"a":` + nest(MaxDepth+1) + `}}`, rule: RuleDepth, path: "properties.a" + strings.Repeat(".properties.a", MaxDepth)},
	{name: "deep but within", in: `{"type":"object","properties":{"a":` + nest(MaxDepth) + `}}`, want: same},
}

// nest is n object schemas, each the next's property a.
func nest(n int) string {
	s := `{"type":"string"}`
	for range n - 1 {
		s = `{"type":"object","properties":{"a":` + s + `}}`
	}
	return s
}

func TestOpenAI(t *testing.T) {
	cases := append(append([]fitCase(nil), both...),
		fitCase{name: "no type", in: `{"properties":{}}`, want: `{"type":"object","properties":{}}`, rule: RuleTopType},
		fitCase{name: "no properties", in: `{"type":"object"}`, want: `{"type":"object","properties":{}}`, rule: RuleObjectProperties},
		fitCase{name: "no type, no properties", in: `{"required":[]}`, want: `{"type":"object","properties":{},"required":[]}`, rule: RuleTopType},
		fitCase{name: "array without items", in: `{"type":"object","properties":{"content":{"type":"array"}}}`,
			want: `{"type":"object","properties":{"content":{"type":"array","items":{}}}}`, rule: RuleArrayItems, path: "properties.content"},
		fitCase{name: "array in a type list without items", in: `{"type":"object","properties":{"c":{"type":["string","array"]}}}`,
			want: `{"type":"object","properties":{"c":{"type":["string","array"],"items":{}}}}`, rule: RuleArrayItems, path: "properties.c"},
		fitCase{name: "nested array without items", in: `{"type":"object","properties":{"m":{"type":"array","items":{"type":"array"}}}}`,
			want: `{"type":"object","properties":{"m":{"type":"array","items":{"type":"array","items":{}}}}}`, rule: RuleArrayItems, path: "properties.m.items"},
		fitCase{name: "array in anyOf", in: `{"type":"object","properties":{"c":{"anyOf":[{"type":"string"},{"type":"array"}]}}}`,
			want: `{"type":"object","properties":{"c":{"anyOf":[{"type":"string"},{"type":"array","items":{}}]}}}`, rule: RuleArrayItems, path: "properties.c.anyOf.1"},
		fitCase{name: "array in $defs", in: `{"type":"object","properties":{},"$defs":{"L":{"type":"array"}}}`,
			want: `{"type":"object","properties":{},"$defs":{"L":{"type":"array","items":{}}}}`, rule: RuleArrayItems, path: "$defs.L"},
		fitCase{name: "array in additionalProperties", in: `{"type":"object","properties":{},"additionalProperties":{"type":"array"}}`,
			want: `{"type":"object","properties":{},"additionalProperties":{"type":"array","items":{}}}`, rule: RuleArrayItems, path: "additionalProperties"},
		fitCase{name: "nested object without properties is taken", in: `{"type":"object","properties":{"o":{"type":"object"}}}`, want: same},
		fitCase{name: "top anyOf is taken", in: `{"type":"object","properties":{},"anyOf":[{"required":["a"]},{"required":["b"]}]}`, want: same},
		fitCase{name: "tuple items walked", in: `{"type":"object","properties":{"t":{"type":"array","items":[{"type":"array"}]}}}`,
			want: `{"type":"object","properties":{"t":{"type":"array","items":[{"type":"array","items":{}}]}}}`, rule: RuleArrayItems, path: "properties.t.items.0"},
		fitCase{name: "repair then rejection", in: `{"type":"object","properties":{"a":{"type":"array"},"b":{"type":"int"}}}`, rule: RuleTypeName, path: "properties.b.type"},
	)
	run(t, OpenAI, OpenAIRefusal, cases)
}

func TestAnthropic(t *testing.T) {
	cases := append(append([]fitCase(nil), both...),
		fitCase{name: "no type", in: `{"properties":{}}`, want: `{"type":"object","properties":{}}`, rule: RuleTopType},
		fitCase{name: "no properties is taken", in: `{"type":"object"}`, want: same},
		fitCase{name: "array without items is taken", in: `{"type":"object","properties":{"content":{"type":"array"}}}`, want: same},
		fitCase{name: "top anyOf", in: `{"type":"object","properties":{},"anyOf":[{"required":["a"]},{"required":["b"]}]}`, rule: RuleTopCombinator},
		fitCase{name: "top oneOf", in: `{"type":"object","oneOf":[{"required":["a"]}]}`, rule: RuleTopCombinator},
		fitCase{name: "top allOf", in: `{"type":"object","allOf":[{"required":["a"]}]}`, rule: RuleTopCombinator},
		fitCase{name: "nested anyOf is taken", in: `{"type":"object","properties":{"c":{"anyOf":[{"type":"string"},{"type":"number"}]}}}`, want: same},
		fitCase{name: "tuple items", in: `{"type":"object","properties":{"t":{"type":"array","items":[{"type":"string"}]}}}`, rule: RuleItemsTuple, path: "properties.t.items"},
		fitCase{name: "prefixItems", in: `{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"string"}]}}}`, want: same},
	)
	run(t, Anthropic, AnthropicRefusal, cases)
}

// A repair keeps the levels it didn't touch as they were, and every
// value's bytes (a number is not rounded through float64).
func TestRepairKeepsValues(t *testing.T) {
	in := `{"type":"object","properties":{"n":{"type":"integer","maximum":12345678901234567890},"l":{"type":"array"}}}`
	got, err := OpenAI(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got, []byte(`12345678901234567890`)) {
		t.Errorf("the number was changed: %s", got)
	}
	if !bytes.Contains(got, []byte(`"n":{"type":"integer","maximum":12345678901234567890}`)) {
		t.Errorf("an untouched level was re-encoded: %s", got)
	}
}

func TestErrorText(t *testing.T) {
	_, err := OpenAI(json.RawMessage(`{"type":"object","properties":{"n":{"type":"int"}}}`))
	want := `the input schema breaks the rule type-name at properties.n.type: "int" is not a JSON Schema type`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want it to begin %q", err, want)
	}
	_, err = Anthropic(json.RawMessage(`{"type":"array"}`))
	if err == nil || !strings.Contains(err.Error(), "at the top level") {
		t.Errorf("got %v, want it to say the top level", err)
	}
}

// A hostile server's schema nested two thousand deep (4,000 JSON
// levels; Go reads JSON up to 10,000) is refused at the depth bound, by
// both, not walked to its end.
func TestHostileDepth(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"a":` + nest(2000) + `}}`)
	for name, fn := range map[string]func(json.RawMessage) (json.RawMessage, error){"openai": OpenAI, "anthropic": Anthropic} {
		_, err := fn(raw)
		var se *Error
		if !errors.As(err, &se) || se.Rule != RuleDepth {
			t.Errorf("%s: got %v, want rule %s", name, err, RuleDepth)
		}
	}
}
