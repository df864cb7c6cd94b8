package layers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// docFile is the document with the layer table, relative to the module
// root; docHeading is the section whose first code block is the table.
const (
	docFile    = "docs/architecture.md"
	docHeading = "## Layers"
)

// layer is one line of the table.
type layer struct {
	index       int      // 0 for the top line
	line        int      // its line in the document
	packages    []string // as listed, relative to the module root, "/..." cut
	listed      string   // the packages as written, for messages
	testSupport bool     // above the dashed line
}

func (l *layer) String() string {
	return fmt.Sprintf("layer %q, %s:%d", l.listed, docFile, l.line)
}

// table is the layer table as read.
type table struct {
	layers []*layer
	// of maps each listed package to its line.
	of map[string]*layer
}

// place returns the line that covers pkg (a path relative to the module
// root): the line that lists it, else the one that lists its nearest
// listed parent; nil when none does.
func (t *table) place(pkg string) *layer {
	for p := pkg; ; {
		if l, ok := t.of[p]; ok {
			return l
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return nil
		}
		p = p[:i]
	}
}

// readTable reads the first code block under docHeading in doc.
func readTable(doc []byte) (*table, error) {
	t := &table{of: map[string]*layer{}}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	n, section, in, done, dashed := 0, false, false, false, false
	for sc.Scan() && !done {
		n++
		text := sc.Text()
		switch {
		case !section:
			section = strings.TrimSpace(text) == docHeading
			continue
		case !in:
			if strings.HasPrefix(text, "## ") {
				return nil, fmt.Errorf("%s:%d: the %q section ends before its table", docFile, n, docHeading)
			}
			in = strings.HasPrefix(text, "```")
			continue
		case strings.HasPrefix(text, "```"):
			done = true
			continue
		case strings.TrimSpace(text) == "":
			continue
		case text[0] == ' ' || text[0] == '\t':
			// The description goes on.
			if len(t.layers) == 0 {
				return nil, fmt.Errorf("%s:%d: the table starts with an indented line, which would describe no layer", docFile, n)
			}
			continue
		case strings.HasPrefix(text, "---"):
			if dashed {
				return nil, fmt.Errorf("%s:%d: a second dashed line: the table has one, under the test support", docFile, n)
			}
			dashed = true
			for _, l := range t.layers {
				l.testSupport = true
			}
			continue
		}
		listed, _, _ := strings.Cut(text, "  ")
		listed = strings.TrimSpace(listed)
		l := &layer{index: len(t.layers), line: n, listed: listed}
		for p := range strings.SplitSeq(listed, ",") {
			p = strings.TrimSuffix(strings.TrimSpace(p), "/...")
			if p == "" || strings.ContainsAny(p, " \t") {
				return nil, fmt.Errorf("%s:%d: %q is not a package path: a line lists its packages, comma-separated, then two spaces and its description", docFile, n, listed)
			}
			if prev, ok := t.of[p]; ok {
				return nil, fmt.Errorf("%s:%d: %s is listed again (it is on %s)", docFile, n, p, prev)
			}
			t.of[p] = l
			l.packages = append(l.packages, p)
		}
		t.layers = append(t.layers, l)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case !section:
		return nil, fmt.Errorf("%s has no %q section", docFile, docHeading)
	case !done:
		return nil, fmt.Errorf("%s: the %q section has no complete code block", docFile, docHeading)
	case len(t.layers) == 0:
		return nil, fmt.Errorf("%s: the layer table is empty", docFile)
	}
	return t, nil
}

// check returns every way the packages break the table: pkgs maps each
// package of the module (relative to its root) to its own imports of the
// module's packages.
func check(t *table, pkgs map[string][]string) []string {
	var problems []string
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		from := t.place(pkg)
		if from == nil {
			problems = append(problems, fmt.Sprintf("%s is on no line of the layer table in %s: add it to its layer's line (a new line, or a package listed on one)", pkg, docFile))
			continue
		}
		for _, imp := range pkgs[pkg] {
			to := t.place(imp)
			switch {
			case to == nil:
				// Reported as a package of its own, when it is one.
			case to.testSupport && !from.testSupport:
				problems = append(problems, fmt.Sprintf("%s (%s) imports %s (%s): a production package imports test support, which only tests may import", pkg, from, imp, to))
			case to.index < from.index:
				problems = append(problems, fmt.Sprintf("%s (%s) imports %s (%s), a higher layer: imports point down only", pkg, from, imp, to))
			}
		}
	}
	return problems
}

// moduleRoot is the directory with the go.mod above the test's working
// directory, and the module's path.
func moduleRoot(t *testing.T) (root, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for line := range strings.SplitSeq(string(b), "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(rest), `"`)
				}
			}
			t.Fatalf("%s has no module line", filepath.Join(dir, "go.mod"))
		}
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// goList returns the module's packages, each with its own imports of the
// module's packages, all relative to the module root.
func goList(t *testing.T, root, module string) map[string][]string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not available, so the import graph can't be read: %v", err)
	}
	cmd := exec.Command(gocmd, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./... in %s: %v\n%s", root, err, stderr.Bytes())
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		return strings.CutPrefix(p, module+"/")
	}
	pkgs := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, ok := rel(fields[0])
		if !ok {
			t.Fatalf("go list ./... listed %s, which is not in module %s", fields[0], module)
		}
		imports := []string{}
		for _, imp := range fields[1:] {
			if r, ok := rel(imp); ok {
				imports = append(imports, r)
			}
		}
		pkgs[pkg] = imports
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list ./... in %s listed no packages", root)
	}
	return pkgs
}

func TestImportsPointDown(t *testing.T) {
	root, module := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, docFile))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := readTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := goList(t, root, module)
	for _, p := range check(tbl, pkgs) {
		t.Error(p)
	}
	// A line may name a package to come; say which, for whoever reads -v.
	for _, l := range tbl.layers {
		for _, p := range l.packages {
			found := false
			for pkg := range pkgs {
				if pkg == p || strings.HasPrefix(pkg, p+"/") {
					found = true
					break
				}
			}
			if !found {
				t.Logf("%s lists %s, which is no package yet", l, p)
			}
		}
	}
}
