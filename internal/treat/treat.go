// Package treat is the treatment rules of SPEC §16.7: what an agent does
// with a message or event once it is admitted, decided by an ordered,
// first-match-wins list of rules over its closure-expanded tags (SPEC
// §16.3), composable with the server, the channel and the source it came
// from. A treatment is one of:
//
//   - Wake: it wakes the agent;
//   - Batch: it joins the next turn's context, and wakes nothing by itself;
//   - Ignore: admitted and acknowledged, never shown.
//
// The precedence is the consumer's rules, then the host's (Defaults):
// there is no producer tier (SPEC §16.5), so a server's
// suggestedTreatment is never consulted here; an operator who accepts one
// copies it into the consumer's rules, where it stays attributable
// (Rule.From).
//
// Tags are untrusted claims (SPEC §16.6): a rule only decides treatment,
// after admission; nothing here admits anything.
//
// This package is pure: it decides, and its caller (the agent layer)
// applies the decision.
package treat

import (
	"strings"
)

// Treatment is what an agent does with an admitted message or event.
type Treatment string

// The treatments.
const (
	Wake   Treatment = "wake"
	Batch  Treatment = "batch"
	Ignore Treatment = "ignore"
)

// Sources a rule can name.
const (
	SourceChannel = "channel" // a channel message (channels/incoming, or a push that names its channel)
	SourcePush    = "push"    // a push event without a channel
)

// Event is what a rule is matched against.
type Event struct {
	Server  string
	Channel string // "" for a push event without a channel
	// Source is SourceChannel or SourcePush; FeatureSet a push event's
	// feature set ("" for a channels/incoming message).
	Source     string
	FeatureSet string
	// Tags are closure-expanded (SPEC §16.3: content.Close).
	Tags []string
}

// Rule is one treatment rule. Every matcher it sets must hold (an empty
// one holds for anything): TagsAny that at least one of the event's tags
// matches one of its globs, TagsAll that each of its globs matches at
// least one tag, TagsNone that none of its globs matches any tag (so
// TagsNone ["*"] holds for an event without tags); Servers, Channels and
// FeatureSets that the event's matches one of the globs (an event without
// a channel, or without a feature set, matches no Channels or FeatureSets
// matcher); Source that it is the event's. A glob's * matches any run of characters, ? any one.
type Rule struct {
	TagsAny, TagsAll, TagsNone []string
	Servers, Channels          []string
	Source                     string
	FeatureSets                []string
	Treat                      Treatment
	// From says where the rule came from, for the operator: "" for the
	// host's own or the consumer's, or the server whose suggestion the
	// operator accepted.
	From string
}

// Defaults are the host's rules, after the consumer's: a message that
// addresses the agent wakes it; a push event with no tags wakes it (as a
// push always did); an ambient message (chat:ambient: overheard, people
// talking among themselves) joins the next turn; anything else wakes,
// untagged channel messages included: a server that says nothing of a
// message is not taken to say it is ambient, so a connector that tags
// nothing works as it always did.
var Defaults = []Rule{
	{TagsAny: []string{"chat:addressed"}, Treat: Wake},
	{Source: SourcePush, TagsNone: []string{"*"}, Treat: Wake},
	{TagsAny: []string{"chat:ambient"}, Treat: Batch},
	{Treat: Wake},
}

// Decision is a treatment and the rule that decided it.
type Decision struct {
	Treat Treatment
	// Rule is the rule's index in the consumer's list, or, when Default,
	// in Defaults.
	Rule    int
	Default bool
	From    string
}

// Decide applies the consumer's rules, then Defaults, first match wins.
func Decide(rules []Rule, ev Event) Decision {
	for i, r := range rules {
		if r.Matches(ev) {
			return Decision{Treat: r.Treat, Rule: i, From: r.From}
		}
	}
	for i, r := range Defaults {
		if r.Matches(ev) {
			return Decision{Treat: r.Treat, Rule: i, Default: true}
		}
	}
	return Decision{Treat: Wake, Rule: len(Defaults), Default: true}
}

// Matches reports whether every matcher r sets holds for ev.
func (r Rule) Matches(ev Event) bool {
	switch {
	case r.Source != "" && r.Source != ev.Source:
		return false
	case len(r.Servers) > 0 && !anyGlob(r.Servers, ev.Server):
		return false
	case len(r.Channels) > 0 && (ev.Channel == "" || !anyGlob(r.Channels, ev.Channel)):
		return false
	case len(r.FeatureSets) > 0 && (ev.FeatureSet == "" || !anyGlob(r.FeatureSets, ev.FeatureSet)):
		return false
	case len(r.TagsAny) > 0 && !anyTag(r.TagsAny, ev.Tags):
		return false
	case len(r.TagsNone) > 0 && anyTag(r.TagsNone, ev.Tags):
		return false
	}
	for _, g := range r.TagsAll {
		if !anyTag([]string{g}, ev.Tags) {
			return false
		}
	}
	return true
}

// anyTag reports whether one of tags matches one of globs.
func anyTag(globs, tags []string) bool {
	for _, t := range tags {
		if anyGlob(globs, t) {
			return true
		}
	}
	return false
}

func anyGlob(globs []string, s string) bool {
	for _, g := range globs {
		if Glob(g, s) {
			return true
		}
	}
	return false
}

// Glob reports whether s matches pattern: * matches any run of
// characters (none included, ":" and "/" too), ? any one character, and
// every other character itself. It takes at most len(pattern)·len(s)
// steps: a pattern of many stars can't make it backtrack exponentially.
func Glob(pattern, s string) bool {
	p, str := []rune(pattern), []rune(s)
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(str) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == str[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// String describes r for an operator: its matchers, then its treatment,
// like "tagsAny chat:ambient, channel support → wake"; a rule that
// matches everything is "anything → wake".
func (r Rule) String() string {
	var parts []string
	add := func(key string, globs []string) {
		if len(globs) > 0 {
			parts = append(parts, key+" "+strings.Join(globs, " "))
		}
	}
	add("tagsAny", r.TagsAny)
	add("tagsAll", r.TagsAll)
	add("tagsNone", r.TagsNone)
	add("server", r.Servers)
	add("channel", r.Channels)
	add("featureSet", r.FeatureSets)
	if r.Source != "" {
		parts = append(parts, "source "+r.Source)
	}
	if len(parts) == 0 {
		parts = []string{"anything"}
	}
	s := strings.Join(parts, ", ") + " → " + string(r.Treat)
	if r.From != "" {
		s += " (suggested by " + r.From + ")"
	}
	return s
}
