package treat

import (
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/internal/content"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "chat:dm", true},
		{"chat:*", "chat:dm", true},
		{"chat:*", "chatter", false},
		{"robotics:*", "robotics:arm=left", true},
		{"*:from-*", "chat:from-bot", true},
		{"chat:from-?ot", "chat:from-bot", true},
		{"chat:from-?ot", "chat:from-boot", false},
		{"discord:g1/*", "discord:g1/general", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"", "", true},
		{"", "x", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"ü*", "über", true},
	} {
		if got := Glob(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
	// Many stars against a long near-miss: quadratic at worst, never
	// exponential.
	if Glob(strings.Repeat("*a", 50)+"b", strings.Repeat("a", 5000)) {
		t.Error("a pattern that can't match matched")
	}
}

func TestRuleMatches(t *testing.T) {
	ev := Event{Server: "discord", Channel: "discord:g1:room", Source: SourceChannel, Tags: content.Close([]string{"chat:mention", "chat:from-human"})}
	for _, tc := range []struct {
		name string
		rule Rule
		want bool
	}{
		{"empty matches all", Rule{}, true},
		{"tagsAny, by the closure", Rule{TagsAny: []string{"chat:addressed"}}, true},
		{"tagsAny, a glob", Rule{TagsAny: []string{"chat:from-*"}}, true},
		{"tagsAny, none", Rule{TagsAny: []string{"chat:dm", "chat:ambient"}}, false},
		{"tagsAll, all there", Rule{TagsAll: []string{"chat:mention", "chat:from-human"}}, true},
		{"tagsAll, one missing", Rule{TagsAll: []string{"chat:mention", "chat:from-bot"}}, false},
		{"tagsNone, one there", Rule{TagsNone: []string{"chat:from-human"}}, false},
		{"tagsNone, none there", Rule{TagsNone: []string{"chat:from-bot", "chat:deleted"}}, true},
		{"tagsNone *, tags there", Rule{TagsNone: []string{"*"}}, false},
		{"server", Rule{Servers: []string{"discord"}}, true},
		{"server, another", Rule{Servers: []string{"slack"}}, false},
		{"channel glob", Rule{Channels: []string{"discord:g1:*"}}, true},
		{"channel glob, another guild", Rule{Channels: []string{"discord:g2:*"}}, false},
		{"source", Rule{Source: SourceChannel}, true},
		{"source push", Rule{Source: SourcePush}, false},
		{"feature set, a channel message has none", Rule{FeatureSets: []string{"*"}}, false},
		{"channel *, the message has one", Rule{Channels: []string{"*"}}, true},
		{"composed, all hold", Rule{Servers: []string{"discord"}, Channels: []string{"*:room"}, TagsAll: []string{"chat:addressed"}, TagsNone: []string{"chat:from-bot"}}, true},
		{"composed, one fails", Rule{Servers: []string{"discord"}, TagsAll: []string{"chat:addressed"}, TagsNone: []string{"chat:mention"}}, false},
	} {
		if got := tc.rule.Matches(ev); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The host's defaults, and the consumer's rules before them, first match
// wins.
func TestDecide(t *testing.T) {
	ch := func(tags ...string) Event {
		return Event{Server: "s", Channel: "c", Source: SourceChannel, Tags: content.Close(tags)}
	}
	push := func(tags ...string) Event {
		return Event{Server: "s", Source: SourcePush, FeatureSet: "alerts", Tags: content.Close(tags)}
	}
	for _, tc := range []struct {
		name  string
		rules []Rule
		ev    Event
		want  Treatment
		dflt  bool
		rule  int
	}{
		{"addressed wakes", nil, ch("chat:mention"), Wake, true, 0},
		{"a dm wakes (closure)", nil, ch("chat:dm"), Wake, true, 0},
		{"ambient batches", nil, ch("chat:ambient"), Batch, true, 2},
		{"addressed and ambient: ambient dropped, wakes", nil, ch("chat:ambient", "chat:reply"), Wake, true, 0},
		{"an untagged channel message wakes (nothing says it is ambient)", nil, ch(), Wake, true, 3},
		{"an untagged push wakes", nil, push(), Wake, true, 1},
		{"a tagged push wakes", nil, push("ci:failed"), Wake, true, 3},
		{"an ambient push batches", nil, push("chat:ambient"), Batch, true, 2},
		{"the consumer's rule first", []Rule{{TagsAny: []string{"chat:ambient"}, Treat: Ignore}}, ch("chat:ambient"), Ignore, false, 0},
		{"first match wins", []Rule{{Servers: []string{"s"}, Treat: Batch}, {TagsAny: []string{"chat:addressed"}, Treat: Ignore}}, ch("chat:mention"), Batch, false, 0},
		{"no consumer match: the defaults", []Rule{{Servers: []string{"other"}, Treat: Ignore}}, ch("chat:mention"), Wake, true, 0},
		{"by feature set", []Rule{{FeatureSets: []string{"alert*"}, Treat: Ignore}}, push(), Ignore, false, 0},
		{"a channel rule doesn't match a push without one", []Rule{{Channels: []string{"*"}, Treat: Ignore}}, push(), Wake, true, 1},
	} {
		got := Decide(tc.rules, tc.ev)
		if got.Treat != tc.want || got.Default != tc.dflt || got.Rule != tc.rule {
			t.Errorf("%s: Decide = %+v, want %s by rule %d (default %v)", tc.name, got, tc.want, tc.rule, tc.dflt)
		}
	}
}

// A rule's From is carried into the decision, so an accepted suggestion
// stays attributable.
func TestDecisionFrom(t *testing.T) {
	rules := []Rule{{TagsAny: []string{"chat:ambient"}, Treat: Ignore, From: "slack"}}
	if d := Decide(rules, Event{Source: SourceChannel, Tags: []string{"chat:ambient"}}); d.From != "slack" || d.Treat != Ignore {
		t.Errorf("Decide = %+v, want the slack suggestion's ignore", d)
	}
}

func TestRuleString(t *testing.T) {
	for _, tc := range []struct {
		r    Rule
		want string
	}{
		{Rule{Treat: Wake}, "anything → wake"},
		{Rule{TagsAny: []string{"chat:ambient"}, Channels: []string{"support", "help-*"}, Treat: Batch}, "tagsAny chat:ambient, channel support help-* → batch"},
		{Rule{Source: SourcePush, TagsNone: []string{"*"}, Treat: Wake}, "tagsNone *, source push → wake"},
		{Rule{Servers: []string{"noisy"}, FeatureSets: []string{"ads.*"}, Treat: Ignore, From: "noisy"}, "server noisy, featureSet ads.* → ignore (suggested by noisy)"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
