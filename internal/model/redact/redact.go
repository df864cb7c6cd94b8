// Package redact removes what looks like a credential from a text before
// it reaches an error, a log or an agent: the providers quote their
// provider's error messages and bodies, which can echo a key (a rejected
// one, or part of one), and a text must never carry one.
//
// Decisions:
//
//   - It works by shape, not by knowing the key: a provider also removes
//     its own configured key's value, and Keys catches the rest (a key
//     the provider echoes that is not the configured one, another
//     service's token quoted in a message).
//   - What is replaced by [redacted]:
//     an sk- key (OpenAI's sk-…, sk-proj-…, Anthropic's sk-ant-…; four or
//     more letters, digits, '-', '_' or '*' after "sk-", so a masked key
//     such as sk-proj-****abcd goes too);
//     the credential after "Bearer " (the word Bearer is kept);
//     the value after an x-api-key, api-key or api_key name followed by
//     ':' or '=' (the name is kept);
//     any other run of 32 or more base64 or hex characters (letters,
//     digits, '+', '/', '=', '-', '_') that holds a stretch of 20 or
//     more letters and digits, mixed, between those separators: a random
//     token. Identifiers made of words joined by '_' or '-' (a tool
//     name, an error type) and UUIDs have no such stretch and are kept.
//   - It errs on the side of removing: a long mixed string that is not a
//     secret (a hash, a long id) is removed too; the texts it guards are
//     for reading, and no one needs that string from them.
package redact

import (
	"regexp"
	"strings"
	"unicode"
)

// Mark is what a credential is replaced by.
const Mark = "[redacted]"

var (
	skKey     = regexp.MustCompile(`\bsk-[A-Za-z0-9_*\-]{4,}`)
	bearer    = regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9._~+/*\-]+=*`)
	headerKey = regexp.MustCompile(`(?i)\b(x-api-key|api[-_]key)("?\s*[:=]\s*"?)([^\s",;]+)`)
	opaque    = regexp.MustCompile(`[A-Za-z0-9+/=_\-]{32,}`)
)

// Keys returns s with everything key-shaped in it replaced by [redacted]
// (see the package doc for the shapes).
func Keys(s string) string {
	s = skKey.ReplaceAllString(s, Mark)
	s = bearer.ReplaceAllString(s, "${1} "+Mark)
	s = headerKey.ReplaceAllStringFunc(s, func(m string) string {
		sub := headerKey.FindStringSubmatch(m)
		if sub[3] == Mark {
			return m
		}
		return sub[1] + sub[2] + Mark
	})
	return opaque.ReplaceAllStringFunc(s, func(m string) string {
		if isToken(m) {
			return Mark
		}
		return m
	})
}

// Key returns s with every occurrence of key replaced by [redacted], then
// everything key-shaped (Keys). An empty key only does the latter.
func Key(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, Mark)
	}
	return Keys(s)
}

// isToken reports whether a run of base64 or hex characters holds a
// stretch of 20 or more letters and digits, with both, between
// separators.
func isToken(run string) bool {
	for _, part := range strings.FieldsFunc(run, func(r rune) bool { return strings.ContainsRune("+/=_-", r) }) {
		if len(part) < 20 {
			continue
		}
		letter := strings.IndexFunc(part, unicode.IsLetter) >= 0
		digit := strings.IndexFunc(part, unicode.IsDigit) >= 0
		if letter && digit {
			return true
		}
	}
	return false
}
