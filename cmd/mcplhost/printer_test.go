package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// rawControl returns the first rune of out, other than the newlines that
// end lines, that must not reach a terminal raw, or -1; utf8.RuneError
// when out is not valid UTF-8.
func rawControl(out string) rune {
	if !utf8.ValidString(out) {
		return utf8.RuneError
	}
	for _, r := range out {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029') {
			return r
		}
	}
	return -1
}

// hostileStrings carry what a terminal would obey.
var hostileStrings = []string{
	"\x1b]0;pwned\x07", "\x1b[2J", "\u009b2J", "name\npolicy: accepted", "evil\u202etxt.exe",
	"bad \xff byte", "cr\roverwrite", "tab\there", "del\x7f", "sep\u2028arator",
}

type stringer struct{ s string }

func (s stringer) String() string { return s.s }

type named string

type textValue string

func (v textValue) MarshalText() ([]byte, error) { return []byte(v), nil }

func TestPrinterLinef(t *testing.T) {
	for _, h := range hostileStrings {
		for _, arg := range []any{h, []byte(h), json.RawMessage(h), errors.New(h), stringer{h}, named(h), []string{"ok", h}} {
			for _, format := range []string{"x %s y", "x %v y", "x %q y"} {
				var b bytes.Buffer
				printer{&b}.linef(format, arg)
				out := b.String()
				if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || !strings.HasPrefix(out, "x ") {
					t.Errorf("linef(%q, %#v) = %q: not one line", format, arg, out)
				}
				if r := rawControl(out); r >= 0 {
					t.Errorf("linef(%q, %#v) = %q: %U raw", format, arg, out, r)
				}
			}
		}
	}
	var b bytes.Buffer
	printer{&b}.linef("call %s: ok (%d, %q)", "echo 👩‍👩‍👧 日本語", 3, "chat")
	if got, want := b.String(), "call echo 👩‍👩‍👧 日本語: ok (3, \"chat\")\n"; got != want {
		t.Errorf("linef = %q, want %q", got, want)
	}
	b.Reset()
	printer{&b}.linef("server: %s", "name\npolicy: accepted")
	if got, want := b.String(), "server: name\\npolicy: accepted\n"; got != want {
		t.Errorf("linef = %q, want %q", got, want)
	}
}

func TestPrinterBlock(t *testing.T) {
	for _, tc := range []struct{ text, indent, want string }{
		{"hello", "", "hello\n"},
		{"hello\n", "", "hello\n\n"}, // as fmt.Println(text) printed it
		{"one\r\ntwo\nthree", "  ", "  one\n  two\n  three\n"},
		{"a\x1b[2J\npolicy: accepted\u009b\u202e", "| ", "| a\\x1b[2J\n| policy: accepted\\u009b\\u202e\n"},
	} {
		var b bytes.Buffer
		printer{&b}.block(tc.text, tc.indent)
		if b.String() != tc.want {
			t.Errorf("block(%q, %q) = %q, want %q", tc.text, tc.indent, b.String(), tc.want)
		}
	}
	var b bytes.Buffer
	printer{&b}.text(usage)
	if b.String() != usage {
		t.Errorf("text(usage) = %q, want it as written", b.String())
	}
}

func TestPrinterJSON(t *testing.T) {
	v := map[string]any{"s": "a\x1b[2J\u009b\u202e\u2028<&>\x7f", "raw": json.RawMessage("\"raw\u009b\u202e\u2029\x7f\"")}
	var b bytes.Buffer
	if err := (printer{&b}).json(v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if r := rawControl(out); r >= 0 {
		t.Errorf("json printed %U raw: %q", r, out)
	}
	if !strings.Contains(out, "<&>") || !strings.HasSuffix(out, "}\n") {
		t.Errorf("json = %q: want HTML unescaped, and a final newline", out)
	}
	var got map[string]string
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"s": v["s"].(string), "raw": "raw\u009b\u202e\u2029\x7f"}; got["s"] != want["s"] || got["raw"] != want["raw"] {
		t.Errorf("json decodes to %q, want %q", got, want)
	}
}

// TestSlogQuotes checks what lets the logger write to stderr directly:
// slog's text handler quotes a message, key or value with a control or
// bidirectional character in it, all but DEL, which logOptions escapes.
func TestSlogQuotes(t *testing.T) {
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Warn("del\x7f")
	if !strings.Contains(b.String(), "msg=del\x7f") {
		t.Errorf("slog's text handler now quotes DEL (%q): logOptions need not", b.String())
	}
	b.Reset()
	log := slog.New(slog.NewTextHandler(&b, logOptions(slog.LevelDebug)))
	for _, h := range hostileStrings {
		log.Warn(h, h, h, "err", errors.New(h), "server", h, "list", []string{h}, "bytes", []byte(h), "text", textValue(h), "group", slog.GroupValue(slog.String("in", h)))
	}
	if r := rawControl(b.String()); r >= 0 {
		t.Errorf("slog text output carries %U raw:\n%q", r, b.String())
	}
	if n := strings.Count(b.String(), "\n"); n != len(hostileStrings) {
		t.Errorf("slog wrote %d lines for %d records", n, len(hostileStrings))
	}
}

// printCalls are the calls that print, other than through printer: in the
// package named by its import path, those functions.
var printCalls = map[string][]string{
	"fmt": {"Print", "Printf", "Println", "Fprint", "Fprintf", "Fprintln"},
	"io":  {"WriteString", "Copy", "CopyN", "CopyBuffer"},
}

// writerNames are the names an io.Writer for the terminal goes by here.
var writerNames = []string{"stdout", "stderr", "w", "out"}

// printViolations returns, as FILE:LINE: what, each place in f that
// writes to the terminal other than through printer, and each printer
// call whose format or text is not a program constant.
func printViolations(fset *token.FileSet, f *ast.File, consts map[string]string) []string {
	imports := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := filepath.Base(path)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = path
	}
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, fset.Position(n.Pos()).String()+": "+what)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] == "os" && (sel.Sel.Name == "Stdout" || sel.Sel.Name == "Stderr") {
				report(sel, "os."+sel.Sel.Name+" used")
			}
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok {
			if slices.Contains(printCalls[imports[x.Name]], sel.Sel.Name) {
				report(call, imports[x.Name]+"."+sel.Sel.Name+" called")
			}
			if slices.Contains(writerNames, x.Name) && strings.HasPrefix(sel.Sel.Name, "Write") {
				report(call, x.Name+"."+sel.Sel.Name+" called")
			}
		}
		switch sel.Sel.Name {
		case "linef", "usageError":
			i := 0
			if sel.Sel.Name == "usageError" {
				i = 1
			}
			if i >= len(call.Args) || !constantText(call.Args[i], consts, false) {
				report(call, sel.Sel.Name+"'s format is not a one-line string constant")
			}
			if sel.Sel.Name == "usageError" && !constantText(call.Args[0], consts, true) {
				report(call, "usageError's usage is not a constant")
			}
		case "text":
			if len(call.Args) != 1 || !constantText(call.Args[0], consts, true) {
				report(call, "text's argument is not a constant")
			}
		}
		return true
	})
	return out
}

// constantText reports whether e is a string literal or a package-level
// string constant, with no control character other than a newline where
// multiline allows it.
func constantText(e ast.Expr, consts map[string]string, multiline bool) bool {
	var s string
	switch e := e.(type) {
	case *ast.BasicLit:
		v, err := strconv.Unquote(e.Value)
		if e.Kind != token.STRING || err != nil {
			return false
		}
		s = v
	case *ast.Ident:
		v, ok := consts[e.Name]
		if !ok {
			return false
		}
		s = v
	default:
		return false
	}
	if multiline {
		s = strings.ReplaceAll(s, "\n", "")
	}
	return !strings.Contains(s, "\n") && rawControl(s) < 0
}

// packageConsts returns the package-level string constants of files that
// are string literals, by name.
func packageConsts(files []*ast.File) map[string]string {
	consts := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	return consts
}

// TestOnePrintingPath checks that printer.go is the only file of the
// command that writes to stdout or stderr (main hands os.Stdout and
// os.Stderr to run; the logger is handed stderr, TestSlogQuotes), and that
// what goes through printer as a constant is one.
func TestOnePrintingPath(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	var all []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
		all = append(all, f)
	}
	if len(files) < 8 || files["printer.go"] == nil || files["probe.go"] == nil {
		t.Fatalf("parsed %d files, want the command's (printer.go, probe.go, ...)", len(files))
	}
	consts := packageConsts(all)
	// main hands os.Stdout and os.Stderr to run: allowed in func main.
	var allowed []string
	for _, d := range files["main.go"].Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "main" {
			for line := fset.Position(fd.Pos()).Line; line <= fset.Position(fd.End()).Line; line++ {
				allowed = append(allowed, "main.go:"+strconv.Itoa(line)+":")
			}
		}
	}
	if len(allowed) == 0 {
		t.Fatal("main.go has no func main")
	}
	for name, f := range files {
		if name == "printer.go" {
			continue // printer writes
		}
		for _, v := range printViolations(fset, f, consts) {
			if strings.HasSuffix(v, " used") && slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(v, a) }) {
				continue
			}
			t.Errorf("%s: print through printer (printer.go)", v)
		}
	}
}

// TestPrintViolations checks that the check above finds what it looks for.
func TestPrintViolations(t *testing.T) {
	const src = `package main

import (
	f "fmt"
	"io"
	"os"
)

const ok = "fine\n"

func bad(w io.Writer, stdout io.Writer, name string) {
	f.Fprintf(w, "x %s\n", name)
	f.Println(name)
	io.WriteString(stdout, name)
	os.Stderr.Write(nil)
	w.Write([]byte(name))
	printer{w}.linef(name)
	printer{w}.linef("two\nlines")
	printer{w}.text(name)
	printer{w}.usageError(name, "x")
	_ = f.Sprintf("%s", name)
	_ = f.Errorf("%s", name)
	printer{w}.linef("fine %s", name)
	printer{w}.text(ok)
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := printViolations(fset, f, packageConsts([]*ast.File{f}))
	want := []string{
		"bad.go:12:2: fmt.Fprintf called",
		"bad.go:13:2: fmt.Println called",
		"bad.go:14:2: io.WriteString called",
		"bad.go:15:2: os.Stderr used",
		"bad.go:16:2: w.Write called",
		"bad.go:17:2: linef's format is not a one-line string constant",
		"bad.go:18:2: linef's format is not a one-line string constant",
		"bad.go:19:2: text's argument is not a constant",
		"bad.go:20:2: usageError's usage is not a constant",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
