package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// What wakes an agent: agents[].wake (docs/agents.md, "What wakes an
// agent").
//
//	wake:
//	  debounce: 1.5s   # quiet a turn waits for; 0s for none
//	  maxDelay: 5s     # the most debounce puts a turn off
//	  rules:           # first match wins, before the host's defaults
//	    - {channel: "support", tagsAny: [chat:ambient], treat: wake}
//	    - {server: noisy, treat: ignore}

// Wake defaults.
const (
	DefaultDebounce = 1500 * time.Millisecond
	DefaultMaxDelay = 5 * time.Second
	// NoDebounce is Wake.Debounce for none: debounce: 0s in the file.
	NoDebounce time.Duration = -1
)

// Treatments a WakeRule gives.
const (
	TreatWake   = "wake"
	TreatBatch  = "batch"
	TreatIgnore = "ignore"
)

// Wake is an agent's treatment rules and debounce.
type Wake struct {
	// Debounce is how long a turn waits for no further waking message:
	// 0 means DefaultDebounce, NoDebounce none.
	Debounce time.Duration
	// MaxDelay bounds how long after the oldest waking message a turn
	// starts however many come (0: DefaultMaxDelay).
	MaxDelay time.Duration
	// Rules are the agent's own treatment rules, in order, before the
	// host's defaults.
	Rules []WakeRule
}

// WithDefaults returns w with its zero durations made the defaults.
func (w Wake) WithDefaults() Wake {
	if w.Debounce == 0 {
		w.Debounce = DefaultDebounce
	}
	if w.MaxDelay == 0 {
		w.MaxDelay = DefaultMaxDelay
	}
	return w
}

// WakeRule is one treatment rule (SPEC §16.7). Every matcher it sets must
// hold: TagsAny (one of the message's closure-expanded tags matches one
// of its globs), TagsAll (each glob matches a tag), TagsNone (no glob
// matches a tag); Servers, Channels and FeatureSets (the message's
// matches one of the globs); Source (channel, for a channel message, or
// push, for a push event without a channel). A glob's * matches any run
// of characters, ? one. Treat is TreatWake, TreatBatch or TreatIgnore.
type WakeRule struct {
	TagsAny, TagsAll, TagsNone []string
	Servers, Channels          []string
	FeatureSets                []string
	Source                     string
	Treat                      string
}

// pinRE is a tag ontology's pin (treat.Pin).
var pinRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

var (
	wakeKeys     = []string{"debounce", "maxDelay", "rules"}
	wakeRuleKeys = []string{"tagsAny", "tagsAll", "tagsNone", "server", "channel", "featureSet", "source", "treat"}
	treatments   = []string{TreatWake, TreatBatch, TreatIgnore}
	wakeSources  = []string{"channel", "push"}
)

// wake decodes an agent's wake mapping.
func (d *decoder) wake(n *yaml.Node, path string, line int) Wake {
	var w Wake
	d.fields(n, path, line, "a mapping like {debounce: 1.5s, rules: [...]}", wakeKeys, func(e entry, path string) {
		l := e.key.Line
		switch e.name {
		case "debounce":
			if v, ok := d.duration(e.val, path, l); ok {
				w.Debounce = v
				if v == 0 {
					w.Debounce = NoDebounce
				}
			}
		case "maxDelay":
			w.MaxDelay = d.positive(e.val, path, l)
		case "rules":
			w.Rules = d.wakeRules(e.val, path, l)
		}
	})
	if w.Debounce > 0 && w.MaxDelay > 0 && w.MaxDelay < w.Debounce {
		d.add(line, path, "maxDelay %s is shorter than debounce %s; a turn would never wait its debounce out", w.MaxDelay, w.Debounce)
	}
	return w
}

// wakeRules decodes a list of treatment rules.
func (d *decoder) wakeRules(n *yaml.Node, path string, line int) []WakeRule {
	if deref(n).Kind != yaml.SequenceNode {
		d.wrong(n, path, line, "a list of rules, each like {tagsAny: [chat:ambient], treat: batch}")
		return nil
	}
	var out []WakeRule
	for i, it := range deref(n).Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.alias(it, p)
		var r WakeRule
		treatLine := 0
		ok := d.fields(it, p, it.Line, "a mapping like {tagsAny: [chat:ambient], treat: batch}", wakeRuleKeys, func(e entry, path string) {
			l := e.key.Line
			switch e.name {
			case "tagsAny":
				r.TagsAny = d.globs(e.val, path, l)
			case "tagsAll":
				r.TagsAll = d.globs(e.val, path, l)
			case "tagsNone":
				r.TagsNone = d.globs(e.val, path, l)
			case "server":
				r.Servers = d.globs(e.val, path, l)
			case "channel":
				r.Channels = d.globs(e.val, path, l)
			case "featureSet":
				r.FeatureSets = d.globs(e.val, path, l)
			case "source":
				if v, ok := d.scalar(e.val, path, l, "channel or push"); ok {
					if !slices.Contains(wakeSources, v) {
						d.add(l, path, "%q is not a source; write channel or push", v)
					} else {
						r.Source = v
					}
				}
			case "treat":
				treatLine = l
				if v, ok := d.scalar(e.val, path, l, "wake, batch or ignore"); ok {
					if !slices.Contains(treatments, v) {
						d.add(l, path, "%q is not a treatment; write wake, batch or ignore%s", v, didYouMean(v, treatments))
					} else {
						r.Treat = v
					}
				}
			}
		})
		if !ok {
			continue
		}
		if treatLine == 0 {
			d.add(it.Line, p, "has no treat; give one of wake, batch, ignore")
		}
		out = append(out, r)
	}
	return out
}

// globs decodes one glob or a list of them; none may be blank.
func (d *decoder) globs(n *yaml.Node, path string, line int) []string {
	const want = `a pattern or a list of them, like "chat:*" or [general, "dev-*"]`
	blank := func(s string) string {
		if strings.TrimSpace(s) == "" {
			return "is empty; write * to match anything"
		}
		return ""
	}
	if deref(n).Kind == yaml.ScalarNode && !isNull(n) {
		v := deref(n).Value
		if msg := blank(v); msg != "" {
			d.add(line, path, "%s", msg)
			return nil
		}
		return []string{v}
	}
	if deref(n).Kind != yaml.SequenceNode {
		d.wrong(n, path, line, want)
		return nil
	}
	v, _ := d.list(n, path, line, want, blank)
	return v
}
