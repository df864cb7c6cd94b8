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
// ids, ordered backoff; for agents, valid unique names, one model of a
// known provider with only its fields, defaults applied, and routes to
// configured agents and servers).
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
		names := map[string]bool{}
		for i, a := range cfg.Agents {
			if a.Name == "" || len(a.Name) > 64 || strings.Trim(a.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" || names[a.Name] {
				t.Fatalf("agent %d: name %q", i, a.Name)
			}
			names[a.Name] = true
			if a.MaxTokens <= 0 || (!a.AllowedTools.All && a.AllowedTools.Patterns == nil) || (a.AllowedTools.All && a.AllowedTools.Patterns != nil) {
				t.Fatalf("agent %d without defaults: %+v", i, a)
			}
			for _, p := range a.AllowedTools.Patterns {
				if p == "" || p == "all" {
					t.Fatalf("agent %d: tool pattern %q", i, p)
				}
			}
			m := a.Model
			switch m.Provider {
			case config.ProviderScripted:
				if (m.Script == "") == !m.Echo || (m.Script != "" && !filepath.IsAbs(m.Script)) ||
					m.Model != "" || m.APIKeyEnv != "" || m.BaseURL != "" || m.ContextWindow != 0 || m.KeyOptional {
					t.Fatalf("agent %d: scripted model %+v", i, m)
				}
			case config.ProviderAnthropic, config.ProviderOpenAI:
				if m.Model == "" || m.APIKeyEnv == "" || m.ContextWindow < 0 || m.Script != "" || m.Echo ||
					(m.KeyOptional && m.Provider != config.ProviderOpenAI) ||
					(m.BaseURL != "" && !strings.HasPrefix(m.BaseURL, "http://") && !strings.HasPrefix(m.BaseURL, "https://")) {
					t.Fatalf("agent %d: %s model %+v", i, m.Provider, m)
				}
			default:
				t.Fatalf("agent %d: provider %q", i, m.Provider)
			}
		}
		switch cfg.Conversations {
		case config.ConversationsShared:
		case config.ConversationsPerChannel:
			if _, ok := cfg.Primary(); !ok {
				t.Fatalf("per-channel conversations with no primary")
			}
		default:
			t.Fatalf("conversations %q", cfg.Conversations)
		}
		for i, r := range cfg.Inference {
			if !names[r.Agent] || r.FeatureSet == "" || (r.Server != "*" && !ids[r.Server]) {
				t.Fatalf("route %d: %+v", i, r)
			}
		}
	})
}
