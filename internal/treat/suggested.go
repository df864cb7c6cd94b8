package treat

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// A server's suggested treatment (SPEC §16.4, §16.5; RFC-001 §5): the
// rules its feature sets' tagOntology suggests, top-level
// (suggestedTreatment, or its deprecated alias defaultTreatment, a list
// of rules with tagsAny / tagsAll / tagsNone and a behavior) and per tag
// (tags.<tag>.suggestedTreatment, a behavior for that tag). They are
// never applied unless the operator accepts them, by the Pin of the
// ontologies as the server declared them at its connection: a server
// whose ontology changed is not accepted any more, since what was
// accepted is not what it declares now (§17: ontology acceptance is bound
// to a snapshot).
//
// An accepted rule decides only its own server's messages (Servers is set
// to it): a suggestion never reaches another server's traffic. Its From
// names the server, so the operator can see where it came from. The
// behaviors are the producers' vocabulary, not this host's: immediate is
// Wake, throttle is Batch, mute is Ignore; a rule with any other behavior
// is left out, and said so (skipped).

// Ontology is one feature set's tagOntology, as its server declared it.
type Ontology struct {
	FeatureSet string
	Raw        json.RawMessage
}

// MaxSuggested bounds the rules one server's suggestions make: the rest
// are skipped, and said so.
const MaxSuggested = 256

// behaviors maps the producers' behavior names to treatments.
var behaviors = map[string]Treatment{"immediate": Wake, "throttle": Batch, "mute": Ignore}

// Pin is what an operator accepts: "sha256:" and the hex SHA-256 of the
// ontologies, by feature set name, as this host re-encodes them (object
// members sorted, numbers as written); "" when there are none. It is this
// host's own pin, not RFC-003's manifest revision.
func Pin(onts []Ontology) string {
	if len(onts) == 0 {
		return ""
	}
	byName := map[string]any{}
	for _, o := range onts {
		dec := json.NewDecoder(bytes.NewReader(o.Raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			v = string(o.Raw) // kept as bytes: still pinned
		}
		byName[o.FeatureSet] = v
	}
	b, _ := json.Marshal(byName) // sorts object members
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Suggested returns the rules server's ontologies suggest, in order (each
// feature set's, by name: its top-level list, then its per-tag
// suggestions by tag), attributed to server and bound to its messages;
// skipped says, one line each, what was left out and why.
func Suggested(server string, onts []Ontology) (rules []Rule, skipped []string) {
	onts = append([]Ontology(nil), onts...)
	sort.Slice(onts, func(i, j int) bool { return onts[i].FeatureSet < onts[j].FeatureSet })
	for _, o := range onts {
		var ont struct {
			Suggested []json.RawMessage `json:"suggestedTreatment"`
			Default   []json.RawMessage `json:"defaultTreatment"`
			Tags      map[string]struct {
				Suggested json.RawMessage `json:"suggestedTreatment"`
			} `json:"tags"`
		}
		if err := json.Unmarshal(o.Raw, &ont); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: its tagOntology is not an object with the fields SPEC §16.4 names", o.FeatureSet))
			continue
		}
		list := ont.Suggested
		if list == nil {
			list = ont.Default
		}
		for i, raw := range list {
			var r struct {
				TagsAny  []string `json:"tagsAny"`
				TagsAll  []string `json:"tagsAll"`
				TagsNone []string `json:"tagsNone"`
				Behavior string   `json:"behavior"`
			}
			if json.Unmarshal(raw, &r) != nil {
				skipped = append(skipped, fmt.Sprintf("%s: suggested rule %d is not a rule", o.FeatureSet, i+1))
				continue
			}
			t, ok := behaviors[r.Behavior]
			if !ok {
				skipped = append(skipped, fmt.Sprintf("%s: suggested rule %d: behavior %q is not one this host has (immediate, throttle, mute)", o.FeatureSet, i+1, r.Behavior))
				continue
			}
			rules = append(rules, Rule{TagsAny: r.TagsAny, TagsAll: r.TagsAll, TagsNone: r.TagsNone, Servers: []string{server}, Treat: t, From: server})
		}
		tags := make([]string, 0, len(ont.Tags))
		for tag := range ont.Tags {
			tags = append(tags, tag)
		}
		sort.Strings(tags)
		for _, tag := range tags {
			raw := ont.Tags[tag].Suggested
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			var b string
			json.Unmarshal(raw, &b)
			t, ok := behaviors[b]
			if !ok {
				skipped = append(skipped, fmt.Sprintf("%s: tag %q: suggested behavior %s is not one this host has (immediate, throttle, mute)", o.FeatureSet, tag, raw))
				continue
			}
			rules = append(rules, Rule{TagsAny: []string{tag}, Servers: []string{server}, Treat: t, From: server})
		}
	}
	if len(rules) > MaxSuggested {
		skipped = append(skipped, fmt.Sprintf("%d suggested rules past the first %d", len(rules)-MaxSuggested, MaxSuggested))
		rules = rules[:MaxSuggested]
	}
	return rules, skipped
}
