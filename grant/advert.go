package grant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// Advertisement is a server's experimental.mcpl as this host understands
// it.
type Advertisement struct {
	// Version is the advertised MCPL version ("0.4", "0.5"), or "" when
	// the server gave none.
	Version string
	// Capabilities are the advertised paths that are in the vocabulary,
	// sorted. Boolean shorthand is expanded: true at any level means every
	// path beneath it.
	Capabilities []string
	// Ignored are advertised leaves outside the vocabulary, sorted: they
	// are never granted.
	Ignored []string
	// FeatureSets are the declared feature sets, in name order.
	FeatureSets []FeatureSet
}

// FeatureSet is one declared feature set (SPEC §6.1).
type FeatureSet struct {
	Name        string
	Description string
	// Uses holds the declared capability paths as given (a value that is
	// not a string is shown as JSON).
	Uses []string
	// Invalid says what makes the declaration invalid (SPEC §6.4 rule 1),
	// naming the offending value: "uses is missing", "uses is empty",
	// `"x.y" is not a capability path`, `42 is not a string`. It is empty
	// for a valid declaration.
	Invalid string
	// TagOntology is its tagOntology as declared (SPEC §16.4), re-encoded
	// (object members sorted); nil when it declares none. This package
	// reads nothing in it: what it suggests is the treatment rules'
	// (internal/treat).
	TagOntology json.RawMessage
}

// Clone returns a copy of ad that shares no memory with it.
func (ad Advertisement) Clone() Advertisement {
	c := ad
	c.Capabilities, c.Ignored = slices.Clone(ad.Capabilities), slices.Clone(ad.Ignored)
	if ad.FeatureSets != nil {
		c.FeatureSets = make([]FeatureSet, len(ad.FeatureSets))
		for i, fs := range ad.FeatureSets {
			fs.Uses = slices.Clone(fs.Uses)
			fs.TagOntology = slices.Clone(fs.TagOntology)
			c.FeatureSets[i] = fs
		}
	}
	return c
}

// members of experimental.mcpl that are not capability paths.
var reservedMembers = map[string]bool{"version": true, "revision": true, "featureSets": true}

// ParseAdvertisement reads a server's experimental.mcpl (raw JSON). mcpTools
// says whether the server advertised MCP tools, which grants the "tools"
// path. It accepts every shape real servers send (reference/interop.md):
// boolean shorthand at any level, channels as a boolean or an object,
// featureSets as an array, a record by name, or a record whose values carry
// their name. It fails only when raw is not JSON.
func ParseAdvertisement(raw json.RawMessage, mcpTools bool) (Advertisement, error) {
	var ad Advertisement
	var root any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return ad, fmt.Errorf("grant: the MCPL advertisement is not JSON: %w", err)
	}
	caps := map[string]bool{}
	ignored := map[string]bool{}
	switch v := root.(type) {
	case bool:
		walk("", v, caps, ignored)
	case map[string]any:
		if s, ok := v["version"].(string); ok {
			ad.Version = s
		}
		ad.FeatureSets = parseFeatureSets(v["featureSets"])
		for k, m := range v {
			if !reservedMembers[k] {
				walk(k, m, caps, ignored)
			}
		}
	}
	if mcpTools {
		caps["tools"] = true
	}
	ad.Capabilities = sortedKeys(caps)
	ad.Ignored = sortedKeys(ignored)
	return ad, nil
}

// walk collects the vocabulary paths that v, advertised at path, covers. It
// is a generic recursive walk over dot paths (SPEC §5.4): no member name
// is special, and the vocabulary says which paths exist.
func walk(path string, v any, caps, ignored map[string]bool) {
	switch v := v.(type) {
	case bool:
		if !v {
			return
		}
		covered := children(path)
		if path == "" {
			covered = vocabulary[:]
		} else if Known(path) {
			covered = append(covered, path)
		}
		found := false
		for _, p := range covered {
			if p != "tools" { // MCP's own capability, never MCPL's
				caps[p] = true
				found = true
			}
		}
		if !found {
			ignored[path] = true
		}
	case map[string]any:
		// An object advertises its own path too, where that path is a
		// capability ("inferenceRequest": {"streaming": false}).
		if Known(path) && path != "tools" {
			caps[path] = true
		} else if len(children(path)) == 0 {
			ignored[path] = true
			return
		}
		for k, m := range v {
			walk(path+"."+k, m, caps, ignored)
		}
	default:
		// false, null, numbers, strings: nothing is advertised.
	}
}

// parseFeatureSets reads the three shapes of featureSets.
func parseFeatureSets(v any) []FeatureSet {
	var out []FeatureSet
	seen := map[string]bool{}
	add := func(name string, decl any) {
		obj, _ := decl.(map[string]any)
		if n, ok := obj["name"].(string); ok && n != "" {
			name = n
		}
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		fs := FeatureSet{Name: name}
		fs.Description, _ = obj["description"].(string)
		fs.Uses, fs.Invalid = parseUses(obj["uses"])
		if ont, ok := obj["tagOntology"]; ok && ont != nil {
			fs.TagOntology, _ = json.Marshal(ont)
		}
		out = append(out, fs)
	}
	switch v := v.(type) {
	case []any:
		for _, d := range v {
			add("", d)
		}
	case map[string]any:
		for k, d := range v {
			add(k, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// parseUses reads a uses list. It is valid only when present, not empty,
// and every entry is a string in the vocabulary (SPEC §6.2, §6.4 rule 1);
// invalid says why not, naming the first offending value.
func parseUses(v any) (uses []string, invalid string) {
	list, ok := v.([]any)
	switch {
	case v == nil:
		return nil, "uses is missing"
	case !ok:
		return nil, "uses is not a list"
	case len(list) == 0:
		return []string{}, "uses is empty"
	}
	uses = make([]string, 0, len(list))
	for _, u := range list {
		s, ok := u.(string)
		if !ok {
			b, _ := json.Marshal(u)
			s = string(b)
			if invalid == "" {
				invalid = s + " is not a string"
			}
		} else if !Known(s) && invalid == "" {
			invalid = strconv.Quote(s) + " is not a capability path"
		}
		uses = append(uses, s)
	}
	return uses, invalid
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
