package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
)

// largeKind says what each server of a generated file is like.
type largeKind int

const (
	largeValid     largeKind = iota // distinct ids, nothing wrong
	largeUnknown                    // an unknown key, description, in each server
	largeDuplicate                  // every server has id s
)

// largeFile writes a config of at least size bytes to dir and returns its
// path and number of servers. Each server takes two lines (three for
// largeUnknown), the first being line 2.
func largeFile(t testing.TB, dir string, kind largeKind, size int) (string, int) {
	t.Helper()
	var b strings.Builder
	b.Grow(size + 512)
	b.WriteString("servers:\n")
	desc := strings.Repeat("x", 200)
	n := 0
	for ; b.Len() < size; n++ {
		switch kind {
		case largeValid:
			fmt.Fprintf(&b, "  - id: s%d\n    command: [echo, hello]\n", n)
		case largeUnknown:
			fmt.Fprintf(&b, "  - id: s%d\n    command: [echo, hello]\n    description: %q\n", n, desc)
		case largeDuplicate:
			b.WriteString("  - id: s\n    command: [echo, hello]\n")
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("large%d.yaml", kind))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, n
}

// parseFile decodes the file at path with Parse. The files here are
// mostly past MaxFileSize, which bounds Load (see TestLoadTooLarge); what
// these tests measure is the decoder's time, and Parse has no bound: its
// caller has the bytes already.
func parseFile(path string) (*config.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return config.Parse(data, path, filepath.Dir(path))
}

// largeBound is how long Load may take on each file of TestLoadLarge.
// Measured on a 2-core machine, Load takes 0.2s to 0.6s on each, and 3.5s
// to 5s under -race. The decoder that compared every server with every
// earlier one took, without -race, 50s to 70s on the 10 MB file with an
// unknown key in each server, 1m on the 4 MB one of duplicate ids, and
// 12m on the 5 MB valid one, whose servers are shorter and so more. The
// whole suite under -race on 2 cores has taken 21s on the valid one, so
// the bound is 60s: still far below what a quadratic decoder takes.
const largeBound = 60 * time.Second

// TestLoadLarge: checking a file of megabytes takes time linear in its
// size, whether it is valid or has a problem in every server, and reports
// every problem in file order.
func TestLoadLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and loads 19 MB of config files")
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		kind largeKind
		size int
		// problem returns server i's one problem.
		problem func(i int) string
	}{
		{"valid", largeValid, 5 << 20, nil},
		{"unknown", largeUnknown, 10_000_000, func(i int) string {
			return fmt.Sprintf("FILE:%d: servers[%d].description: unknown key", 4+3*i, i)
		}},
		{"duplicate", largeDuplicate, 4 << 20, func(i int) string {
			return fmt.Sprintf(`FILE:%d: servers[%d].id: "s" is also the id of servers[0] (line 2); ids must be unique`, 2+2*(i+1), i+1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, n := largeFile(t, dir, tc.kind, tc.size)
			runtime.GC() // not to time the last one's garbage
			start := time.Now()
			cfg, err := parseFile(path)
			took := time.Since(start)
			t.Logf("%d servers: Load took %v", n, took)
			if took > largeBound {
				t.Errorf("Load of a %d-byte file took %v, more than %v", tc.size, took, largeBound)
			}
			if tc.problem == nil {
				if err != nil {
					t.Fatalf("Load: %.500v", err)
				}
				if len(cfg.Servers) != n {
					t.Errorf("got %d servers, want %d", len(cfg.Servers), n)
				}
				return
			}
			var cerr *config.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load: %T %.500v, want *config.Error", err, err)
			}
			want := n
			if tc.kind == largeDuplicate {
				want = n - 1
			}
			if len(cerr.Problems) != want {
				t.Fatalf("got %d problems, want %d", len(cerr.Problems), want)
			}
			for i, p := range cerr.Problems {
				got := strings.Replace(p.String(), path, "FILE", 1)
				if w := tc.problem(i); got != w {
					t.Fatalf("problem %d:\n got %s\nwant %s", i, got, w)
				}
			}
		})
	}
}

// BenchmarkLoadLarge loads 10 MB files: 38,211 servers each with an
// unknown key; valid servers; servers that all have one id.
func BenchmarkLoadLarge(b *testing.B) {
	dir := b.TempDir()
	for _, tc := range []struct {
		name string
		kind largeKind
	}{{"unknown", largeUnknown}, {"valid", largeValid}, {"duplicate", largeDuplicate}} {
		path, n := largeFile(b, dir, tc.kind, 10_000_000)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportMetric(float64(n), "servers")
			for b.Loop() {
				if _, err := parseFile(path); (err == nil) != (tc.kind == largeValid) {
					b.Fatalf("Load: %.200v", err)
				}
			}
		})
	}
}

// loadFast loads src, written to a file in a temp dir, within largeBound.
func loadFast(t *testing.T, src string) (*config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cfg, err := parseFile(path)
	if took := time.Since(start); took > largeBound {
		t.Errorf("Load of %d bytes took %v, more than %v", len(src), took, largeBound)
	}
	return cfg, err
}

// TestLoadMerges: mappings merged by many routes are walked once, so
// merges that double at each of 60 levels take no time, and a problem in
// the mapping at the bottom is reported once; merges in a cycle end.
func TestLoadMerges(t *testing.T) {
	var b strings.Builder
	b.WriteString("x0: &a0 {enabled: true, enabled: false}\ny0: &b0 {initial: 1s}\n")
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&b, "x%d: &a%d {<<: [*a%d, *b%d]}\ny%d: &b%d {<<: [*a%d, *b%d]}\n", i, i, i-1, i-1, i, i, i-1, i-1)
	}
	b.WriteString("servers:\n  - id: s\n    command: [a]\n    reconnect: {<<: *a60, max: 2s}\n")
	_, err := loadFast(t, b.String())
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Load: %v", err)
	}
	// The unknown keys x0 to y60, and enabled twice.
	if p := cerr.Problems[1]; len(cerr.Problems) != 123 || p.Line != 1 || p.Key != "servers[0].reconnect.enabled" {
		t.Errorf("Load: %v", err)
	}

	cfg, err := loadFast(t, "servers:\n  - &A\n    id: s\n    command: [a]\n    inheritEnv: true\n    <<: {<<: *A, toolPrefix: p}\n")
	if err != nil {
		t.Fatalf("Load of a merge cycle: %v", err)
	}
	if s := cfg.Servers[0]; s.ID != "s" || s.ToolPrefix != "p" || !s.InheritEnv {
		t.Errorf("merge cycle: %+v", s)
	}
}

// TestLoadAliasBudget: aliases that would have the decoder check far more
// than the file holds stop it with a problem at the alias, quickly; a file
// that merges a server's settings into each of thousands of others loads.
func TestLoadAliasBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("servers:\n  - {id: s, command: &c [" + strings.Repeat("a,", 10_000) + "a]}\n")
	for i := range 5_000 {
		fmt.Fprintf(&b, "  - {id: s%d, command: *c}\n", i)
	}
	_, err := loadFast(t, b.String())
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("Load: %T %.500v", err, err)
	}
	if p := cerr.Problems[0]; len(cerr.Problems) != 1 || !strings.HasSuffix(p.Key, "].command") || !strings.HasPrefix(p.Msg, "checking stopped here: ") {
		t.Errorf("Load: %.1000v", err)
	}

	b.Reset()
	b.WriteString("servers:\n  - &d\n    id: s\n    command: [go, run, ./server]\n    env: {A: a, B: b, C: c}\n    reconnect: {enabled: true, initial: 1s, max: 1m}\n    requestTimeout: 30s\n    tools: {enable: [a, b, c], disable: [d]}\n    capabilities: {disable: [channels.publish]}\n    channels: {subscription: [a, b]}\n")
	for i := range 20_000 {
		fmt.Fprintf(&b, "  - <<: *d\n    id: s%d\n", i)
	}
	cfg, err := loadFast(t, b.String())
	if err != nil {
		t.Fatalf("Load: %.1000v", err)
	}
	if s := cfg.Servers[20_000]; len(cfg.Servers) != 20_001 || s.ID != "s19999" || s.ToolPrefix != "s19999" || s.Env["C"] != "c" || len(s.Channels.Subscription.Channels) != 2 {
		t.Errorf("last server %+v", s)
	}
}

// TestLoadLongID: a server's long id is quoted in full in its own problems
// and cut short in the problems of each server whose prefix meets its.
func TestLoadLongID(t *testing.T) {
	long := strings.Repeat("i", 100_000)
	var b strings.Builder
	fmt.Fprintf(&b, "servers:\n  - {id: %s, toolPrefix: p, command: [a]}\n", long)
	for i := range 20_000 {
		fmt.Fprintf(&b, "  - {id: s%d, toolPrefix: p, command: [a]}\n", i)
	}
	_, err := loadFast(t, b.String())
	var cerr *config.Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 20_000 {
		t.Fatalf("Load: %T %.500v", err, err)
	}
	want := fmt.Sprintf(`servers %q and "s0": both use tool prefix "p": a tool name like "p--x" could belong to either`, long[:256]+"...")
	if p := cerr.Problems[0]; p.Msg != want {
		t.Errorf("problem %s, want message %s", p, want)
	}
}

// TestLoadManyAgents: agents' names and routes are checked in time linear
// in their number: thousands of agents with one name, and thousands of
// routes naming an agent and a server that aren't configured, each
// reported once, with no suggestion among thousands of servers.
func TestLoadManyAgents(t *testing.T) {
	const n = 20_000
	var b strings.Builder
	b.WriteString("servers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: s%d, command: [a]}\n", i)
	}
	b.WriteString("agents:\n")
	for range n {
		b.WriteString("  - {name: a, model: {provider: scripted, echo: true}}\n")
	}
	b.WriteString("inference:\n")
	for range n {
		b.WriteString("  - {server: s, agent: b}\n")
	}
	_, err := loadFast(t, b.String())
	var cerr *config.Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 3*n-1 {
		t.Fatalf("Load: %T %.500v", err, err)
	}
	for _, p := range []struct {
		i    int
		want string
	}{
		{0, fmt.Sprintf(`FILE:%d: agents[1].name: "a" is also the name of agents[0] (line %d); names must be unique`, n+4, n+3)},
		{n - 1, fmt.Sprintf(`FILE:%d: inference[0].server: "s" is not the id of a server in servers:`, 2*n+4)},
		{n, fmt.Sprintf(`FILE:%d: inference[0].agent: "b" is not the name of an agent in agents: (did you mean a?)`, 2*n+4)},
	} {
		got := cerr.Problems[p.i]
		got.File = "FILE"
		if got.String() != p.want {
			t.Errorf("problem %d: %s\nwant %s", p.i, got, p.want)
		}
	}
}
