// Package schema fits a tool's input schema (JSON Schema, as an MCP
// server declares it) to what a model provider's API accepts as a tool's
// parameters: OpenAI's Chat Completions (function tools, non-strict) and
// Anthropic's Messages API (custom tools' input_schema). A provider
// refuses the whole request when one tool's schema breaks its rules (HTTP
// 400), so one bad schema from one server would fail every turn; fitting
// each schema before it is sent lets the caller repair it, or leave that
// one tool out.
//
// OpenAI and Anthropic return the schema as the provider takes it: raw
// itself (the same bytes) when it needs nothing; a repaired copy when a
// repair exists that loses nothing (the copy validates exactly the
// arguments raw does, for arguments that are a JSON object, which tool
// arguments always are); or a *Error naming the rule and where it is
// broken, when the provider would refuse it and no such repair exists.
// A repaired copy is re-encoded level by level: the levels that needed
// nothing keep their bytes, the repaired ones have their keys sorted.
//
// The rules, each with the id Error.Rule carries. Both providers:
//
//   - json: raw is not valid JSON. Rejected.
//   - top-object: the top level is not a JSON object, or its type is not
//     "object" (both APIs answer that the schema must be of type
//     object). An empty raw, JSON null or {} is repaired to
//     {"type":"object","properties":{}}; an object with no type gets
//     "type":"object" (rule top-type, a repair: arguments are always an
//     object, so nothing is lost, and both APIs refuse a schema with no
//     type at the top). Any other type there (array, a list of types)
//     is rejected.
//   - type-name: a type that is not a JSON Schema type name (string,
//     number, integer, boolean, object, array, null), or a list of types
//     that is empty, repeats one or holds something else. Both APIs
//     check schemas against the JSON Schema meta-schema. Rejected: there
//     is no telling what "int" or "file" meant.
//   - subschema: a keyword that holds a schema (items, additionalProperties,
//     not, ...) holds something that is neither an object nor a boolean;
//     one that holds a map of schemas (properties, $defs, definitions,
//     patternProperties, dependentSchemas) holds something other than an
//     object; one that holds a list of schemas (anyOf, oneOf, allOf,
//     prefixItems) holds something other than a non-empty array.
//     Rejected (the meta-schema's rules).
//   - required: required is not an array of strings. Rejected.
//   - depth: schemas nest deeper than MaxDepth. Rejected, so that a
//     hostile server's schema can't make the walk unbounded. (JSON
//     nested deeper than encoding/json reads, 10,000 levels, is refused
//     as json before the walk.)
//
// OpenAI only:
//
//   - array-items: a schema whose type is, or lists, "array" has no
//     items (OpenAI: "array schema missing items", at any depth, and in
//     each member of a list of types). Repaired: items becomes {}, which
//     is what a missing items means.
//   - object-properties: the top-level schema has no properties (OpenAI:
//     "object schema missing properties", in context ()). Repaired:
//     properties becomes {}. Only the top level: OpenAI's non-strict
//     mode takes a nested {"type":"object"}, and repairing it would make
//     this package's stand-in of the API (internal/model/fakeapi) refuse
//     schemas the API takes.
//
// Anthropic only:
//
//   - top-combinator: anyOf, oneOf or allOf at the top level (Anthropic:
//     "input_schema does not support oneOf, allOf, or anyOf at the top
//     level"). Rejected: folding a union into one object schema loses
//     what it says.
//   - items-tuple: items is a list (draft-07's tuple form). Anthropic
//     checks schemas against draft 2020-12, where items is one schema
//     and the tuple form is prefixItems. Rejected: draft-07's tuple form
//     and 2020-12's prefixItems differ in what the elements past the
//     list may be, so the rewrite is not exact. OpenAI's check of this is
//     not known; there a list's members are walked as schemas.
//
// What this package deliberately does not enforce: OpenAI's strict mode
// rules (additionalProperties false on every object, every property
// required, no unsupported keywords such as format, minimum or pattern,
// no root anyOf), because the host sends function tools with strict off,
// and the API accepts those keywords then; and other keywords' values
// (enum, minimum, pattern, $ref targets), which the APIs are not known to
// refuse in ways that break a request and which would make this package
// a JSON Schema meta-validator.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxDepth bounds how deep schemas may nest (the top level is 0).
const MaxDepth = 64

// Rule ids, as Error.Rule carries them.
const (
	RuleJSON             = "json"
	RuleTopObject        = "top-object"
	RuleTopType          = "top-type"
	RuleTypeName         = "type-name"
	RuleSubschema        = "subschema"
	RuleRequired         = "required"
	RuleDepth            = "depth"
	RuleArrayItems       = "array-items"
	RuleObjectProperties = "object-properties"
	RuleTopCombinator    = "top-combinator"
	RuleItemsTuple       = "items-tuple"
)

// Error is a schema a provider would refuse, or one this package would
// repair before sending (OpenAIRefusal, AnthropicRefusal).
type Error struct {
	// Rule is the rule broken: one of the Rule ids.
	Rule string
	// Path is where: the keys from the top level, joined by dots
	// ("properties.content.items", "anyOf.0"); "" is the top level.
	Path string
	// Detail says what is wrong there, in plain words.
	Detail string
}

func (e *Error) Error() string {
	where := "at the top level"
	if e.Path != "" {
		where = "at " + e.Path
	}
	return fmt.Sprintf("the input schema breaks the rule %s %s: %s", e.Rule, where, e.Detail)
}

// rules are one provider's.
type rules struct {
	arrayItems     bool // arrays must have items (repair)
	topProperties  bool // the top level must have properties (repair)
	topCombinators bool // no anyOf/oneOf/allOf at the top (reject)
	tupleItems     bool // items must not be a list (reject)
}

var (
	openAI    = rules{arrayItems: true, topProperties: true}
	anthropic = rules{topCombinators: true, tupleItems: true}
)

// OpenAI fits raw to what OpenAI's Chat Completions accepts as a
// function's parameters (non-strict mode).
func OpenAI(raw json.RawMessage) (json.RawMessage, error) {
	return result(fit(raw, openAI))
}

// Anthropic fits raw to what Anthropic's Messages API accepts as a tool's
// input_schema.
func Anthropic(raw json.RawMessage) (json.RawMessage, error) {
	return result(fit(raw, anthropic))
}

// OpenAIRefusal is what OpenAI refuses in raw as it is: the first rule
// it breaks, a repairable one included; nil when OpenAI takes raw
// unchanged. It is for stand-ins of the API, which check that the caller
// repaired what needed it.
func OpenAIRefusal(raw json.RawMessage) *Error { return refusal(fit(raw, openAI)) }

// AnthropicRefusal is what Anthropic refuses in raw as it is, as
// OpenAIRefusal is for OpenAI.
func AnthropicRefusal(raw json.RawMessage) *Error { return refusal(fit(raw, anthropic)) }

func result(out json.RawMessage, _ []*Error, err *Error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	return out, nil
}

func refusal(_ json.RawMessage, repairs []*Error, err *Error) *Error {
	if len(repairs) > 0 {
		return repairs[0]
	}
	return err
}

// fitter walks one schema.
type fitter struct {
	r       rules
	repairs []*Error // in the order made
}

func (f *fitter) repair(rule, path, detail string) {
	f.repairs = append(f.repairs, &Error{Rule: rule, Path: path, Detail: detail})
}

// emptySchema is what an empty or missing schema becomes.
const emptySchema = `{"type":"object","properties":{}}`

// fit returns raw fitted (raw itself when nothing was repaired), the
// repairs made, or the rule that can't be repaired.
func fit(raw json.RawMessage, r rules) (json.RawMessage, []*Error, *Error) {
	f := &fitter{r: r}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		f.repair(RuleTopObject, "", "there is no schema")
		return json.RawMessage(emptySchema), f.repairs, nil
	}
	if !json.Valid(trimmed) {
		return nil, nil, &Error{Rule: RuleJSON, Detail: "the schema is not valid JSON"}
	}
	if trimmed[0] != '{' {
		return nil, nil, &Error{Rule: RuleTopObject, Detail: "the schema is " + kind(trimmed) + ", not a JSON object"}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &m); err != nil {
		return nil, nil, &Error{Rule: RuleJSON, Detail: "the schema could not be read: " + err.Error()}
	}
	if len(m) == 0 {
		f.repair(RuleTopObject, "", "the schema is empty")
		return json.RawMessage(emptySchema), f.repairs, nil
	}
	changed := false
	if t, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
		f.repair(RuleTopType, "", "the schema has no type; it must be object")
		changed = true
	} else if string(bytes.TrimSpace(t)) != `"object"` {
		return nil, nil, &Error{Rule: RuleTopObject, Detail: "its type is " + compactText(t) + "; it must be \"object\""}
	}
	if f.r.topCombinators {
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if _, ok := m[k]; ok {
				return nil, nil, &Error{Rule: RuleTopCombinator, Detail: k + " is not allowed at the top level"}
			}
		}
	}
	if _, ok := m["properties"]; !ok && f.r.topProperties {
		m["properties"] = json.RawMessage(`{}`)
		f.repair(RuleObjectProperties, "", "an object schema has no properties")
		changed = true
	}
	sub, err := f.node(m, nil, 0)
	if err != nil {
		return nil, nil, err
	}
	if !changed && !sub {
		return raw, nil, nil
	}
	return marshal(m), f.repairs, nil
}

// typeNames are JSON Schema's type names.
var typeNames = []string{"string", "number", "integer", "boolean", "object", "array", "null"}

// Keywords whose value is a schema, a map of schemas, or a list of them.
var (
	schemaKeys = []string{"items", "additionalProperties", "not", "contains", "propertyNames",
		"if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
	mapKeys  = []string{"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"}
	listKeys = []string{"anyOf", "oneOf", "allOf", "prefixItems"}
)

// node checks one object schema at path and repairs it in place; changed
// reports whether m was changed (itself, or a schema within it).
func (f *fitter) node(m map[string]json.RawMessage, path []string, depth int) (changed bool, err *Error) {
	if depth > MaxDepth {
		return false, &Error{Rule: RuleDepth, Path: join(path), Detail: fmt.Sprintf("schemas nest deeper than %d levels", MaxDepth)}
	}
	if t, ok := m["type"]; ok {
		isArray, err := f.types(t, path)
		if err != nil {
			return false, err
		}
		if _, has := m["items"]; isArray && !has && f.r.arrayItems {
			m["items"] = json.RawMessage(`{}`)
			f.repair(RuleArrayItems, join(path), "an array schema has no items")
			changed = true
		}
	}
	if req, ok := m["required"]; ok {
		var names []string
		if json.Unmarshal(req, &names) != nil {
			return false, &Error{Rule: RuleRequired, Path: join(append(slices.Clip(path), "required")), Detail: "required must be a list of property names"}
		}
	}
	for _, k := range schemaKeys {
		v, ok := m[k]
		if !ok {
			continue
		}
		at := append(slices.Clip(path), k)
		if k == "items" && firstByte(v) == '[' {
			if f.r.tupleItems {
				return false, &Error{Rule: RuleItemsTuple, Path: join(at), Detail: "items is a list (the draft-07 tuple form); draft 2020-12 takes one schema there"}
			}
			out, c, err := f.list(v, at, depth)
			if err != nil {
				return false, err
			}
			if c {
				m[k], changed = out, true
			}
			continue
		}
		out, c, err := f.schema(v, at, depth+1)
		if err != nil {
			return false, err
		}
		if c {
			m[k], changed = out, true
		}
	}
	for _, k := range mapKeys {
		v, ok := m[k]
		if !ok {
			continue
		}
		at := append(slices.Clip(path), k)
		var sub map[string]json.RawMessage
		if firstByte(v) != '{' || json.Unmarshal(v, &sub) != nil {
			return false, &Error{Rule: RuleSubschema, Path: join(at), Detail: k + " must be an object whose values are schemas"}
		}
		c := false
		for _, name := range sortedKeys(sub) {
			out, cc, err := f.schema(sub[name], append(slices.Clip(at), name), depth+1)
			if err != nil {
				return false, err
			}
			if cc {
				sub[name], c = out, true
			}
		}
		if c {
			m[k], changed = marshal(sub), true
		}
	}
	for _, k := range listKeys {
		v, ok := m[k]
		if !ok {
			continue
		}
		out, c, err := f.list(v, append(slices.Clip(path), k), depth)
		if err != nil {
			return false, err
		}
		if c {
			m[k], changed = out, true
		}
	}
	return changed, nil
}

// types checks a type keyword's value, and reports whether it is, or
// lists, "array".
func (f *fitter) types(t json.RawMessage, path []string) (isArray bool, err *Error) {
	at := join(append(slices.Clip(path), "type"))
	var one string
	if json.Unmarshal(t, &one) == nil {
		if !slices.Contains(typeNames, one) {
			return false, &Error{Rule: RuleTypeName, Path: at, Detail: strconv.Quote(one) + " is not a JSON Schema type (" + strings.Join(typeNames, ", ") + ")"}
		}
		return one == "array", nil
	}
	var many []string
	if json.Unmarshal(t, &many) != nil || len(many) == 0 {
		return false, &Error{Rule: RuleTypeName, Path: at, Detail: "type must be a type name or a non-empty list of them"}
	}
	for i, n := range many {
		if !slices.Contains(typeNames, n) {
			return false, &Error{Rule: RuleTypeName, Path: at, Detail: strconv.Quote(n) + " is not a JSON Schema type (" + strings.Join(typeNames, ", ") + ")"}
		}
		if slices.Contains(many[:i], n) {
			return false, &Error{Rule: RuleTypeName, Path: at, Detail: "the list of types names " + strconv.Quote(n) + " twice"}
		}
	}
	return slices.Contains(many, "array"), nil
}

// schema checks one subschema: an object, or true or false.
func (f *fitter) schema(v json.RawMessage, path []string, depth int) (json.RawMessage, bool, *Error) {
	switch b := firstByte(v); {
	case b == 't' || b == 'f':
		return v, false, nil
	case b != '{':
		return nil, false, &Error{Rule: RuleSubschema, Path: join(path), Detail: "a schema must be an object or a boolean, not " + kind(v)}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, false, &Error{Rule: RuleSubschema, Path: join(path), Detail: "the schema could not be read: " + err.Error()}
	}
	c, err := f.node(m, path, depth)
	if err != nil || !c {
		return v, false, err
	}
	return marshal(m), true, nil
}

// list checks a non-empty list of subschemas, one level deeper.
func (f *fitter) list(v json.RawMessage, path []string, depth int) (json.RawMessage, bool, *Error) {
	var items []json.RawMessage
	if firstByte(v) != '[' || json.Unmarshal(v, &items) != nil || len(items) == 0 {
		return nil, false, &Error{Rule: RuleSubschema, Path: join(path), Detail: path[len(path)-1] + " must be a non-empty list of schemas"}
	}
	changed := false
	for i, it := range items {
		out, c, err := f.schema(it, append(slices.Clip(path), strconv.Itoa(i)), depth+1)
		if err != nil {
			return nil, false, err
		}
		if c {
			items[i], changed = out, true
		}
	}
	if !changed {
		return v, false, nil
	}
	return marshal(items), true, nil
}

func join(path []string) string { return strings.Join(path, ".") }

func firstByte(v json.RawMessage) byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// kind names a JSON value's kind, for details.
func kind(v json.RawMessage) string {
	switch firstByte(v) {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// compactText is a JSON value as short text, for details.
func compactText(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	if b.Len() > 80 {
		return b.String()[:80] + "…"
	}
	return b.String()
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// marshal encodes what this package decoded: it can't fail.
func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("schema: re-encoding a decoded schema: " + err.Error())
	}
	return b
}
