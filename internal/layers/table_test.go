package layers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sample = "# A\n" +
	"\n" +
	"## Layers\n" +
	"\n" +
	"Words.\n" +
	"\n" +
	"```\n" +
	"internal/testkit     helpers\n" +
	"-------------------  above: test support\n" +
	"cmd/tool             the command\n" +
	"                     goes on\n" +
	"app, app/sqlite\n" +
	"                     two packages\n" +
	"examples/...         servers\n" +
	"lib\n" +
	"```\n" +
	"\n" +
	"## Next\n"

func TestReadTable(t *testing.T) {
	tbl, err := readTable([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Line        int
		Packages    []string
		TestSupport bool
	}
	var lines []got
	for _, l := range tbl.layers {
		lines = append(lines, got{l.line, l.packages, l.testSupport})
	}
	want := []got{
		{8, []string{"internal/testkit"}, true},
		{10, []string{"cmd/tool"}, false},
		{12, []string{"app", "app/sqlite"}, false},
		{14, []string{"examples"}, false},
		{15, []string{"lib"}, false},
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("layers (-want +got):\n%s", d)
	}
	for pkg, want := range map[string]string{
		"internal/testkit":       "internal/testkit",
		"internal/testkit/cmd/x": "internal/testkit", // a sub-package is on its parent's line
		"app/sqlite":             "app, app/sqlite",
		"app/sqlite/schema":      "app, app/sqlite",
		"examples/chat":          "examples/...",
		"lib":                    "lib",
		"libx":                   "",
		"internal":               "",
	} {
		got := ""
		if l := tbl.place(pkg); l != nil {
			got = l.listed
		}
		if got != want {
			t.Errorf("place(%q) = %q, want %q", pkg, got, want)
		}
	}
}

func TestReadTableRefuses(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"# A\n", `no "## Layers" section`},
		{"## Layers\n\n## Next\n```\na\n```\n", "ends before its table"},
		{"## Layers\n```\na\n", "no complete code block"},
		{"## Layers\n```\n```\n", "the layer table is empty"},
		{"## Layers\n```\n   a\n```\n", "starts with an indented line"},
		{"## Layers\n```\na\n---\nb\n---\nc\n```\n", "a second dashed line"},
		{"## Layers\n```\na, b c\n```\n", `"a, b c" is not a package path`},
		{"## Layers\n```\na,\n```\n", `"a," is not a package path`},
		{"## Layers\n```\na\nb, a\n```\n", `docs/architecture.md:4: a is listed again (it is on layer "a", docs/architecture.md:3)`},
	} {
		_, err := readTable([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("readTable(%q) = %v, want an error with %q", tc.doc, err, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	tbl, err := readTable([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string][]string{
		"internal/testkit":       {"app", "lib"},               // test support may import production
		"internal/testkit/cmd/x": {"internal/testkit"},         // on its parent's line
		"cmd/tool":               {"app", "lib", "app/sqlite"}, // down
		"app":                    {"lib"},
		"app/sqlite":             {"app", "cmd/tool"}, // the same line, then up
		"examples/chat":          {"internal/testkit", "lib"},
		"lib":                    {},
		"orphan":                 {"lib"},
	}
	want := []string{
		`app/sqlite (layer "app, app/sqlite", docs/architecture.md:12) imports cmd/tool (layer "cmd/tool", docs/architecture.md:10), a higher layer: imports point down only`,
		`examples/chat (layer "examples/...", docs/architecture.md:14) imports internal/testkit (layer "internal/testkit", docs/architecture.md:8): a production package imports test support, which only tests may import`,
		`orphan is on no line of the layer table in docs/architecture.md: add it to its layer's line (a new line, or a package listed on one)`,
	}
	if d := cmp.Diff(want, check(tbl, pkgs)); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
}
