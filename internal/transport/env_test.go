package transport

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuildEnv(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"LC_ALL=C",
		"LC_TIME=en_GB.UTF-8",
		"TZ=UTC",
		"TMPDIR=/tmp/u",
		"USER=u",
		"SHELL=/bin/sh",
		"SECRET_TOKEN=s3cret",
		"LCX=not a locale variable",
		"XLC_ALL=nor this",
		"PATHX=nor this",
		"path=case matters",
		"malformed",
		"=no name",
		"HOME=/shadowed", // getenv sees the first
		"EMPTY=",
	}
	base := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"LC_ALL=C",
		"LC_TIME=en_GB.UTF-8",
		"TZ=UTC",
		"TMPDIR=/tmp/u",
		"USER=u",
		"SHELL=/bin/sh",
	}
	all := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"LC_ALL=C",
		"LC_TIME=en_GB.UTF-8",
		"TZ=UTC",
		"TMPDIR=/tmp/u",
		"USER=u",
		"SHELL=/bin/sh",
		"SECRET_TOKEN=s3cret",
		"LCX=not a locale variable",
		"XLC_ALL=nor this",
		"PATHX=nor this",
		"path=case matters",
		"EMPTY=",
	}
	tests := []struct {
		name    string
		parent  []string
		extra   []string
		inherit bool
		want    []string
	}{
		{name: "base only", parent: parent, want: base},
		{name: "inherit", parent: parent, inherit: true, want: all},
		{
			name:   "extras added",
			parent: parent,
			extra:  []string{"API_KEY=k", "DEBUG=1"},
			want:   append(clone(base), "API_KEY=k", "DEBUG=1"),
		},
		{
			name:   "extras override base values, once each",
			parent: parent,
			extra:  []string{"HOME=/srv", "LC_ALL=fr_FR.UTF-8"},
			want: []string{
				"PATH=/usr/bin:/bin",
				"LANG=C.UTF-8",
				"LC_TIME=en_GB.UTF-8",
				"TZ=UTC",
				"TMPDIR=/tmp/u",
				"USER=u",
				"SHELL=/bin/sh",
				"HOME=/srv",
				"LC_ALL=fr_FR.UTF-8",
			},
		},
		{
			name:    "extras override inherited values",
			parent:  parent,
			inherit: true,
			extra:   []string{"SECRET_TOKEN=other"},
			want:    append(without(all, "SECRET_TOKEN=s3cret"), "SECRET_TOKEN=other"),
		},
		{
			name:   "the last of repeated extras wins",
			parent: parent,
			extra:  []string{"A=1", "B=2", "A=3"},
			want:   append(clone(base), "B=2", "A=3"),
		},
		{
			name:   "an extra may set an empty value",
			parent: parent,
			extra:  []string{"PATH="},
			want:   append(without(base, "PATH=/usr/bin:/bin"), "PATH="),
		},
		{
			name:   "a non-base variable comes only from the extras",
			parent: parent,
			extra:  []string{"SECRET_TOKEN=given"},
			want:   append(clone(base), "SECRET_TOKEN=given"),
		},
		{name: "empty parent", parent: nil, extra: []string{"X=1"}, want: []string{"X=1"}},
		{name: "nothing at all", parent: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildEnv(tt.parent, tt.extra, tt.inherit)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("buildEnv (-want +got):\n%s", diff)
			}
			seen := map[string]bool{}
			for _, kv := range got {
				name, _, _ := strings.Cut(kv, "=")
				if seen[name] {
					t.Errorf("%s appears more than once in %q", name, got)
				}
				seen[name] = true
			}
		})
	}
}

func TestBuildEnvDoesNotModifyItsArguments(t *testing.T) {
	parent := []string{"PATH=/bin", "SECRET=1", "HOME=/h"}
	extra := []string{"HOME=/x"}
	buildEnv(parent, extra, false)
	buildEnv(parent, extra, true)
	if diff := cmp.Diff([]string{"PATH=/bin", "SECRET=1", "HOME=/h"}, parent); diff != "" {
		t.Errorf("parent changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"HOME=/x"}, extra); diff != "" {
		t.Errorf("extra changed (-want +got):\n%s", diff)
	}
}

func TestIsBaseEnv(t *testing.T) {
	for name, want := range map[string]bool{
		"PATH": true, "HOME": true, "LANG": true, "TZ": true, "TMPDIR": true,
		"USER": true, "SHELL": true, "LC_ALL": true, "LC_CTYPE": true, "LC_": true,
		"LANGUAGE": false, "LC": false, "lc_all": false, "Path": false,
		"SSH_AUTH_SOCK": false, "AWS_SECRET_ACCESS_KEY": false, "": false,
	} {
		if got := isBaseEnv(name); got != want {
			t.Errorf("isBaseEnv(%q) = %v, want %v", name, got, want)
		}
	}
}

func clone(s []string) []string { return append([]string(nil), s...) }

func without(s []string, drop string) []string {
	var out []string
	for _, kv := range s {
		if kv != drop {
			out = append(out, kv)
		}
	}
	return out
}

func TestLookPathIn(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	writeFile := func(dir, name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inFirst := writeFile(first, "prog", 0o755)
	writeFile(second, "prog", 0o755)
	writeFile(first, "noexec", 0o644)
	inSecond := writeFile(second, "noexec", 0o755)
	if err := os.Mkdir(filepath.Join(first, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(second) // so that a relative PATH entry would find things
	path := "PATH=" + first + string(filepath.ListSeparator) + second
	tests := []struct {
		name, file string
		env        []string
		want       string // "" means not found
	}{
		{"found in the child's PATH", "prog", []string{path}, inFirst},
		{"the first match wins", "prog", []string{"PATH=" + second + ":" + first}, filepath.Join(second, "prog")},
		{"not executable is passed over", "noexec", []string{path}, inSecond},
		{"a directory is not a program", "adir", []string{"PATH=" + first}, ""},
		{"missing", "mcpl-no-such-program", []string{path}, ""},
		{"relative entries are skipped", "prog", []string{"PATH=.:" + first}, inFirst},
		{"only relative entries", "prog", []string{"PATH=."}, ""},
		{"the last PATH in env counts", "prog", []string{"PATH=/nonexistent", path}, inFirst},
		{"no PATH", "prog", []string{"HOME=/"}, ""},
		{"a name with a slash is used as it is", "./prog", []string{"PATH=/nonexistent"}, "./prog"},
		{"this process's PATH is left to os/exec", "prog", []string{"PATH=" + os.Getenv("PATH")}, "prog"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lookPathIn(tt.file, tt.env)
			if tt.want == "" {
				if !errors.Is(err, exec.ErrNotFound) {
					t.Errorf("lookPathIn(%q) = %q, %v; want exec.ErrNotFound", tt.file, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("lookPathIn(%q) = %q, %v; want %q", tt.file, got, err, tt.want)
			}
		})
	}
}
