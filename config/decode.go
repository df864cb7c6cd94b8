package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder walks a parsed YAML tree into typed values, recording every
// problem with its line and key path.
type decoder struct {
	file     string
	problems []Problem
	// machine: check what the file names on this machine too (see
	// Check).
	machine bool

	// budget is how much more aliases may have checked (see alias); set
	// by decodeFile.
	budget int
	// sizes memoizes size.
	sizes map[*yaml.Node]int
}

func (d *decoder) add(line int, key, format string, args ...any) {
	d.problems = append(d.problems, Problem{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// err returns the problems in file order; problems on one line keep the
// order they were found in.
func (d *decoder) err() *Error {
	byLine := func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) }
	// Most are found in file order already.
	if !slices.IsSortedFunc(d.problems, byLine) {
		slices.SortStableFunc(d.problems, byLine)
	}
	return &Error{Problems: d.problems}
}

// parse reads data as one YAML document and returns its top node, or nil
// after recording why it cannot.
func (d *decoder) parse(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.add(0, "", "the file is empty; a config file needs at least servers:")
		} else {
			d.syntax(data, err)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		d.add(next.Line, "", "a second YAML document starts here; a config file holds one")
	case !errors.Is(err, io.EOF):
		d.syntax(data, err)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		d.add(0, "", "the file is empty; a config file needs at least servers:")
		return nil
	}
	return doc.Content[0]
}

var yamlLineRE = regexp.MustCompile(`^yaml: line \d+: `)

// syntax records a YAML syntax error. yaml.v3 leaves the line out of some
// messages and gives a neighbouring line in others, so the line reported is
// the first at which a prefix of the file fails the same way; yaml.v3's own
// is the fallback.
func (d *decoder) syntax(data []byte, err error) {
	full := err.Error()
	msg := strings.TrimPrefix(yamlLineRE.ReplaceAllString(full, "yaml: "), "yaml: ")
	line := failingLine(data, msg)
	if line == 0 {
		if m := yamlLineRE.FindString(full); m != "" {
			line, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(m, "yaml: line "), ": "))
		}
	}
	if line > 0 && bytes.ContainsRune(lineAt(data, line), '\t') && !strings.Contains(msg, "tab") {
		msg += " (indent with spaces: YAML does not allow tabs there)"
	}
	if line > 0 && strings.Contains(msg, "did not find expected alphabetic or numeric character") && bytes.ContainsRune(lineAt(data, line), '*') {
		msg += ` (a * that starts a value is read as an alias; quote it: "*")`
	}
	d.add(line, "", "not valid YAML: %s", msg)
}

// failingLine returns the number of lines of the shortest prefix of data
// that fails to parse with msg, or 0. It searches by bisection, taking a
// prefix that holds the bad line to fail as the whole file does; a prefix
// cut inside a construct that spans lines may fail the same way, which
// points at where that construct starts.
//
// It parses about log2(lines) prefixes, at most the whole file each: this
// is the one step whose time is not linear in the file's size, and it is
// taken only for a file that is not valid YAML.
func failingLine(data []byte, msg string) int {
	// ends[k] is where the first k lines end, each with its newline; the
	// last line is what follows the last newline, even if nothing.
	ends := []int{0}
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	ends = append(ends, len(data))
	fails := func(k int) bool {
		dec := yaml.NewDecoder(bytes.NewReader(data[:ends[k]]))
		for {
			var n yaml.Node
			err := dec.Decode(&n)
			if err == nil {
				continue
			}
			return strings.TrimPrefix(yamlLineRE.ReplaceAllString(err.Error(), "yaml: "), "yaml: ") == msg
		}
	}
	lo, hi := 1, len(ends)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if !fails(lo) {
		return 0
	}
	return lo
}

// lineAt returns line n (from 1) of data without its newline; nil past
// the end.
func lineAt(data []byte, n int) []byte {
	for ; n > 1; n-- {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil
		}
		data = data[i+1:]
	}
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	}
	return data
}

// entry is one key of a mapping and its value.
type entry struct {
	name     string
	key, val *yaml.Node
}

// entries returns a mapping's pairs in order, recording keys given twice
// and keys that are not names. Merge keys ("<<") add the pairs of the
// mappings they name, under the keys given explicitly; a merged mapping's
// own merges follow its pairs, depth first. A mapping reached again by
// another route (or a cycle of aliases) adds nothing new, so it is walked
// once: otherwise merges that share mappings cost time exponential in the
// file's length, and a cycle never ends.
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	out, merges := d.pairs(n, path)
	if len(merges) == 0 {
		return out
	}
	seen := make(map[string]bool, len(out))
	for _, e := range out {
		seen[e.name] = true
	}
	visited := map[*yaml.Node]bool{n: true}
	var merge func(m *yaml.Node, line int)
	merge = func(v *yaml.Node, line int) {
		m := deref(v)
		if visited[m] {
			return
		}
		d.alias(v, join(path, "<<"))
		switch m.Kind {
		case yaml.MappingNode:
			visited[m] = true
			own, more := d.pairs(m, path)
			for _, e := range own {
				if !seen[e.name] {
					seen[e.name] = true
					out = append(out, e)
				}
			}
			for _, mm := range more {
				merge(mm, mm.Line)
			}
		case yaml.SequenceNode:
			for _, it := range m.Content {
				if deref(it).Kind != yaml.MappingNode {
					d.alias(it, join(path, "<<"))
					d.add(it.Line, join(path, "<<"), "merges mappings, not %s", describe(it))
					continue
				}
				merge(it, it.Line)
			}
		default:
			d.add(line, join(path, "<<"), "merges a mapping or a list of mappings, not %s", describe(m))
		}
	}
	for _, m := range merges {
		merge(m, m.Line)
	}
	return out
}

// pairs returns mapping n's own pairs in order and the values of its merge
// keys, recording keys given twice and keys that are not names.
func (d *decoder) pairs(n *yaml.Node, path string) (out []entry, merges []*yaml.Node) {
	out = make([]entry, 0, len(n.Content)/2)
	// A few keys are compared directly; a map finds duplicates among many.
	var first map[string]int
	if len(n.Content) > 2*smallMapping {
		first = make(map[string]int, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		d.alias(k, path)
		if deref(k).Kind != yaml.ScalarNode {
			d.add(k.Line, path, "a key must be a name, not %s", describe(k))
			continue
		}
		name := deref(k).Value
		dupLine, dup := 0, false
		if first != nil {
			dupLine, dup = first[name]
		} else {
			for _, e := range out {
				if e.name == name {
					dupLine, dup = e.key.Line, true
					break
				}
			}
		}
		if dup {
			d.add(k.Line, join(path, name), "given twice in one mapping (first on line %d)", dupLine)
			continue
		}
		if first != nil {
			first[name] = k.Line
		}
		out = append(out, entry{name, k, v})
	}
	return out, merges
}

// smallMapping is the most keys a mapping may have for pairs to look for
// duplicates without a map.
const smallMapping = 16

// fields walks mapping n at path: set receives each entry whose key is in
// known, with its path; any other key is a problem that suggests the
// nearest known one. It reports whether n was a mapping.
func (d *decoder) fields(n *yaml.Node, path string, line int, want string, known []string, set func(e entry, path string)) bool {
	if deref(n).Kind != yaml.MappingNode {
		d.wrong(n, path, line, want)
		return false
	}
	for _, e := range d.entries(deref(n), path) {
		p := join(path, e.name)
		if !slices.Contains(known, e.name) {
			d.add(e.key.Line, p, "unknown key%s", suggest(e.name, known))
			continue
		}
		d.alias(e.val, p)
		set(e, p)
	}
	return true
}

// wrong records that n is not the kind of value the key wants. It quotes a
// scalar; callers whose values may be secret accept every scalar, so that
// only kinds are ever named for them.
func (d *decoder) wrong(n *yaml.Node, path string, line int, want string) {
	if isNull(n) {
		d.add(line, path, "has no value; give %s, or leave the key out", want)
		return
	}
	d.add(line, path, "must be %s, not %s", want, describe(n))
}

// scalar returns a scalar's text as written, whatever YAML type it has.
func (d *decoder) scalar(n *yaml.Node, path string, line int, want string) (string, bool) {
	if deref(n).Kind != yaml.ScalarNode || isNull(n) {
		d.wrong(n, path, line, want)
		return "", false
	}
	return deref(n).Value, true
}

func (d *decoder) boolean(n *yaml.Node, path string, line int) (bool, bool) {
	v := deref(n)
	if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" {
		return strings.EqualFold(v.Value, "true"), true
	}
	if v.Kind == yaml.ScalarNode && (strings.EqualFold(v.Value, "true") || strings.EqualFold(v.Value, "false")) {
		d.add(line, path, "must be true or false without quotes")
		return false, false
	}
	d.wrong(n, path, line, "true or false")
	return false, false
}

// integer parses a whole number, written without quotes (as YAML writes
// integers: 200000, 200_000, 0x400).
func (d *decoder) integer(n *yaml.Node, path string, line int) (int, bool) {
	v := deref(n)
	if v.Kind == yaml.ScalarNode && v.Tag == "!!int" {
		var i int
		if err := v.Decode(&i); err != nil {
			d.add(line, path, "%q is too large", v.Value)
			return 0, false
		}
		return i, true
	}
	if v.Kind == yaml.ScalarNode {
		_, err := strconv.Atoi(v.Value)
		switch {
		case err == nil && v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
			d.add(line, path, "must be a whole number without quotes")
			return 0, false
		case errors.Is(err, strconv.ErrRange):
			d.add(line, path, "%q is too large", v.Value)
			return 0, false
		}
	}
	d.wrong(n, path, line, "a whole number")
	return 0, false
}

// durationRE is the syntax time.ParseDuration accepts, apart from "0": a
// sign, then numbers with a unit each (ns, us, µs, μs, ms, s, m, h). A
// string that matches it and still fails to parse is too large.
var durationRE = regexp.MustCompile(`^[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+$`)

// duration parses a Go duration that is not negative.
func (d *decoder) duration(n *yaml.Node, path string, line int) (time.Duration, bool) {
	s, ok := d.scalar(n, path, line, "a duration like 5s or 2m30s")
	if !ok {
		return 0, false
	}
	v, err := time.ParseDuration(s)
	if err != nil && durationRE.MatchString(s) {
		// Written as a duration, but time.ParseDuration says only
		// "invalid" of one too long for its int64 of nanoseconds.
		d.add(line, path, "%q overflows a duration (at most %s, about 292 years)", s, time.Duration(math.MaxInt64))
		return 0, false
	}
	if err != nil {
		d.add(line, path, "%q is not a duration (write it like 5s or 2m30s)", s)
		return 0, false
	}
	if v < 0 {
		d.add(line, path, "%q is negative; a duration must be 0 or more", s)
		return 0, false
	}
	return v, true
}

// list returns a list of scalars as text. An empty list is a non-nil
// empty slice, apart from an absent one. check, if not nil, returns a
// problem with one item ("" for none).
func (d *decoder) list(n *yaml.Node, path string, line int, want string, check func(string) string) ([]string, bool) {
	if deref(n).Kind != yaml.SequenceNode {
		d.wrong(n, path, line, want)
		return nil, false
	}
	out := []string{}
	ok := true
	for i, it := range deref(n).Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.alias(it, p)
		s, good := d.scalar(it, p, it.Line, "a string")
		if good && check != nil {
			if msg := check(s); msg != "" {
				d.add(it.Line, p, "%s", msg)
				good = false
			}
		}
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// alias charges the budget for checking, once more, the value that n
// names when n is an alias; past the budget it stops the decoder (see
// decodeFile). Every place the decoder takes a value from a mapping or a
// list calls it first, so however much of the file aliases repeat, the
// decoder's work stays proportional to the file's size and the budget: a
// few lines of aliases could otherwise have it check more values than
// there are bytes in the file, for every one of them.
func (d *decoder) alias(n *yaml.Node, path string) {
	if n.Kind != yaml.AliasNode || n.Alias == nil {
		return
	}
	d.budget -= d.size(n.Alias)
	if d.budget < 0 {
		panic(overBudget{line: n.Line, path: path})
	}
}

// overBudget is the panic that stops a decoder when aliases have used up
// its budget, at the alias on line, where the value at path is.
type overBudget struct {
	line int
	path string
}

// The alias budget: aliases may make the decoder check aliasBudgetBase of
// size (see size), and one more for each aliasBudgetBytes bytes
// of the file. That is seconds of checking at most, and far more than a
// file needs that merges a mapping of defaults into each of its servers.
const (
	aliasBudgetBase  = 1 << 20
	aliasBudgetBytes = 2
)

// size measures the work of checking n: its nodes, a node more for every
// 16 bytes of scalar text, and an alias in it as one node (the decoder
// charges for an alias where it reaches it).
func (d *decoder) size(n *yaml.Node) int {
	if s, ok := d.sizes[n]; ok {
		return s
	}
	s := 1 + len(n.Value)/16
	if n.Kind != yaml.AliasNode {
		for _, c := range n.Content {
			s += d.size(c)
		}
	}
	if d.sizes == nil {
		d.sizes = map[*yaml.Node]int{}
	}
	d.sizes[n] = s
	return s
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// describe names a value for a message: its kind, or a scalar quoted.
func describe(n *yaml.Node) string {
	n = deref(n)
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case isNull(n):
		return "nothing"
	case n.Kind == yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// hints answer keys that other hosts' configurations use, keys that would
// hold a secret, and keys written outside the mapping they belong in.
var hints = map[string]string{
	"args":                   "command holds the program and its arguments in one list, like command: [go, run, ./server]",
	"token":                  "tokens are never written in the file: put it in an environment variable and name the variable with tokenEnv",
	"transport":              "the transport follows from command (a subprocess over stdio) or url (a WebSocket)",
	"enabledTools":           "write tools: {enable: [...]}",
	"disabledTools":          "write tools: {disable: [...]}",
	"enabledCapabilities":    "write capabilities: {enable: [...]}",
	"disabledCapabilities":   "write capabilities: {disable: [...]}",
	"enabledFeatureSets":     "write featureSets: {enable: [...]}",
	"disabledFeatureSets":    "write featureSets: {disable: [...]}",
	"channelSubscription":    "write channels: {subscription: manual}",
	"subscription":           "write channels: {subscription: manual}",
	"sendTools":              "write channels: {sendTools: [...]}",
	"reconnectIntervalMs":    "write reconnect: {initial: 5s}",
	"reconnectMaxIntervalMs": "write reconnect: {max: 5m}",
	"requestTimeoutMs":       "write requestTimeout: 60s, a duration",
	"mcplServers":            "did you mean servers?",
	"systemPrompt":           "write system: and the prompt",
	"apiKey":                 "API keys are never written in the file: put it in an environment variable and name the variable with apiKeyEnv",
	"api_key":                "API keys are never written in the file: put it in an environment variable and name the variable with apiKeyEnv",
	"provider":               "provider goes in an agent's model: write model: {provider: scripted, echo: true}",
	"script":                 "script goes in an agent's model: write model: {provider: scripted, script: ./steps.yaml}",
	"maxTokens":              "maxTokens is an agent's: write it beside name: and model:",
	"system":                 "system is an agent's: write it beside name: and model:",
	"allowedTools":           "allowedTools is an agent's: write it beside name: and model:; a server's tools are limited with tools: {enable: [...]}",
	"inferenceRouting":       "write inference: [{server: ..., featureSet: ..., agent: ...}]",
}

// suggest returns " (hint)" for an unknown key: a known key within a small
// edit distance, or a hint; "" when nothing is close. Of the known keys
// nearest to name, case aside, it names the first.
func suggest(name string, known []string) string {
	if h, ok := hints[name]; ok {
		return " (" + h + ")"
	}
	return didYouMean(name, known)
}

// didYouMean returns " (did you mean k?)" for the first of the known
// values k nearest to name, case aside, within a small edit distance; ""
// when none is that close.
func didYouMean(name string, known []string) string {
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	lower := strings.ToLower(name)
	best, bestDist := "", limit+1
	for _, k := range known {
		// Only a key nearer than the best so far can replace it.
		if dist, ok := editDistanceWithin(lower, k, bestDist-1); ok {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// editDistanceWithin returns the Levenshtein distance, in bytes, between
// a and the ASCII key b in lower case, and whether it is at most limit;
// when it is not, it stops as soon as that is certain.
func editDistanceWithin(a, b string, limit int) (int, bool) {
	if limit < 0 || len(a)-len(b) > limit || len(b)-len(a) > limit {
		return 0, false
	}
	var buf [64]int // room for the known keys' rows
	n := len(b) + 1
	var prev, cur []int
	if 2*n <= len(buf) {
		prev, cur = buf[:n], buf[n:2*n]
	} else {
		prev, cur = make([]int, n), make([]int, n)
	}
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		least := i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == lowerASCII(b[j-1]) {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			least = min(least, cur[j])
		}
		if least > limit {
			// Every path to the end goes through this row.
			return 0, false
		}
		prev, cur = cur, prev
	}
	return prev[len(b)], prev[len(b)] <= limit
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
