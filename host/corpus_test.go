package host_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
	"github.com/mcpl-go/mcpl/internal/model/fakeapi"
	"github.com/mcpl-go/mcpl/store/sqlite"
)

// The RFC-006 conformance corpus (testdata/event-coalescing-vectors.json,
// a copy of the upstream file; RFC-006 §14, "Consume the vectors") run
// against the real host: host.Host from a config file, a SQLite store,
// the corpus's server as a WebSocket peer on 127.0.0.1 (corpusPeer), and
// the model as a local server speaking Anthropic's Messages API
// (fakeapi), whose recorded requests are what requestText reads. Each
// scenario is a subtest named by its row and variant.
//
// How the adapter drives the host, since the corpus names controls, not
// mechanisms:
//
//   - assemble sends the host an ordinary push event tagged probe:assemble
//     (the agent's rules wake on it, and batch every other event unless
//     the scenario waits on wakes itself) and waits for the model request
//     that shows it; startTurn sends it without waiting, joinTurn waits.
//   - turn waits for the wakes already there: a quiet time past the
//     debounce, and no turn running.
//   - restart closes the host and opens another on the same store file;
//     kill closes the store under the host first, so that nothing the
//     host does from that instant is durable, then tears the host down.
//   - disconnect drops the peer's connection and refuses the host's
//     redials until reconnect.
//
// A scenario whose controls or profile this adapter does not construct is
// reported as not exercised, with the reason, and never as a pass; the
// test fails on any scenario that runs and fails a check.

// corpusFile is the corpus as RFC-006 §14 describes it.
type corpusFile struct {
	Format string       `json:"format"`
	Cases  []corpusCase `json:"cases"`
}

type corpusCase struct {
	ID       string          `json:"id"`
	Contract string          `json:"contract"`
	Kind     string          `json:"kind"`
	Variants []corpusVariant `json:"variants"`
}

type corpusVariant struct {
	Name     string                     `json:"name"`
	Setup    map[string]json.RawMessage `json:"setup"`
	Requires []string                   `json:"requires"`
	Steps    []corpusStep               `json:"steps"`
	// rules are treatment rules (YAML flow lines) an agent has before the
	// adapter's, by agent: set only by a test that builds a variant here.
	rules map[string][]string
}

type corpusStep struct {
	ID        string            `json:"id"`
	Op        string            `json:"op"`
	Method    string            `json:"method"`
	Params    json.RawMessage   `json:"params"`
	Checks    []json.RawMessage `json:"checks"`
	Plan      *renderPlan       `json:"plan"`
	Channel   string            `json:"channel"`
	Count     int               `json:"count"`
	Text      string            `json:"text"`
	Ms        int               `json:"ms"`
	QuietMs   int               `json:"quietMs"`
	Interval  int               `json:"intervalMs"`
	Agent     string            `json:"agent"`
	Server    string            `json:"server"`
	Leaves    []string          `json:"leaves"`
	Name      string            `json:"name"`
	RecoverID string            `json:"recoveryFrom"`
}

// The profile this adapter declares: what the host is, and what the
// adapter can construct.
var corpusProfile = struct {
	capabilities map[string]bool
	// wakeBoundMs is the bound §4.2 asks for: the agent's MaxDelay, and a
	// scheduling allowance for a loaded two-core machine under -race.
	wakeBoundMs float64
}{
	capabilities: map[string]bool{
		"initial-history-none":           true,
		"conservative-recovery":          true,
		"retain-64-notices":              true,
		"finite-wake-postponement-bound": true,
		"restart-without-history":        true,
		// Options.CoalesceSubjects: corpusSubjects a server.
		"hard-subject-limit": true,
	},
	wakeBoundMs: float64(corpusMaxDelay/time.Millisecond) + 1500,
}

// corpusSubjects is the host's subject bound for the corpus (the
// default, 1024, would only make fillCapacity slower).
const corpusSubjects = 16

// corpusMaxDelay is the corpus agent's postponement bound.
const corpusMaxDelay = 400 * time.Millisecond

// inapplicable are the profile preconditions that do not hold for this
// host, with why: conditions of a profile it does not have, which RFC-006
// leaves to the host.
var inapplicable = map[string]string{
	"unadvertised-channel-scoped-push": "this host advertises channelScopedPush, so the absent leaf's condition does not hold",
	"per-context-consumption":          "this host consumes an occurrence for every context at once (shared consumption, which RFC-006 §3.3 permits)",
	"changing-advertised-retry-window": "this host advertises the same retry window, the default hour, on every connection",
	"materialized-unread":              "this host materializes a deferred batch only as it assembles the request that shows it, so no batch is ever materialized and unread",
}

// notApplicable says why a scenario's profile does not apply to this
// host; "" when it does.
func notApplicable(v corpusVariant) string {
	for _, r := range v.Requires {
		if why := inapplicable[r]; why != "" {
			return "profile precondition " + r + ": " + why
		}
	}
	if v.Setup["compression"] != nil {
		return "this host does not summarize or compress context, so nothing is consumed by compression"
	}
	return ""
}

// notExercised says why the adapter does not run a scenario; "" when it
// does. op names the first control it lacks.
func notExercised(v corpusVariant) string {
	for _, r := range v.Requires {
		if r == "controlled-clock" && slices.ContainsFunc(v.Steps, func(s corpusStep) bool { return s.Op == "continuousReplacements" }) {
			continue // measured on the real clock, with the allowance stated (corpusProfile)
		}
		if !corpusProfile.capabilities[r] {
			return "profile precondition " + r + " is not constructed by this adapter"
		}
	}
	for k := range v.Setup {
		switch k {
		case "gate", "errorPolicy", "wakePolicy", "clock", "agents", "servers", "eventCoalescing", "conversations":
		default:
			return "setup " + k + " is not constructed by this adapter"
		}
	}
	for _, s := range v.Steps {
		switch s.Op {
		case "send", "assemble", "render", "waitRender", "releaseRender", "startTurn", "joinTurn", "turn",
			"wait", "observe", "restart", "kill", "disconnect", "reconnect", "failNextModel", "continuousReplacements",
			"disableFeature", "register", "restartWithoutHistory", "channelTool", "grant", "fillCapacity", "reassign":
		default:
			return "control " + s.Op + " is not constructed by this adapter"
		}
	}
	return ""
}

func TestCoalescingCorpus(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "event-coalescing-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus corpusFile
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	if corpus.Format != "mcpl-event-coalescing-1" {
		t.Fatalf("corpus format %q, want mcpl-event-coalescing-1", corpus.Format)
	}
	var mu sync.Mutex
	tally := map[string][]string{}
	t.Run("cases", func(t *testing.T) {
		for _, c := range corpus.Cases {
			for _, v := range c.Variants {
				name := c.ID + "/" + v.Name
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					verdict := "passed"
					if c.Kind != "host" {
						verdict = "not-applicable: " + c.Kind + " row, not a host obligation"
					} else if why := notApplicable(v); why != "" {
						verdict = "not-applicable: " + why
					} else if why := notExercised(v); why != "" {
						verdict = "not-exercised: " + why
					} else {
						runScenario(t, v)
						if t.Failed() {
							verdict = "failed"
						}
					}
					mu.Lock()
					tally[verdict] = append(tally[verdict], name)
					mu.Unlock()
					if verdict != "passed" && verdict != "failed" {
						t.Skip(verdict)
					}
				})
			}
		}
	})
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range tally {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "%3d %s: %s\n", len(tally[k]), k, strings.Join(tally[k], " "))
	}
	t.Logf("corpus figure:\n%s", b.String())
	total := 0
	for _, c := range corpus.Cases {
		total += len(c.Variants)
	}
	ran := 0
	for _, names := range tally {
		ran += len(names)
	}
	if ran < total {
		return // a selection of the corpus (-run): not the figure
	}
	for _, must := range []string{"21/rpc-error", "21/timeout", "21/disconnected", "34/default", "34/empty-slot-after-retraction",
		"36/default", "43/skip-control", "43/qualifying-control", "43/qualifying-to-skip", "43/qualifying-retracted", "43/skip-to-qualifying"} {
		if !slices.Contains(tally["passed"], must) {
			t.Errorf("%s did not pass", must)
		}
	}
}

// scenario is one variant's run: its host, peer, model and observations.
type scenario struct {
	t     *testing.T
	v     corpusVariant
	dir   string
	peer  *corpusPeer // the corpus's server, "editor"
	probe *corpusPeer // the adapter's own, "probe": it sends the controls
	// others are the corpus servers beside editor (setup servers).
	others map[string]*corpusPeer
	api    *fakeapi.Server
	st     *sqlite.DB
	h      *host.Host
	stop   func()
	cfg    *config.Config            // the host's
	obs    map[string]map[string]any // each step's observation, by step id
	n      int                       // assemble markers sent
	turnN  int                       // the marker a startTurn sent
	// debounce is the agent's.
	debounce time.Duration
	// batchOthers: events without probe:assemble batch (the scenario
	// drives every inference); else the host's defaults wake on them.
	batchOthers bool
}

func runScenario(t *testing.T, v corpusVariant) {
	s := &scenario{t: t, v: v, dir: t.TempDir(), peer: newCorpusPeer(t, corpusAdvertisement()), probe: newCorpusPeer(t, probeAdvertisement()), obs: map[string]map[string]any{}}
	s.api = fakeapi.NewAnthropic(t)
	s.batchOthers = !slices.ContainsFunc(v.Steps, func(st corpusStep) bool { return st.Op == "turn" })
	switch {
	case v.Setup["gate"] != nil:
		s.debounce, s.batchOthers = 100*time.Millisecond, false
	case v.Setup["wakePolicy"] != nil:
		s.debounce, s.batchOthers = 100*time.Millisecond, false
	case !s.batchOthers:
		s.debounce = 100 * time.Millisecond
	}
	s.others = map[string]*corpusPeer{}
	if raw := v.Setup["servers"]; raw != nil {
		var names []string
		json.Unmarshal(raw, &names)
		for _, n := range names {
			if n != "editor" {
				s.others[n] = newCorpusPeer(t, otherAdvertisement())
			}
		}
	}
	s.writeConfig()
	s.start()
	t.Cleanup(func() {
		if s.stop != nil {
			s.stop()
		}
	})
	for _, step := range v.Steps {
		o := s.step(step)
		s.check(step, o)
		if step.ID != "" {
			s.obs[step.ID] = o
		}
		if t.Failed() {
			return
		}
	}
}

// writeConfig writes the host's config for the scenario.
func (s *scenario) writeConfig() {
	var rules strings.Builder
	rules.WriteString("        - {tagsAny: [probe:assemble], treat: wake}\n")
	if s.v.Setup["gate"] != nil {
		// The corpus's gate: probe:wake qualifies, everything else is
		// "skip", which here batches (joins the next turn unwoken).
		rules.WriteString("        - {tagsAny: [probe:wake], treat: wake}\n        - {tagsNone: [probe:wake], treat: batch}\n")
	} else if s.batchOthers {
		rules.WriteString("        - {tagsNone: [probe:assemble], treat: batch}\n")
	}
	debounce := "0s"
	if s.debounce > 0 {
		debounce = s.debounce.String()
	}
	names := []string{"agent"}
	if raw := s.v.Setup["agents"]; raw != nil {
		names = nil
		json.Unmarshal(raw, &names)
	}
	// The corpus's conversations bound to each channel from a template
	// agent are this host's per-channel conversations: forks of the
	// first agent, one a channel.
	conversations := ""
	if s.v.Setup["conversations"] != nil {
		conversations = "conversations: per-channel\n"
	}
	var others strings.Builder
	for _, name := range slices.Sorted(maps.Keys(s.others)) {
		fmt.Fprintf(&others, "  - id: %s\n    url: %s\n", name, s.others[name].url())
	}
	var agents strings.Builder
	for _, name := range names {
		var own strings.Builder
		for _, r := range s.v.rules[name] {
			fmt.Fprintf(&own, "        - %s\n", r)
		}
		fmt.Fprintf(&agents, `  - name: %s
    model: {provider: anthropic, model: fixture-%s, apiKeyEnv: CORPUS_MODEL_KEY, baseURL: %q}
    wake:
      debounce: %s
      maxDelay: %s
      rules:
%s%s`, name, name, s.api.URL, debounce, corpusMaxDelay, own.String(), rules.String())
	}
	cfg := fmt.Sprintf(`servers:
  - id: editor
    url: %s
    reconnect: {enabled: true, initial: 20ms, max: 100ms}
  - id: probe
    url: %s
%sagents:
%sinference:
  - {server: editor, agent: agent}
%s`, s.peer.url(), s.probe.url(), others.String(), agents.String(), conversations)
	if err := os.WriteFile(filepath.Join(s.dir, "config.yaml"), []byte(cfg), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// start starts a host on the scenario's config and store, and waits for
// its connection to the peer.
func (s *scenario) start() {
	t := s.t
	t.Helper()
	cfg, err := config.Load(filepath.Join(s.dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s.cfg = cfg
	st, err := sqlite.Open(filepath.Join(s.dir, "host.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Options{Store: st, Logger: discardLogger(), CoalesceSubjects: corpusSubjects, LookupEnv: func(k string) (string, bool) {
		return "corpus-key", k == "CORPUS_MODEL_KEY"
	}})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	s.st, s.h = st, h
	s.stop = sync.OnceFunc(func() {
		h.Close()
		st.Close()
	})
	if err := h.Start(cfg); err != nil {
		t.Fatal(err)
	}
	<-h.Settled()
	s.peer.waitReady(t)
	s.probe.waitReady(t)
	for _, p := range s.others {
		p.waitReady(t)
	}
}
