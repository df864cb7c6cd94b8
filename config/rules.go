package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

var (
	idRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	prefixRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// paramNameRE is a tokenParam: a query parameter name that needs no
	// escaping.
	paramNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	capSegRE    = regexp.MustCompile(`^(?:[A-Za-z0-9]+|\*)$`)
	// agentNameRE is the name field model APIs accept for a participant.
	agentNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// maxAgentName is the longest an agent's name may be.
const maxAgentName = 64

// nameProblem says what makes name unfit as an agent's name, or "". A
// name too long is not quoted: it may be any size.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "is empty; every agent needs a name, like name: ada"
	case len(name) > maxAgentName:
		return fmt.Sprintf("is longer than %d characters; a name is a short identifier, like ada", maxAgentName)
	case !agentNameRE.MatchString(name):
		return fmt.Sprintf(`%q is not a valid name: use letters, digits, "_" and "-" only, like ada or helper-2`, name)
	}
	return ""
}

func idProblem(id string) string {
	if id == "" {
		return "is empty; every server needs an id, like id: chat"
	}
	if !idRE.MatchString(id) {
		return `is not a valid id: it must start with a letter or digit and hold only letters, digits, "_", "." and "-"`
	}
	return ""
}

// prefixProblem says what makes p unfit as a tool prefix, or "".
func prefixProblem(p string) string {
	switch {
	case p == "":
		return "it is empty (leave toolPrefix out to use the id)"
	case !prefixRE.MatchString(p):
		msg := `it must start with a letter or digit and hold only letters, digits, "_" and "-"`
		if strings.Contains(p, ".") {
			msg += ` (model APIs refuse "." in tool names)`
		}
		return msg
	case strings.Contains(p, "--"):
		return `it holds "--", which separates the prefix from the tool's name`
	case strings.HasSuffix(p, "-"):
		return `it ends with "-", which runs into the "--" after it`
	}
	return ""
}

// urlProblem says what makes raw unfit as a server URL, or "". It never
// quotes a URL that may hold a credential, and quotes others without their
// query.
func urlProblem(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a URL; write it like ws://host:port/path"
	}
	if u.User != nil {
		return "holds a user or password; tokens are never written in the file: put the token in an environment variable and name the variable with tokenEnv"
	}
	for name := range u.Query() {
		if credentialParam(name) {
			return fmt.Sprintf("has a parameter %s; tokens are never written in the file: put the token in an environment variable and name the variable with tokenEnv", name)
		}
	}
	shown := raw
	if u.RawQuery != "" || u.Fragment != "" {
		shown = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, Opaque: u.Opaque}).String()
	}
	switch {
	case u.Scheme == "" || u.Opaque != "" || !strings.Contains(raw, "://"):
		return fmt.Sprintf("%q has no scheme; write ws://host:port/path or wss://host:port/path (WebSocket), or http://host:port/path or https://host:port/path (Streamable HTTP)", shown)
	case u.Scheme != "ws" && u.Scheme != "wss" && u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q has scheme %s; a server URL must be ws://, wss://, http:// or https://", shown, u.Scheme)
	case u.Hostname() == "":
		return fmt.Sprintf("%q has no host; write it like ws://host:port/path", shown)
	case strings.HasSuffix(u.Host, ":"):
		// Go's dialers take an empty port for the scheme's, so this would
		// dial port 80 (443 for wss): never what a ":" meant.
		if u.Scheme == "http" || u.Scheme == "https" {
			return fmt.Sprintf("%q has an empty port after its \":\"; write the port, like http://127.0.0.1:3000/mcp, or leave out the \":\" for the scheme's default (80 for http, 443 for https)", shown)
		}
		return fmt.Sprintf("%q has an empty port after its \":\"; write the port, like ws://127.0.0.1:9000/mcpl, or leave out the \":\" for the scheme's default (80 for ws, 443 for wss)", shown)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q has port %s; a port is a number from 1 to 65535", shown, port)
		}
	}
	return ""
}

// baseURLProblem says what makes raw unfit as a model API's base URL, or
// "". It never quotes a URL that may hold a credential, and quotes others
// without their query.
func baseURLProblem(raw string) string {
	const keyHint = "API keys are never written in the file: put the key in an environment variable and name the variable with apiKeyEnv"
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a URL; write it like https://api.example.com/v1"
	}
	if u.User != nil {
		return "holds a user or password; " + keyHint
	}
	for name := range u.Query() {
		if credentialParam(name) || strings.EqualFold(name, "key") {
			return fmt.Sprintf("has a parameter %s; %s", name, keyHint)
		}
	}
	shown := raw
	if u.RawQuery != "" || u.Fragment != "" {
		shown = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, Opaque: u.Opaque}).String()
	}
	switch {
	case u.Scheme == "" || u.Opaque != "" || !strings.Contains(raw, "://"):
		return fmt.Sprintf("%q has no scheme; write http://host:port/path or https://host:port/path", shown)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q has scheme %s; a base URL must be http:// or https://", shown, u.Scheme)
	case u.Hostname() == "":
		return fmt.Sprintf("%q has no host; write it like https://api.example.com/v1", shown)
	case strings.HasSuffix(u.Host, ":"):
		return fmt.Sprintf("%q has an empty port after its \":\"; write the port, like http://127.0.0.1:8080/v1, or leave out the \":\" for the scheme's default (80 for http, 443 for https)", shown)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q has port %s; a port is a number from 1 to 65535", shown, port)
		}
	}
	return ""
}

func credentialParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"token", "secret", "password", "apikey", "api_key", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func toolPatternProblem(p string) string {
	if p == "" {
		return "is empty; give a tool's bare name, or a pattern with *"
	}
	return ""
}

// agentToolPatternProblem checks an allowedTools entry: a tool's name as
// agents see it, where * matches any run of characters. "all" in a list
// would name a tool called all, which is not what it means.
func agentToolPatternProblem(p string) string {
	switch p {
	case "":
		return "is empty; give a tool's name as agents see it, like channel_open or chat--send_message, or a pattern with *"
	case "all":
		return `"all" in a list would name a tool called all; write allowedTools: all, not in a list, to allow every tool`
	}
	return ""
}

// sendToolProblem checks a channels.sendTools entry: a bare tool name,
// matched exactly, so * is refused rather than silently never matching.
func sendToolProblem(n string) string {
	switch {
	case n == "":
		return "is empty; give a tool's bare name, like send_message"
	case strings.Contains(n, "*"):
		return fmt.Sprintf("%q is not a tool name: sendTools names tools exactly, with no patterns; write each one, like send_message", n)
	}
	return ""
}

// capabilityPatternProblem checks a capability pattern's syntax only: a
// well-formed path this host does not know is accepted, since a newer
// server may advertise it.
func capabilityPatternProblem(p string) string {
	for seg := range strings.SplitSeq(p, ".") {
		if !capSegRE.MatchString(seg) {
			return fmt.Sprintf("%q is not a capability pattern; write dot-separated names of letters and digits, or *, like channels.publish or channels.*", p)
		}
	}
	return ""
}

// featureSetPatternProblem checks a feature-set pattern: a dot-separated
// name, "*", or a name ending in ".*" (the forms grant matches).
func featureSetPatternProblem(p string) string {
	segs := strings.Split(p, ".")
	for i, seg := range segs {
		last := i == len(segs)-1
		if seg == "" || strings.ContainsAny(seg, " \t\r\n") || (strings.Contains(seg, "*") && (!last || seg != "*")) {
			return fmt.Sprintf("%q is not a feature-set pattern; write a dot-separated name like memory.retrieval, memory.* for every set under memory, or * for all", p)
		}
	}
	return ""
}

// PrefixesMeet reports whether one tool name could resolve to both
// prefixes: whether some N = a+"--"+t1 = b+"--"+t2 with t1 and t2 not
// empty. Equal prefixes meet; so do "a" and "a--b" ("a--b--x"), and "a"
// and "a-" ("a---x"); "a" and "ab" do not.
func PrefixesMeet(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b+"--", a+"--")
}

// PrefixOwner is a server and the tool prefix it holds.
type PrefixOwner struct {
	ID, Prefix string
}

// PrefixConflictError says that two servers' tool prefixes meet.
type PrefixConflictError struct {
	ID, Prefix           string // the server being checked
	OtherID, OtherPrefix string // the server that holds the prefix already
}

func (e *PrefixConflictError) Error() string {
	long := e.Prefix
	if len(e.OtherPrefix) > len(long) {
		long = e.OtherPrefix
	}
	if e.Prefix == e.OtherPrefix {
		return fmt.Sprintf("servers %q and %q: both use tool prefix %q: a tool name like %q could belong to either",
			e.OtherID, e.ID, e.Prefix, long+"--x")
	}
	return fmt.Sprintf("servers %q and %q: tool prefixes %q and %q meet: a tool name like %q could belong to either",
		e.OtherID, e.ID, e.OtherPrefix, e.Prefix, long+"--x")
}

// CheckPrefix checks a prospective server's tool prefix against those
// already held, returning a *PrefixConflictError for the first that meets
// it. An owner with the same id is skipped: a server does not conflict
// with itself (as when it is restarted). It checks meeting only; the
// prefix's own syntax is checked at load.
func CheckPrefix(id, prefix string, existing []PrefixOwner) error {
	for _, o := range existing {
		if o.ID != id && PrefixesMeet(o.Prefix, prefix) {
			return &PrefixConflictError{ID: id, Prefix: prefix, OtherID: o.ID, OtherPrefix: o.Prefix}
		}
	}
	return nil
}

// ToolPolicy allows or refuses a server's tools by bare name.
type ToolPolicy struct {
	// Enable, when not nil, is an allowlist of tool-name patterns; nil
	// allows every tool. Disable lists patterns never allowed; it wins.
	Enable, Disable []string
}

// Allows reports whether the tool with bare name is allowed. In a pattern
// * matches any run of characters, including none.
func (t ToolPolicy) Allows(name string) bool {
	for _, p := range t.Disable {
		if globMatch(p, name) {
			return false
		}
	}
	if t.Enable == nil {
		return true
	}
	for _, p := range t.Enable {
		if globMatch(p, name) {
			return true
		}
	}
	return false
}

// globMatch matches name against pattern, where * matches any run of
// bytes and every other byte matches itself.
func globMatch(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// isWebSocketURL reports whether raw is a ws:// or wss:// URL.
func isWebSocketURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "ws" || u.Scheme == "wss")
}

// urlHasParam reports whether raw's query has the parameter name.
func urlHasParam(raw, name string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Query().Has(name)
}
