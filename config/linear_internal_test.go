package config

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The tests here check the decoder's linear-time steps against the
// quadratic ones they replaced, kept below as references: same problems,
// in the same order.

// TestCrossServersReference: crossServers reports what comparing every
// server with every earlier one did, for prefixes that meet in every way
// PrefixesMeet allows (valid ones meet only when equal).
func TestCrossServersReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "a-", "a--b", "c"}
	word := func() string {
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = "ab-"[r.IntN(3)]
		}
		return string(b)
	}
	for range 20000 {
		servers := make([]placed, r.IntN(12))
		for i := range servers {
			servers[i] = placed{
				ID: ids[r.IntN(len(ids))], ToolPrefix: word(),
				path:   fmt.Sprintf("servers[%d]", i),
				idLine: 10 * i, preLine: 10*i + r.IntN(3),
				idOK: r.IntN(8) > 0, preOK: r.IntN(8) > 0,
			}
		}
		got, want := &decoder{file: "f"}, &decoder{file: "f"}
		got.crossServers(servers)
		want.refCrossServers(servers)
		if !slices.Equal(got.problems, want.problems) {
			t.Fatalf("servers %+v:\n got %v\nwant %v", servers, got.problems, want.problems)
		}
	}
}

// refCrossServers is crossServers as it was: quadratic.
func (d *decoder) refCrossServers(servers []placed) {
	for i, s := range servers {
		for _, o := range servers[:i] {
			if s.idOK && o.idOK && s.ID == o.ID {
				d.add(s.idLine, join(s.path, "id"), "%q is also the id of %s (line %d); ids must be unique", s.ID, o.path, o.idLine)
				break
			}
		}
	}
	for i, s := range servers {
		if !s.preOK || !s.idOK {
			continue
		}
		var owners []PrefixOwner
		for _, o := range servers[:i] {
			if o.preOK && o.idOK && o.ID != s.ID {
				owners = append(owners, PrefixOwner{ID: o.ID, Prefix: o.ToolPrefix})
			}
		}
		if err := CheckPrefix(s.ID, s.ToolPrefix, owners); err != nil {
			d.add(s.preLine, join(s.path, "toolPrefix"), "%v", err)
		}
	}
}

// TestSuggestReference: suggest names the key the full edit distance to
// every known key did.
func TestSuggestReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	known := [][]string{topKeys, serverKeys, reconnectKeys, policyKeys, channelsKeys, agentKeys, modelKeys, routeKeys, providers, conversationModes, {"aB", "Ab", "ab"}}
	names := []string{"", "x", "ID", "Id", "comand", "commands", "envv", "inheritenv", "INHERITENV", "tool_prefix", "reconect", "Ünknown", "İd", "featuresets", "chanels", "token", "args"}
	for _, ks := range known {
		for _, k := range ks {
			names = append(names, k, strings.ToUpper(k), k+"s", k[1:], k[:len(k)-1]+"x")
		}
	}
	for range 20000 {
		b := make([]byte, r.IntN(16))
		const alphabet = "abcdeilmnorstIET_-\xc3\x9c"
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		names = append(names, string(b))
	}
	for _, name := range names {
		for _, ks := range known {
			if got, want := suggest(name, ks), refSuggest(name, ks); got != want {
				t.Errorf("suggest(%q, %q) = %q, want %q", name, ks, got, want)
			}
		}
	}
}

func refSuggest(name string, known []string) string {
	if h, ok := hints[name]; ok {
		return " (" + h + ")"
	}
	best, bestDist := "", -1
	for _, k := range known {
		dist := refEditDistance(strings.ToLower(name), strings.ToLower(k))
		if bestDist < 0 || dist < bestDist {
			best, bestDist = k, dist
		}
	}
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	if best == "" || bestDist > limit {
		return ""
	}
	return " (did you mean " + best + "?)"
}

func refEditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// TestEntriesReference: entries gives the pairs the recursive walk did,
// which walked a mapping merged by two routes twice, and its problems
// without the repeats that second walk made.
func TestEntriesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		line := 0
		node := func(n *yaml.Node) *yaml.Node {
			line++
			n.Line = line
			return n
		}
		scalar := func(v string) *yaml.Node {
			return node(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v})
		}
		var maps []*yaml.Node
		alias := func() *yaml.Node {
			if len(maps) == 0 || r.IntN(10) == 0 {
				return scalar("x")
			}
			return node(&yaml.Node{Kind: yaml.AliasNode, Alias: maps[r.IntN(len(maps))]})
		}
		for range 1 + r.IntN(8) {
			m := node(&yaml.Node{Kind: yaml.MappingNode})
			for range r.IntN(6) {
				var k, v *yaml.Node
				switch r.IntN(6) {
				case 0:
					k = node(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!merge", Value: "<<"})
					if r.IntN(2) == 0 {
						v = alias()
					} else {
						v = node(&yaml.Node{Kind: yaml.SequenceNode})
						for range r.IntN(4) {
							v.Content = append(v.Content, alias())
						}
					}
				case 1:
					k, v = node(&yaml.Node{Kind: yaml.SequenceNode}), scalar("1")
				default:
					k, v = scalar(string(rune('a'+r.IntN(5)))), scalar("1")
				}
				m.Content = append(m.Content, k, v)
			}
			maps = append(maps, m)
		}
		top := maps[len(maps)-1]
		got, want := &decoder{file: "f", budget: 1 << 30}, &decoder{file: "f"}
		gotEntries, wantEntries := got.entries(top, "p"), want.refEntries(top, "p")
		if !slices.Equal(gotEntries, wantEntries) {
			t.Fatalf("entries %v, want %v", gotEntries, wantEntries)
		}
		// Every node has a line of its own, so a problem repeated is one
		// found again.
		var once []Problem
		for _, p := range want.problems {
			if !slices.Contains(once, p) {
				once = append(once, p)
			}
		}
		if !slices.Equal(got.problems, once) {
			t.Fatalf("problems\n%v\nwant\n%v", got.problems, once)
		}
	}
}

// refEntries is entries as it was: a merged mapping's merges were walked
// afresh wherever it was merged.
func (d *decoder) refEntries(n *yaml.Node, path string) []entry {
	var out []entry
	var merges []*yaml.Node
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if deref(k).Kind != yaml.ScalarNode {
			d.add(k.Line, path, "a key must be a name, not %s", describe(k))
			continue
		}
		name := deref(k).Value
		if first, dup := seen[name]; dup {
			d.add(k.Line, join(path, name), "given twice in one mapping (first on line %d)", first)
			continue
		}
		seen[name] = k.Line
		out = append(out, entry{name, k, v})
	}
	visited := map[*yaml.Node]bool{n: true}
	var merge func(m *yaml.Node, line int)
	merge = func(m *yaml.Node, line int) {
		m = deref(m)
		switch m.Kind {
		case yaml.MappingNode:
			if visited[m] {
				return
			}
			visited[m] = true
			for _, e := range d.refEntries(m, path) {
				if _, ok := seen[e.name]; !ok {
					seen[e.name] = e.key.Line
					out = append(out, e)
				}
			}
		case yaml.SequenceNode:
			for _, it := range m.Content {
				if deref(it).Kind != yaml.MappingNode {
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

// TestFailingLineReference: failingLine finds the line bisecting joined
// lines did, in files broken at random.
func TestFailingLineReference(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	r := rand.New(rand.NewPCG(7, 8))
	tried := 0
	for range 3000 {
		data, err := os.ReadFile(files[r.IntN(len(files))])
		if err != nil {
			t.Fatal(err)
		}
		for range 1 + r.IntN(3) {
			at := r.IntN(len(data) + 1)
			ins := []string{"[", "]", "{", ":", "'", "\"", "\t", "\n", "  ", "- ", "*a", "&a ", "? ", "@", "%", "\n---\n", ": x"}[r.IntN(17)]
			data = slices.Insert(data, at, []byte(ins)...)
		}
		var n yaml.Node
		err = yaml.NewDecoder(bytes.NewReader(data)).Decode(&n)
		if err == nil {
			continue
		}
		tried++
		msg := strings.TrimPrefix(yamlLineRE.ReplaceAllString(err.Error(), "yaml: "), "yaml: ")
		if got, want := failingLine(data, msg), refFailingLine(data, msg); got != want {
			t.Fatalf("failingLine = %d, want %d, for %q in:\n%s", got, want, msg, data)
		}
	}
	if tried < 100 {
		t.Errorf("only %d broken files tried", tried)
	}
}

func refFailingLine(data []byte, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	fails := func(k int) bool {
		dec := yaml.NewDecoder(bytes.NewReader(bytes.Join(lines[:k], nil)))
		for {
			var n yaml.Node
			err := dec.Decode(&n)
			if err == nil {
				continue
			}
			return strings.TrimPrefix(yamlLineRE.ReplaceAllString(err.Error(), "yaml: "), "yaml: ") == msg
		}
	}
	lo, hi := 1, len(lines)
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
