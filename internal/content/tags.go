package content

import "slices"

// Event tags (SPEC §16): the normative closure of the reserved chat:
// vocabulary, applied to push/event and channels/incoming. A producer's
// declared implications are never applied, and tags never authorize
// anything: they say what an event is, for a consumer's rules.
const (
	TagAddressed = "chat:addressed"
	TagAmbient   = "chat:ambient"
	TagMention   = "chat:mention"
	TagReply     = "chat:reply"
	TagDM        = "chat:dm"
	TagPrivate   = "chat:private"
)

// closure is SPEC §16.3's implications.
var closure = map[string][]string{
	TagMention: {TagAddressed},
	TagReply:   {TagAddressed},
	TagDM:      {TagAddressed, TagPrivate},
}

// Close returns tags as a set (duplicates dropped, first-seen order kept)
// with the core closure expanded transitively and chat:ambient dropped
// when chat:addressed holds. Nothing else is added: un-namespaced tags and
// producer namespaces pass through as they came.
func Close(tags []string) []string {
	out := make([]string, 0, len(tags)+2)
	seen := map[string]bool{}
	var add func(t string)
	add = func(t string) {
		if seen[t] {
			return
		}
		seen[t] = true
		out = append(out, t)
		for _, implied := range closure[t] {
			add(implied)
		}
	}
	for _, t := range tags {
		add(t)
	}
	if seen[TagAddressed] {
		out = slices.DeleteFunc(out, func(t string) bool { return t == TagAmbient })
	}
	return out
}
