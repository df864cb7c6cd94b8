package treat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const discordOntology = `{
  "coreTags": ["chat:addressed", "chat:ambient"],
  "tags": {
    "discord:role-mention": {"desc": "a role was pinged", "implies": ["chat:ambient"], "suggestedTreatment": "throttle"},
    "discord:everyone": {"desc": "@everyone"},
    "discord:voice": {"suggestedTreatment": "debounce"}
  },
  "suggestedTreatment": [
    {"tagsAny": ["chat:addressed"], "behavior": "immediate"},
    {"tagsAny": ["chat:deleted"], "behavior": "mute"},
    {"tagsAny": ["chat:ambient", "chat:from-bot"], "behavior": "wake-everyone"}
  ],
  "open": true
}`

// A server's suggestions become rules bound to its own messages and
// attributed to it; what this host has no treatment for is skipped, and
// said so.
func TestSuggested(t *testing.T) {
	rules, skipped := Suggested("discord", []Ontology{{FeatureSet: "discord.messaging", Raw: json.RawMessage(discordOntology)}})
	want := []Rule{
		{TagsAny: []string{"chat:addressed"}, Servers: []string{"discord"}, Treat: Wake, From: "discord"},
		{TagsAny: []string{"chat:deleted"}, Servers: []string{"discord"}, Treat: Ignore, From: "discord"},
		{TagsAny: []string{"discord:role-mention"}, Servers: []string{"discord"}, Treat: Batch, From: "discord"},
	}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	wantSkipped := []string{
		`discord.messaging: suggested rule 3: behavior "wake-everyone" is not one this host has (immediate, throttle, mute)`,
		`discord.messaging: tag "discord:voice": suggested behavior "debounce" is not one this host has (immediate, throttle, mute)`,
	}
	if diff := cmp.Diff(wantSkipped, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	// Bound to its server: another server's deleted message is not muted.
	if d := Decide(rules, Event{Server: "slack", Source: SourceChannel, Channel: "c", Tags: []string{"chat:deleted"}}); !d.Default {
		t.Errorf("discord's rule decided slack's message: %+v", d)
	}
	if d := Decide(rules, Event{Server: "discord", Source: SourceChannel, Channel: "c", Tags: []string{"chat:deleted"}}); d.Treat != Ignore || d.From != "discord" {
		t.Errorf("discord's deleted message: %+v, want ignore from discord", d)
	}
	// The deprecated alias, and a tagOntology that isn't an object.
	alias, _ := Suggested("s", []Ontology{{FeatureSet: "f", Raw: json.RawMessage(`{"defaultTreatment": [{"tagsAny": ["x"], "behavior": "mute"}]}`)}})
	if len(alias) != 1 || alias[0].Treat != Ignore {
		t.Errorf("defaultTreatment: %+v, want one ignore rule", alias)
	}
	if r, sk := Suggested("s", []Ontology{{FeatureSet: "f", Raw: json.RawMessage(`[1]`)}}); r != nil || len(sk) != 1 {
		t.Errorf("a list as ontology: rules %+v, skipped %q", r, sk)
	}
	// Bounded.
	var many []string
	for i := range MaxSuggested + 10 {
		many = append(many, fmt.Sprintf(`{"tagsAny": ["t%d"], "behavior": "mute"}`, i))
	}
	r, sk := Suggested("s", []Ontology{{FeatureSet: "f", Raw: json.RawMessage(`{"suggestedTreatment": [` + strings.Join(many, ",") + `]}`)}})
	if len(r) != MaxSuggested || len(sk) != 1 || sk[0] != "10 suggested rules past the first 256" {
		t.Errorf("%d rules, skipped %q; want %d and one line", len(r), sk, MaxSuggested)
	}
}

// The pin is the ontologies' content, not their bytes: member order and
// spacing don't change it; any change of content does.
func TestPin(t *testing.T) {
	a := Pin([]Ontology{{FeatureSet: "f", Raw: json.RawMessage(`{"a": 1, "b": [1, 2]}`)}})
	b := Pin([]Ontology{{FeatureSet: "f", Raw: json.RawMessage(`{ "b":[1,2],"a":1 }`)}})
	if a != b || !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Errorf("pins %q and %q, want the same sha256: pin", a, b)
	}
	for _, other := range []Ontology{
		{FeatureSet: "f", Raw: json.RawMessage(`{"a": 1, "b": [2, 1]}`)},
		{FeatureSet: "g", Raw: json.RawMessage(`{"a": 1, "b": [1, 2]}`)},
		{FeatureSet: "f", Raw: json.RawMessage(`{"a": 1.0, "b": [1, 2]}`)},
	} {
		if p := Pin([]Ontology{other}); p == a {
			t.Errorf("%s %s pins as %s too", other.FeatureSet, other.Raw, a)
		}
	}
	if Pin(nil) != "" {
		t.Error("no ontology pins as something")
	}
}
