package transport

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// redacted stands in for the parts of a URL that may hold a secret.
const redacted = "REDACTED"

// unparsableURL stands in for a whole URL that RedactURL cannot take apart
// safely.
const unparsableURL = "(unparsable URL)"

// RedactURL returns raw fit for a log line or an error: its userinfo, query
// and fragment, where present, are each replaced by the word REDACTED, and
// its scheme, host, port and path are kept as they are. So
//
//	ws://user:s3cret@example.com:8080/mcp?token=abc#frag
//
// becomes
//
//	ws://REDACTED@example.com:8080/mcp?REDACTED#REDACTED
//
// A URL with none of those parts comes back as url.URL.String writes it.
// Anything that does not parse as scheme://host[/path][?query][#fragment]
// (a parse error, an opaque URL such as "user:s3cret@host", a URL with no
// scheme or no host) becomes the fixed text "(unparsable URL)", which holds
// no part of raw.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Scheme == "" || u.Host == "" {
		return unparsableURL
	}
	return redactParsed(u)
}

func redactParsed(u *url.URL) string {
	var b strings.Builder
	if u.Scheme != "" || u.Host != "" {
		b.WriteString(u.Scheme)
		b.WriteString("://")
	}
	if u.User != nil {
		b.WriteString(redacted + "@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?")
		if u.RawQuery != "" {
			b.WriteString(redacted)
		}
	}
	if u.Fragment != "" || u.RawFragment != "" {
		b.WriteString("#" + redacted)
	}
	return b.String()
}

// minSecretLen is the shortest secret scrubbed from free text. Shorter
// strings ("1", "ab") are too likely to occur by chance, and replacing
// every occurrence would garble the message; the URLs themselves are
// redacted whole, so this only bounds the second line of defence.
const minSecretLen = 4

// secrets collects the parts of URLs that must not appear in an error or a
// log line, in the forms they may take there.
type secrets struct {
	words []string
}

// addURL adds the secret parts of u (userinfo, query, fragment).
func (s *secrets) addURL(u *url.URL) {
	if u == nil {
		return
	}
	if u.User != nil {
		s.addUserinfo(u.User.String())
		s.add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			s.add(p)
			s.add(u.User.Username() + ":" + p)
		}
	}
	s.addQuery(u.RawQuery)
	s.add(u.Fragment)
	s.add(u.EscapedFragment())
}

// addRaw adds the secret parts of a URL given as text. One that does not
// parse is taken apart by hand, leniently.
func (s *secrets) addRaw(raw string) {
	if u, err := url.Parse(raw); err == nil {
		s.addURL(u)
		return
	}
	rest, frag, _ := strings.Cut(raw, "#")
	s.addEscaped(frag)
	rest, query, _ := strings.Cut(rest, "?")
	s.addQuery(query)
	if _, rest, ok := strings.Cut(rest, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			s.addUserinfo(rest[:at])
		}
	}
}

// addUserinfo adds userinfo as written ("user:pass", escaped), and its
// parts, escaped and not.
func (s *secrets) addUserinfo(ui string) {
	s.addEscaped(ui)
	user, pass, ok := strings.Cut(ui, ":")
	s.addEscaped(user)
	if ok {
		s.addEscaped(pass)
	}
}

// addQuery adds a raw query, and each of its key=value pairs and values,
// escaped and not.
func (s *secrets) addQuery(q string) {
	if q == "" {
		return
	}
	s.addEscaped(q)
	for kv := range strings.SplitSeq(q, "&") {
		s.addEscaped(kv)
		if _, v, ok := strings.Cut(kv, "="); ok {
			s.addEscaped(v)
		}
	}
}

// addEscaped adds w, and w unescaped both as a query and as a path would
// be, when that differs.
func (s *secrets) addEscaped(w string) {
	s.add(w)
	if d, err := url.QueryUnescape(w); err == nil {
		s.add(d)
	}
	if d, err := url.PathUnescape(w); err == nil {
		s.add(d)
	}
}

func (s *secrets) add(w string) {
	if len(w) < minSecretLen {
		return
	}
	s.words = append(s.words, w)
	// As %q would quote it, without the quotes.
	if q := strconv.Quote(w); q[1:len(q)-1] != w {
		s.words = append(s.words, q[1:len(q)-1])
	}
}

// scrub replaces every secret in text by REDACTED, longest first so that
// a secret inside a longer one does not leave the rest behind.
func (s *secrets) scrub(text string) string {
	if len(s.words) == 0 {
		return text
	}
	words := slices.Clone(s.words)
	slices.SortFunc(words, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	for _, w := range slices.Compact(words) {
		text = strings.ReplaceAll(text, w, redacted)
	}
	return text
}
