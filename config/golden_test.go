package config_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/internal/model/scripted"
	"github.com/mcpl-go/mcpl/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGoodFiles loads each testdata/good file and compares what it decodes
// to, with the conversions later code uses, to its golden.
func TestGoodFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	if len(files) == 0 {
		t.Fatal("no good files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := config.Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			checkGolden(t, strings.TrimSuffix(f, ".yaml")+".golden", dump(t, cfg))
		})
	}
}

// TestBadFiles loads each testdata/bad file and compares its whole error
// output, one problem a line, to its golden.
func TestBadFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) == 0 {
		t.Fatal("no bad files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := config.Load(f)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", cfg)
			}
			var cerr *config.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load: %T %v, want *config.Error", err, err)
			}
			if cfg != nil {
				t.Errorf("Load returned a config with its error")
			}
			// Values that may be secrets are never quoted back.
			if strings.Contains(err.Error(), "do-not-echo-me") {
				t.Errorf("an error quotes a secret:\n%v", err)
			}
			checkGolden(t, strings.TrimSuffix(f, ".yaml")+".golden", err.Error()+"\n")
		})
	}
}

// TestExamples loads every example configuration; the echo example's
// command must name a directory that exists relative to the file.
func TestExamples(t *testing.T) {
	files, _ := filepath.Glob("../examples/config/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example configs")
	}
	for _, f := range files {
		cfg, err := config.Load(f)
		if err != nil {
			t.Errorf("%s:\n%v", f, err)
			continue
		}
		for _, s := range cfg.Servers {
			if len(s.Argv) == 3 && s.Argv[0] == "go" && s.Argv[1] == "run" {
				if _, err := os.Stat(filepath.Join(s.Dir, s.Argv[2], "main.go")); err != nil {
					t.Errorf("%s: server %q: go run %s from %s: %v", f, s.ID, s.Argv[2], s.Dir, err)
				}
			}
		}
	}
}

// TestDocExamples parses every ```yaml block in docs/config.md, so the
// reference shows only files that load; a block whose first line starts
// "# script file:" is a scripted model's script, and is read as one.
func TestDocExamples(t *testing.T) {
	data, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	rest := string(data)
	for {
		_, after, ok := strings.Cut(rest, "```yaml\n")
		if !ok {
			break
		}
		block, tail, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatal("unterminated yaml block")
		}
		rest = tail
		blocks++
		if strings.HasPrefix(block, "# script file:") {
			if _, err := scripted.Parse([]byte(block), "docs/config.md block "+strconv.Itoa(blocks)); err != nil {
				t.Errorf("%v\nin:\n%s", err, block)
			}
			continue
		}
		if _, err := config.Parse([]byte(block), "docs/config.md block "+strconv.Itoa(blocks), t.TempDir()); err != nil {
			t.Errorf("%v\nin:\n%s", err, block)
		}
	}
	if blocks < 3 {
		t.Errorf("found %d yaml blocks in docs/config.md, want the examples", blocks)
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// dump renders a config for a golden: durations as text, the file's
// directory as $DIR, and each server's and agent's conversions beside it.
func dump(t *testing.T, cfg *config.Config) string {
	t.Helper()
	type server struct {
		ID, URL, TokenEnv, ToolPrefix string
		Argv                          []string
		Env                           map[string]string
		InheritEnv                    bool
		Dir                           string
		Reconnect                     map[string]any
		RequestTimeout                string
		TimeoutToolsCall              string
		TimeoutChannelsOpen           string
		Tools                         config.ToolPolicy
		Capabilities, FeatureSets     config.Patterns
		Channels                      config.Channels
	}
	type agent struct {
		config.Agent
		AllowsChannelOpen, AllowsChatSend bool
	}
	out := struct {
		Dir, Store    string
		Servers       []server
		Agents        []agent
		Primary       string
		Conversations config.ConversationsMode
		Inference     []config.InferenceRoute
	}{Dir: cfg.Dir, Store: cfg.Store, Servers: []server{}, Agents: []agent{}, Conversations: cfg.Conversations, Inference: cfg.Inference}
	for _, a := range cfg.Agents {
		out.Agents = append(out.Agents, agent{a, a.AllowsTool("channel_open"), a.AllowsTool("chat--send_message")})
	}
	if p, ok := cfg.Primary(); ok {
		out.Primary = p.Name
	}
	for _, s := range cfg.Servers {
		out.Servers = append(out.Servers, server{
			ID: s.ID, URL: s.URL, TokenEnv: s.TokenEnv, ToolPrefix: s.ToolPrefix,
			Argv: s.Argv, Env: s.Env, InheritEnv: s.InheritEnv, Dir: s.Dir,
			Reconnect: map[string]any{
				"Enabled": s.Reconnect.Enabled,
				"Initial": s.Reconnect.Initial.String(),
				"Max":     s.Reconnect.Max.String(),
			},
			RequestTimeout:      s.RequestTimeout.String(),
			TimeoutToolsCall:    s.TimeoutFor(protocol.MethodToolsCall).String(),
			TimeoutChannelsOpen: s.TimeoutFor(protocol.MethodChannelsOpen).String(),
			Tools:               s.Tools,
			Capabilities:        s.Capabilities,
			FeatureSets:         s.FeatureSets,
			Channels:            s.Channels,
		})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), cfg.Dir, "$DIR") + "\n"
}
