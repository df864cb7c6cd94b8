package textsdoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// docPath is docs/texts.md, from this package's directory; root is the
// repository, which the document's source paths are relative to.
const (
	docPath = "../../docs/texts.md"
	root    = "../.."
)

// minFragment is the length, in characters, from which a literal piece of
// a row's text must be found in its source file. Shorter pieces (", ",
// " on ", "Your reply") are too common to tell anything, so they go
// unchecked.
const minFragment = 12

// sourceFiles are the files that hold agent-facing texts: the document
// must name each of them.
var sourceFiles = []string{
	"host/texts_tools.go",
	"host/texts_request.go",
	"host/errors.go",
	"internal/channels/texts.go",
	"internal/channels/tools.go",
	"internal/channels/publish.go",
	"internal/channels/open.go",
	"internal/agent/texts.go",
	"internal/agent/fork.go",
	"internal/heading/heading.go",
	"internal/content/markers.go",
	"internal/content/reference.go",
	"internal/fetchref/texts.go",
}

// textPrefixes name the declarations in sourceFiles that are texts by
// their name: each must be some row's source, so a text added to the code
// without the document fails too. A prefix counts only when an upper-case
// letter follows it (textNoSuchTool, MarkerNoType, TailFetch), which
// leaves out helpers such as Tail.
var textPrefixes = []string{"text", "Marker", "Tail", "Provenance"}

// header is the header row every table in the document has: a table with
// any other is an error, so no row escapes the checks.
var header = []string{"Text", "When an agent reads it", "Source"}

// row is one table row of the document.
type row struct {
	line  int    // its line in the document, for messages
	text  string // the text column's code span: the template
	file  string // the source column's first code span
	ident string // the source column's second code span
}

func TestRowsMatchTheCode(t *testing.T) {
	rows := readRows(t)
	if len(rows) == 0 {
		t.Fatalf("%s has no table rows", docPath)
	}
	for _, r := range rows {
		if r.file == "" || r.ident == "" {
			t.Errorf("%s:%d: the row has no source: want `path/file.go` `identifier` in its Source column", docPath, r.line)
			continue
		}
		src, err := load(r.file)
		if err != nil {
			t.Errorf("%s:%d: %v", docPath, r.line, err)
			continue
		}
		if !src.decls[r.ident] {
			t.Errorf("%s:%d: %s declares no func, const or var %s", docPath, r.line, r.file, r.ident)
		}
		frags := fragments(r.text)
		for i, f := range frags {
			if utf8.RuneCountInString(f) < minFragment {
				continue
			}
			if !src.has(f, i == 0, i == len(frags)-1) {
				t.Errorf("%s:%d: no string literal in %s has %q (from the text %q)", docPath, r.line, r.file, f, r.text)
			}
		}
	}
}

func TestSourceFilesAreNamed(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sourceFiles {
		if !strings.Contains(string(b), "`"+f+"`") {
			t.Errorf("%s doesn't name %s", docPath, f)
		}
	}
}

func TestEveryTextHasARow(t *testing.T) {
	named := map[string]bool{}
	for _, r := range readRows(t) {
		named[r.file+" "+r.ident] = true
	}
	for _, f := range sourceFiles {
		src, err := load(f)
		if err != nil {
			t.Error(err)
			continue
		}
		for name := range src.decls {
			if isTextName(name) && !named[f+" "+name] {
				t.Errorf("%s %s has no row in %s", f, name, docPath)
			}
		}
	}
}

// TestMatching pins the steps the checks rest on.
func TestMatching(t *testing.T) {
	got := fragments(`The "<server>" server that provides <tool> isn't connected.`)
	want := []string{`The "`, `" server that provides `, ` isn't connected.`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("fragments = %q, want %q", got, want)
	}
	got = formatPieces(`%s took %d%% of %[1]q, within %.1f %s.`)
	want = []string{"", " took ", "% of ", ", within ", " ", "."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("formatPieces = %q, want %q", got, want)
	}
	src := &source{pieces: formatPieces(" It stays selected for opening%s, or not.")}
	for _, c := range []struct {
		fragment    string
		first, last bool
		want        bool
	}{
		{"It stays selected for opening", true, false, true},
		{" It stays selected for opening", false, false, true},
		{"It stays selected for opening", false, false, false}, // not the whole piece
		{"stays selected for opening", true, false, false},     // words left out
		{"It stays selected", true, true, false},
		{", or not.", false, true, true},
	} {
		if got := src.has(c.fragment, c.first, c.last); got != c.want {
			t.Errorf("has(%q, %v, %v) = %v, want %v", c.fragment, c.first, c.last, got, c.want)
		}
	}
}

// readRows reads the document's table rows. A table starts at a line that
// starts with "|": its first line is the header, its second the
// separator, the rest its rows. A cell's code spans are its backticked
// parts; the text cell must have one, the source cell two (the file and
// the identifier). A row whose source cell lacks them is returned with
// file or ident empty, for the test to report.
func readRows(t *testing.T) []row {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	inTable := 0 // lines of the current table read so far
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		if !strings.HasPrefix(line, "|") {
			inTable = 0
			continue
		}
		inTable++
		cells := splitCells(line)
		switch inTable {
		case 1:
			if strings.Join(cells, "|") != strings.Join(header, "|") {
				t.Errorf("%s:%d: a table's header is %q, want %q", docPath, n, cells, header)
			}
			continue
		case 2:
			continue // the separator
		}
		if len(cells) != len(header) {
			t.Errorf("%s:%d: the row has %d cells, want %d", docPath, n, len(cells), len(header))
			continue
		}
		text := codeSpans(cells[0])
		if len(text) != 1 {
			t.Errorf("%s:%d: the Text cell has %d code spans, want 1", docPath, n, len(text))
			continue
		}
		r := row{line: n, text: text[0]}
		if src := codeSpans(cells[2]); len(src) == 2 {
			r.file, r.ident = src[0], src[1]
		}
		rows = append(rows, r)
	}
	return rows
}

// splitCells splits a table line at the "|"s outside code spans, and
// trims each cell.
func splitCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cell strings.Builder
	inCode := false
	for _, c := range line {
		switch {
		case c == '`':
			inCode = !inCode
		case c == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteRune(c)
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// codeSpans returns the contents of a cell's backticked parts, as they
// are written.
func codeSpans(cell string) []string {
	parts := strings.Split(cell, "`")
	var spans []string
	for i := 1; i < len(parts)-1; i += 2 {
		spans = append(spans, parts[i])
	}
	return spans
}

// placeholder is a <placeholder> in a row's text.
var placeholder = regexp.MustCompile(`<[^<>]+>`)

// fragments splits a row's text at its placeholders: what is left are the
// words the code must have as they are.
func fragments(text string) []string {
	return placeholder.Split(text, -1)
}

// verb is an fmt verb (%s, %q, %d, %.1f, %[1]s, ...), or "%%".
var verb = regexp.MustCompile(`%(\[\d+\])?[-+# 0]*(\d+|\*)?(\.(\d+|\*)?)?[a-zA-Z%]`)

// formatPieces splits a string literal at its fmt verbs, as a format
// string is filled in: "%%" is a percent sign, any other verb a gap where
// a value goes. A literal that is no format string splits nowhere (or at
// something that looks like a verb, which only adds pieces).
func formatPieces(s string) []string {
	const gap = "\x00"
	s = verb.ReplaceAllStringFunc(s, func(v string) string {
		if v == "%%" {
			return "%"
		}
		return gap
	})
	return strings.Split(s, gap)
}

// source is one Go file as the checks see it.
type source struct {
	// decls are its top-level funcs, consts and vars by name; a method is
	// under its receiver's type and its own name: "Registry.toolOpen".
	decls map[string]bool
	// pieces are its string literals, unquoted, split at their fmt verbs.
	// A literal that is one operand of a "+" whose operands are all string
	// literals counts joined to them too.
	pieces []string
}

// has reports whether a piece of the file's string literals is fragment:
// the whole piece, so that words added to the code's text next to the
// document's (or taken out of it) fail too. Only the ends of a row's text
// give: its first fragment may leave out white space the piece starts with
// (a part composed after a space or a line break: " channel_open tries
// again."), and its last fragment white space the piece ends with.
func (s *source) has(fragment string, first, last bool) bool {
	for _, p := range s.pieces {
		if p == fragment {
			return true
		}
		if first {
			p = strings.TrimLeftFunc(p, unicode.IsSpace)
		}
		if last {
			p = strings.TrimRightFunc(p, unicode.IsSpace)
		}
		if p == fragment {
			return true
		}
	}
	return false
}

var sources = map[string]*source{}

// load parses a file (a path relative to the repository) once.
func load(path string) (*source, error) {
	if s, ok := sources[path]; ok {
		return s, nil
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, filepath.FromSlash(path)), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	s := &source{decls: map[string]bool{}}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				name = receiver(d.Recv.List[0].Type) + "." + name
			}
			s.decls[name] = true
		case *ast.GenDecl:
			if d.Tok != token.CONST && d.Tok != token.VAR {
				continue
			}
			for _, spec := range d.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					s.decls[n.Name] = true
				}
			}
		}
	}
	add := func(lit string) { s.pieces = append(s.pieces, formatPieces(lit)...) }
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if lit, ok := stringLit(n); ok {
				add(lit)
			}
		case *ast.BinaryExpr:
			if lit, ok := joined(n); ok {
				add(lit)
			}
		}
		return true
	})
	sources[path] = s
	return s, nil
}

// receiver names a method's receiver type: "Registry" for *Registry or
// Registry[T].
func receiver(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiver(e.X)
	case *ast.IndexExpr:
		return receiver(e.X)
	case *ast.IndexListExpr:
		return receiver(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// stringLit unquotes a string literal.
func stringLit(n *ast.BasicLit) (string, bool) {
	if n.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(n.Value)
	return s, err == nil
}

// joined is the value of "a" + "b" + ..., when every operand is a string
// literal.
func joined(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		return stringLit(e)
	case *ast.ParenExpr:
		return joined(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := joined(e.X)
		if !ok {
			return "", false
		}
		y, ok := joined(e.Y)
		return x + y, ok
	}
	return "", false
}

// isTextName reports whether a declaration is a text by its name.
func isTextName(name string) bool {
	for _, p := range textPrefixes {
		rest, ok := strings.CutPrefix(name, p)
		if ok && rest != "" {
			if r, _ := utf8.DecodeRuneInString(rest); unicode.IsUpper(r) {
				return true
			}
		}
	}
	return false
}
