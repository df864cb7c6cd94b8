package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/config"
)

// FuzzParse: Parse never panics; it returns a config or an *Error whose
// every problem is worded; and a config it returns keeps the rules the
// host relies on (one transport, a prefix, no two prefixes meeting, unique
// ids, ordered backoff).
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"testdata/good/*.yaml", "testdata/bad/*.yaml", "../examples/config/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data, "f.yaml", dir)
		if err != nil {
			var cerr *config.Error
			if !errors.As(err, &cerr) || cfg != nil || len(cerr.Problems) == 0 {
				t.Fatalf("Parse = %v, %v: want a nil config and an *Error with problems", cfg, err)
			}
			for _, p := range cerr.Problems {
				if p.File != "f.yaml" || p.Msg == "" || p.Line < 0 || strings.Contains(p.Msg, "\n") {
					t.Fatalf("bad problem %+v", p)
				}
			}
			return
		}
		if cfg == nil || !filepath.IsAbs(cfg.Store) {
			t.Fatalf("config %+v", cfg)
		}
		ids := map[string]bool{}
		for i, s := range cfg.Servers {
			if (len(s.Argv) == 0) == (s.URL == "") || s.ID == "" || ids[s.ID] || s.ToolPrefix == "" {
				t.Fatalf("server %d: %+v", i, s)
			}
			ids[s.ID] = true
			if s.Reconnect.Initial <= 0 || s.Reconnect.Max < s.Reconnect.Initial || (s.RequestTimeout <= 0 && s.RequestTimeout != config.NoTimeout) {
				t.Fatalf("server %d durations: %+v, %v", i, s.Reconnect, s.RequestTimeout)
			}
			if s.Channels.Subscription.Mode == "" || s.Channels.SendTools == nil {
				t.Fatalf("server %d channels without defaults: %+v", i, s.Channels)
			}
			for _, tool := range s.Channels.SendTools {
				if tool == "" || strings.Contains(tool, "*") {
					t.Fatalf("server %d: send tool %q", i, tool)
				}
			}
			for _, o := range cfg.Servers[:i] {
				if config.PrefixesMeet(o.ToolPrefix, s.ToolPrefix) {
					t.Fatalf("prefixes %q and %q meet", o.ToolPrefix, s.ToolPrefix)
				}
			}
		}
	})
}
