package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/protocol"
)

// parse decodes src as a file named c.yaml in dir.
func parse(t *testing.T, src, dir string) (*config.Config, error) {
	t.Helper()
	return config.Parse([]byte(src), "c.yaml", dir)
}

// one decodes a file holding one server whose keys are extra, after
// id: s and command: [s].
func one(t *testing.T, extra string) (config.Server, error) {
	t.Helper()
	cfg, err := parse(t, "servers:\n  - id: s\n    command: [s]\n"+extra, t.TempDir())
	if err != nil {
		return config.Server{}, err
	}
	if len(cfg.Servers) != 1 {
		t.Fatalf("got %d servers, want 1", len(cfg.Servers))
	}
	return cfg.Servers[0], nil
}

func TestPrefixesMeet(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"a", "a", true},    // equal: "a--x" is both's
		{"a", "a--b", true}, // "a--b--x"
		{"a--b", "a", true}, // either order
		{"a", "a-", true},   // "a---x" is a + "--" + "-x"
		{"a-", "a", true},   // either order
		{"a", "ab", false},  // "ab--x" does not start with "a--"
		{"a--b", "a--c", false},
		{"a", "a--", true}, // "a----x"
		{"a", "b", false},
		{"chat", "chat2", false},
		{"chat", "chat--2", true},
		{"Chat", "chat", false}, // case-sensitive, as dispatch is
		{"a-b", "a", false},     // "a-b--x" does not start with "a--"
	} {
		if got := config.PrefixesMeet(tc.a, tc.b); got != tc.want {
			t.Errorf("PrefixesMeet(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	existing := []config.PrefixOwner{{ID: "echo", Prefix: "echo"}, {ID: "chat", Prefix: "chat"}, {ID: "a", Prefix: "a"}}
	for _, tc := range []struct {
		id, prefix string
		want       string // "" for no error
	}{
		{"chat2", "chat--2", `servers "chat" and "chat2": tool prefixes "chat" and "chat--2" meet: a tool name like "chat--2--x" could belong to either`},
		{"other", "chat", `servers "chat" and "other": both use tool prefix "chat": a tool name like "chat--x" could belong to either`},
		{"dash", "a-", `servers "a" and "dash": tool prefixes "a" and "a-" meet: a tool name like "a---x" could belong to either`},
		{"chat", "chat", ""}, // a server does not conflict with itself
		{"fresh", "chatter", ""},
		{"ab", "ab", ""},
	} {
		err := config.CheckPrefix(tc.id, tc.prefix, existing)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckPrefix(%q, %q) = %v, want nil", tc.id, tc.prefix, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("CheckPrefix(%q, %q) = %v, want %s", tc.id, tc.prefix, err, tc.want)
		case tc.want != "":
			var pe *config.PrefixConflictError
			if !errors.As(err, &pe) || pe.ID != tc.id || pe.Prefix != tc.prefix {
				t.Errorf("CheckPrefix(%q, %q): %#v, want a *PrefixConflictError for the new server", tc.id, tc.prefix, err)
			}
		}
	}
	if err := config.CheckPrefix("x", "x", nil); err != nil {
		t.Errorf("CheckPrefix against nothing = %v", err)
	}
}

func TestToolPolicyAllows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy config.ToolPolicy
		tool   string
		want   bool
	}{
		{"zero allows all", config.ToolPolicy{}, "anything", true},
		{"empty enable allows none", config.ToolPolicy{Enable: []string{}}, "anything", false},
		{"exact enable", config.ToolPolicy{Enable: []string{"echo"}}, "echo", true},
		{"exact enable, other tool", config.ToolPolicy{Enable: []string{"echo"}}, "echo2", false},
		{"prefix wildcard", config.ToolPolicy{Disable: []string{"admin_*"}}, "admin_kick", false},
		{"prefix wildcard matches empty rest", config.ToolPolicy{Disable: []string{"admin_*"}}, "admin_", false},
		{"prefix wildcard, other tool", config.ToolPolicy{Disable: []string{"admin_*"}}, "administer", true},
		{"suffix wildcard", config.ToolPolicy{Disable: []string{"*_delete"}}, "file_delete", false},
		{"inner wildcard", config.ToolPolicy{Enable: []string{"get_*_info"}}, "get_user_info", true},
		{"inner wildcard needs both ends", config.ToolPolicy{Enable: []string{"get_*_info"}}, "get_user", false},
		{"wildcard spans separators", config.ToolPolicy{Enable: []string{"a*z"}}, "a--b.c/d-z", true},
		{"two wildcards", config.ToolPolicy{Enable: []string{"*mid*"}}, "amidst", true},
		{"backtracking", config.ToolPolicy{Enable: []string{"*ab"}}, "aab", true},
		{"backtracking fails", config.ToolPolicy{Enable: []string{"*ab*c"}}, "abab", false},
		{"star alone", config.ToolPolicy{Enable: []string{"*"}}, "", true},
		{"deny wins over enable", config.ToolPolicy{Enable: []string{"*"}, Disable: []string{"rm"}}, "rm", false},
		{"deny wins over exact enable", config.ToolPolicy{Enable: []string{"rm"}, Disable: []string{"r*"}}, "rm", false},
		{"enable and deny, other tool", config.ToolPolicy{Enable: []string{"*"}, Disable: []string{"rm"}}, "ls", true},
		{"no other metacharacters", config.ToolPolicy{Enable: []string{"a?c"}}, "abc", false},
		{"case-sensitive", config.ToolPolicy{Enable: []string{"Echo"}}, "echo", false},
		{"unicode literal", config.ToolPolicy{Enable: []string{"é*"}}, "ecole", false},
		{"unicode wildcard", config.ToolPolicy{Enable: []string{"*é"}}, "café", true},
	} {
		if got := tc.policy.Allows(tc.tool); got != tc.want {
			t.Errorf("%s: %+v.Allows(%q) = %v, want %v", tc.name, tc.policy, tc.tool, got, tc.want)
		}
	}
}

func TestSubscription(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want config.Subscription
	}{
		{"", config.Subscription{Mode: config.SubscriptionManual}},
		{"    channels: {subscription: manual}\n", config.Subscription{Mode: config.SubscriptionManual}},
		{"    channels: {subscription: auto}\n", config.Subscription{Mode: config.SubscriptionAuto}},
		{"    channels: {subscription: [general, \"42\"]}\n", config.Subscription{Mode: config.SubscriptionList, Channels: []string{"general", "42"}}},
		{"    channels: {subscription: [7]}\n", config.Subscription{Mode: config.SubscriptionList, Channels: []string{"7"}}},
		{"    channels: {subscription: []}\n", config.Subscription{Mode: config.SubscriptionList, Channels: []string{}}},
		{"    channels:\n      subscription:\n        - a\n        - b\n", config.Subscription{Mode: config.SubscriptionList, Channels: []string{"a", "b"}}},
	} {
		s, err := one(t, tc.src)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, s.Channels.Subscription); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.src, diff)
		}
	}
}

// TestSubscriptionAdmits: manual admits no channel, auto every one, and a
// list exactly the ids it holds.
func TestSubscriptionAdmits(t *testing.T) {
	list := config.Subscription{Mode: config.SubscriptionList, Channels: []string{"general", "42", "discord:123/456"}}
	for _, tc := range []struct {
		name    string
		sub     config.Subscription
		channel string
		want    bool
	}{
		{"manual", config.Subscription{Mode: config.SubscriptionManual}, "general", false},
		{"manual, empty id", config.Subscription{Mode: config.SubscriptionManual}, "", false},
		{"manual ignores a stray list", config.Subscription{Mode: config.SubscriptionManual, Channels: []string{"general"}}, "general", false},
		{"auto", config.Subscription{Mode: config.SubscriptionAuto}, "general", true},
		{"auto, any id", config.Subscription{Mode: config.SubscriptionAuto}, "anything/at all", true},
		{"list, listed", list, "general", true},
		{"list, listed number", list, "42", true},
		{"list, listed with punctuation", list, "discord:123/456", true},
		{"list, not listed", list, "random", false},
		{"list, case matters", list, "General", false},
		{"list, no prefix match", list, "gen", false},
		{"list, no extension match", list, "general2", false},
		{"list, empty id", list, "", false},
		{"empty list admits none", config.Subscription{Mode: config.SubscriptionList, Channels: []string{}}, "general", false},
		{"zero value admits none", config.Subscription{}, "general", false},
		{"unknown mode admits none", config.Subscription{Mode: "bogus", Channels: []string{"general"}}, "general", false},
	} {
		if got := tc.sub.Admits(tc.channel); got != tc.want {
			t.Errorf("%s: %+v.Admits(%q) = %v, want %v", tc.name, tc.sub, tc.channel, got, tc.want)
		}
	}
	// What a file decodes to admits as written.
	s, err := one(t, "    channels: {subscription: [general, 7]}\n")
	if err != nil {
		t.Fatal(err)
	}
	if sub := s.Channels.Subscription; !sub.Admits("general") || !sub.Admits("7") || sub.Admits("random") {
		t.Errorf("decoded %+v admits wrongly", sub)
	}
}

// TestSendTools: channels.sendTools is a list of bare tool names; absent
// gives the defaults, [] none.
func TestSendTools(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
		err  string
	}{
		{src: "", want: []string{"send_message", "reply_message", "send_dm", "send_file"}},
		{src: "    channels: {subscription: auto}\n", want: config.DefaultSendTools()},
		{src: "    channels: {sendTools: [post, reply_in_thread]}\n", want: []string{"post", "reply_in_thread"}},
		{src: "    channels:\n      subscription: manual\n      sendTools:\n        - post\n        - 7\n", want: []string{"post", "7"}},
		{src: "    channels: {sendTools: []}\n", want: []string{}},
		{src: "    channels: {sendTools: send_message}\n", err: `c.yaml:4: servers[0].channels.sendTools: must be a list of tool names, not "send_message"`},
		{src: "    channels: {sendTools: {send_message: true}}\n", err: `c.yaml:4: servers[0].channels.sendTools: must be a list of tool names, not a mapping`},
		{src: "    channels:\n      sendTools:\n", err: `c.yaml:5: servers[0].channels.sendTools: has no value; give a list of tool names, or leave the key out`},
		{src: "    channels: {sendTools: [post, \"\"]}\n", err: `c.yaml:4: servers[0].channels.sendTools[1]: is empty; give a tool's bare name, like send_message`},
		{src: "    channels:\n      sendTools:\n        - post\n        - send_*\n", err: `c.yaml:7: servers[0].channels.sendTools[1]: "send_*" is not a tool name: sendTools names tools exactly, with no patterns; write each one, like send_message`},
		{src: "    channels: {sendTools: [[post]]}\n", err: `c.yaml:4: servers[0].channels.sendTools[0]: must be a string, not a list`},
		{src: "    channels: {sendTools: [post], sendTool: [reply]}\n", err: `c.yaml:4: servers[0].channels.sendTool: unknown key (did you mean sendTools?)`},
		{src: "    channels: {sendTools: [post], replyTools: [reply]}\n", err: `c.yaml:4: servers[0].channels.replyTools: unknown key`},
		{src: "    sendTools: [post]\n", err: `c.yaml:4: servers[0].sendTools: unknown key (write channels: {sendTools: [...]})`},
		{src: "    channels: {sendTools: [a], sendTools: [b]}\n", err: `c.yaml:4: servers[0].channels.sendTools: given twice in one mapping (first on line 4)`},
	} {
		s, err := one(t, tc.src)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: err = %v\nwant %s", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if got := s.Channels.SendTools; got == nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: SendTools = %#v, want %#v", tc.src, got, tc.want)
		}
	}
}

// TestSendToolsDefaults: WithDefaults fills a nil SendTools with a copy of
// DefaultSendTools and keeps any other list, even an empty one.
func TestSendToolsDefaults(t *testing.T) {
	want := []string{"send_message", "reply_message", "send_dm", "send_file"}
	if !slices.Equal(config.DefaultSendTools(), want) {
		t.Fatalf("DefaultSendTools = %q, want %q", config.DefaultSendTools(), want)
	}
	a := config.Server{ID: "a"}.WithDefaults()
	b := config.Server{ID: "b"}.WithDefaults()
	if !slices.Equal(a.Channels.SendTools, want) {
		t.Fatalf("SendTools = %#v, want the defaults", a.Channels.SendTools)
	}
	a.Channels.SendTools[0] = "changed"
	if config.DefaultSendTools()[0] != "send_message" || b.Channels.SendTools[0] != "send_message" {
		t.Errorf("changing one server's SendTools changed DefaultSendTools (%q) or another server's (%q)", config.DefaultSendTools(), b.Channels.SendTools)
	}
	if got := a.WithDefaults().Channels.SendTools; !slices.Equal(got, a.Channels.SendTools) {
		t.Errorf("WithDefaults twice: SendTools %q, want %q kept", got, a.Channels.SendTools)
	}
	empty := config.Server{ID: "e", Channels: config.Channels{SendTools: []string{}}}.WithDefaults()
	if got := empty.Channels.SendTools; got == nil || len(got) != 0 {
		t.Errorf("empty SendTools became %#v, want empty and not nil", got)
	}
	set := config.Server{ID: "s", Channels: config.Channels{SendTools: []string{"post"}}}.WithDefaults()
	if got := set.Channels.SendTools; !slices.Equal(got, []string{"post"}) {
		t.Errorf("SendTools [post] became %#v", got)
	}
}

func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		src     string
		want    config.Reconnect
		timeout time.Duration
		err     string
	}{
		{src: "", want: config.Reconnect{Initial: 5 * time.Second, Max: 5 * time.Minute}, timeout: 60 * time.Second},
		{src: "    reconnect: {enabled: true}\n", want: config.Reconnect{Enabled: true, EnabledSet: true, Initial: 5 * time.Second, Max: 5 * time.Minute}, timeout: 60 * time.Second},
		{src: "    reconnect: {initial: 1m, max: 1m}\n", want: config.Reconnect{Initial: time.Minute, Max: time.Minute}, timeout: 60 * time.Second},
		{src: "    reconnect: {initial: 100ms, max: 2h45m}\n", want: config.Reconnect{Initial: 100 * time.Millisecond, Max: 2*time.Hour + 45*time.Minute}, timeout: 60 * time.Second},
		{src: "    requestTimeout: 0\n", want: config.Reconnect{Initial: 5 * time.Second, Max: 5 * time.Minute}, timeout: config.NoTimeout},
		{src: "    requestTimeout: 0s\n", want: config.Reconnect{Initial: 5 * time.Second, Max: 5 * time.Minute}, timeout: config.NoTimeout},
		{src: "    requestTimeout: 60s\n", want: config.Reconnect{Initial: 5 * time.Second, Max: 5 * time.Minute}, timeout: 60 * time.Second},
		{src: "    requestTimeout: \"2m30s\"\n", want: config.Reconnect{Initial: 5 * time.Second, Max: 5 * time.Minute}, timeout: 150 * time.Second},
		{src: "    reconnect: {initial: 5 seconds}\n", err: `c.yaml:4: servers[0].reconnect.initial: "5 seconds" is not a duration (write it like 5s or 2m30s)`},
		{src: "    reconnect: {max: 300}\n", err: `c.yaml:4: servers[0].reconnect.max: "300" is not a duration (write it like 5s or 2m30s)`},
		{src: "    reconnect: {max: -5m}\n", err: `c.yaml:4: servers[0].reconnect.max: "-5m" is negative; a duration must be 0 or more`},
		{src: "    reconnect: {initial: 0s}\n", err: `c.yaml:4: servers[0].reconnect.initial: must be more than 0`},
		{src: "    reconnect: {initial: 2s, max: 1s}\n", err: `c.yaml:4: servers[0].reconnect.max: 1s is less than initial (2s); max is the longest wait, so it must be at least initial`},
		{src: "    reconnect: {initial: 6m}\n", err: `c.yaml:4: servers[0].reconnect.initial: 6m0s is more than max (5m0s, the default); set max too`},
		{src: "    requestTimeout: -1ns\n", err: `c.yaml:4: servers[0].requestTimeout: "-1ns" is negative; a duration must be 0 or more`},
		{src: "    requestTimeout: 1d\n", err: `c.yaml:4: servers[0].requestTimeout: "1d" is not a duration (write it like 5s or 2m30s)`},
		{src: "    requestTimeout: [1s]\n", err: `c.yaml:4: servers[0].requestTimeout: must be a duration like 5s or 2m30s, not a list`},
		{src: "    requestTimeout:\n", err: `c.yaml:4: servers[0].requestTimeout: has no value; give a duration like 5s or 2m30s, or leave the key out`},
	} {
		s, err := one(t, tc.src)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: err = %v\nwant %s", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if s.Reconnect != tc.want || s.RequestTimeout != tc.timeout {
			t.Errorf("%q: reconnect %+v, timeout %v; want %+v, %v", tc.src, s.Reconnect, s.RequestTimeout, tc.want, tc.timeout)
		}
	}
}

func TestTimeoutFor(t *testing.T) {
	none := config.Server{RequestTimeout: config.NoTimeout}
	set := config.Server{RequestTimeout: 5 * time.Second}
	unset := config.Server{} // configured in code: the default
	for _, tc := range []struct {
		s      config.Server
		method string
		want   time.Duration
	}{
		{none, protocol.MethodToolsCall, 0},
		{none, protocol.MethodChannelsOpen, config.ChannelRequestTimeout},
		{none, protocol.MethodChannelsClose, config.ChannelRequestTimeout},
		{none, protocol.MethodChannelsPublish, config.ChannelRequestTimeout},
		{none, protocol.MethodChannelsList, 0},
		{set, protocol.MethodToolsCall, 5 * time.Second},
		{set, protocol.MethodChannelsOpen, 5 * time.Second}, // a set timeout applies to channels too
		{unset, protocol.MethodToolsCall, config.DefaultRequestTimeout},
		{unset.WithDefaults(), protocol.MethodToolsCall, config.DefaultRequestTimeout},
	} {
		if got := tc.s.TimeoutFor(tc.method); got != tc.want {
			t.Errorf("RequestTimeout %v: TimeoutFor(%s) = %v, want %v", tc.s.RequestTimeout, tc.method, got, tc.want)
		}
	}
	if config.ChannelRequestTimeout != 60*time.Second || config.DefaultRequestTimeout != 60*time.Second {
		t.Errorf("ChannelRequestTimeout = %v, DefaultRequestTimeout = %v, want 60s each", config.ChannelRequestTimeout, config.DefaultRequestTimeout)
	}
}

// TestWithDefaults: a server configured in code gets the defaults a file's
// server gets, from the one place they are applied; what is set stays.
func TestWithDefaults(t *testing.T) {
	fromFile, err := one(t, "")
	if err != nil {
		t.Fatal(err)
	}
	inCode := config.Server{ID: fromFile.ID, Argv: fromFile.Argv, Dir: fromFile.Dir}.WithDefaults()
	if diff := cmp.Diff(fromFile, inCode); diff != "" {
		t.Errorf("a server in code with defaults differs from the file's (-file +code):\n%s", diff)
	}
	kept := config.Server{ID: "s", ToolPrefix: "p", RequestTimeout: config.NoTimeout,
		Reconnect: config.Reconnect{Initial: time.Second, Max: time.Minute},
		Channels:  config.Channels{Subscription: config.Subscription{Mode: config.SubscriptionAuto}, SendTools: []string{}}}
	if got := kept.WithDefaults(); !cmp.Equal(got, kept) {
		t.Errorf("WithDefaults changed what was set: %+v", got)
	}
}

// TestNilVersusEmpty: an absent list is nil (no constraint) and [] is an
// empty allowlist (the host keeps the difference in the grant policy, where
// it decides what is granted).
func TestNilVersusEmpty(t *testing.T) {
	absent, err := one(t, "")
	if err != nil {
		t.Fatal(err)
	}
	empty, err := one(t, "    tools: {enable: []}\n    capabilities: {enable: [], disable: []}\n    featureSets: {enable: [], disable: []}\n")
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string][]string{
		"absent tools.enable": absent.Tools.Enable, "absent capabilities.enable": absent.Capabilities.Enable,
		"absent capabilities.disable": absent.Capabilities.Disable, "absent featureSets.enable": absent.FeatureSets.Enable,
		"absent featureSets.disable": absent.FeatureSets.Disable,
	} {
		if v != nil {
			t.Errorf("%s = %#v, want nil", name, v)
		}
	}
	for name, v := range map[string][]string{
		"empty tools.enable": empty.Tools.Enable, "empty capabilities.enable": empty.Capabilities.Enable,
		"empty capabilities.disable": empty.Capabilities.Disable, "empty featureSets.enable": empty.FeatureSets.Enable,
		"empty featureSets.disable": empty.FeatureSets.Disable,
	} {
		if v == nil || len(v) != 0 {
			t.Errorf("%s = %#v, want empty and not nil", name, v)
		}
	}
	if !absent.Tools.Allows("echo") || empty.Tools.Allows("echo") {
		t.Errorf("absent enable must allow echo and enable: [] must not")
	}
}

func TestPaths(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		src, want string
	}{
		{"servers: []\n", filepath.Join(dir, "data", "host.db")},
		{"store: state.db\n", filepath.Join(dir, "state.db")},
		{"store: ./a/../b/s.db\n", filepath.Join(dir, "b", "s.db")},
		{"store: ../up.db\n", filepath.Join(filepath.Dir(dir), "up.db")},
		{"store: /abs/s.db\n", "/abs/s.db"},
	} {
		cfg, err := parse(t, tc.src, dir)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if cfg.Store != tc.want || cfg.Dir != dir {
			t.Errorf("%q: Store %q, Dir %q; want %q, %q", tc.src, cfg.Store, cfg.Dir, tc.want, dir)
		}
	}

	// Load resolves against the file's directory, even given a relative
	// path, and a command server runs there.
	sub := filepath.Join(dir, "conf")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "host.yaml"), []byte("servers:\n  - id: e\n    command: [go, run, ../echo]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	cfg, err := config.Load(filepath.Join("conf", "host.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dir != sub || cfg.Store != filepath.Join(sub, "data", "host.db") {
		t.Errorf("Dir %q, Store %q; want both under %q", cfg.Dir, cfg.Store, sub)
	}
	if s := cfg.Servers[0]; s.Dir != sub || !slices.Equal(s.Argv, []string{"go", "run", "../echo"}) {
		t.Errorf("server %+v, want Argv as written and Dir %q", s, sub)
	}

	// Parse makes a relative dir absolute.
	cfg, err = parse(t, "servers: []\n", "conf")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dir != sub {
		t.Errorf("Parse with dir \"conf\": Dir %q, want %q", cfg.Dir, sub)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"))
	var cerr *config.Error
	if !errors.Is(err, os.ErrNotExist) || errors.As(err, &cerr) {
		t.Errorf("Load of a missing file = %v, want the os error", err)
	}
}

func TestCommandEnv(t *testing.T) {
	s, err := one(t, "    env: {ZED: z, ALPHA: a, MID: \"\", N: 5}\n    inheritEnv: true\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"ZED": "z", "ALPHA": "a", "MID": "", "N": "5"}; !cmp.Equal(s.Env, want) {
		t.Errorf("Env = %q, want %q", s.Env, want)
	}
	if !s.InheritEnv || s.Dir == "" || !slices.Equal(s.Argv, []string{"s"}) {
		t.Errorf("server %+v", s)
	}
}

func TestToken(t *testing.T) {
	s := config.Server{ID: "remote", TokenEnv: "REMOTE_TOKEN"}
	env := map[string]string{"REMOTE_TOKEN": "sekrit", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	if tok, err := s.Token(lookup); err != nil || tok != "sekrit" {
		t.Errorf("Token = %q, %v; want the variable's value", tok, err)
	}
	for _, name := range []string{"UNSET_TOKEN", "EMPTY"} {
		s.TokenEnv = name
		tok, err := s.Token(lookup)
		want := `server "remote": environment variable ` + name + `, named by its tokenEnv, is not set`
		if err == nil || err.Error() != want || tok != "" {
			t.Errorf("Token with %s = %q, %v; want %s", name, tok, err, want)
		}
	}
	s.TokenEnv = ""
	if tok, err := s.Token(func(string) (string, bool) { t.Error("looked up with no tokenEnv"); return "", false }); tok != "" || err != nil {
		t.Errorf("Token with no tokenEnv = %q, %v", tok, err)
	}
	// nil reads the process environment.
	t.Setenv("MCPL_CONFIG_TEST_TOKEN", "from-env")
	s.TokenEnv = "MCPL_CONFIG_TEST_TOKEN"
	if tok, err := s.Token(nil); tok != "from-env" || err != nil {
		t.Errorf("Token(nil) = %q, %v", tok, err)
	}
}

// TestProblemOrder: problems come back in file order, whichever check
// found them, each on its own line.
func TestProblemOrder(t *testing.T) {
	_, err := parse(t, "servers:\n  - id: a\n    command: [a]\n    reconnect: {initial: 9s, max: 1s}\n  - id: a\n    comand: [b]\nstor: x\n", t.TempDir())
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("err = %v, want *config.Error", err)
	}
	var lines []int
	for _, p := range cerr.Problems {
		lines = append(lines, p.Line)
	}
	if want := []int{4, 5, 5, 6, 7}; !slices.Equal(lines, want) {
		t.Errorf("problem lines %v, want %v:\n%v", lines, want, err)
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != len(cerr.Problems) {
		t.Errorf("Error() has %d lines for %d problems", got, len(cerr.Problems))
	}
	p := cerr.Problems[0]
	if p.File != "c.yaml" || p.Key != "servers[0].reconnect.max" || p.String() != "c.yaml:4: servers[0].reconnect.max: "+p.Msg {
		t.Errorf("first problem %+v, String %q", p, p.String())
	}
}

func TestParseName(t *testing.T) {
	_, err := config.Parse([]byte("bogus: 1\n"), "", t.TempDir())
	if err == nil || err.Error() != "config:1: bogus: unknown key" {
		t.Errorf("err = %v, want config:1: bogus: unknown key", err)
	}
}

// TestSyntaxLines: a YAML syntax error names the line it is on, which
// yaml.v3's own message sometimes leaves out or puts before.
func TestSyntaxLines(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string
	}{
		{"servers: x: y\n", "c.yaml:1: not valid YAML: mapping values are not allowed in this context"},
		{"servers:\n  - id: a\n    command: [a, b\n  - id: b\n", "c.yaml:3: not valid YAML: did not find expected ',' or ']'"},
		{"servers:\n  - id: a\n\tcommand: [a]\n", "c.yaml:3: not valid YAML: found a tab character that violates indentation"},
		{"store: x\nservers:\n  - id: a\n  bad: 2\n", "c.yaml:4: not valid YAML: did not find expected '-' indicator"},
		{"store: 'unterminated\nservers: []\n", "c.yaml:1: not valid YAML: found unexpected end of stream"},
		{"store: x\nservers: *nope\n", "c.yaml:2: not valid YAML: unknown anchor 'nope' referenced"},
		{"store: x\nservers: [\n  a,\n  b]\nx: y: z\n", "c.yaml:5: not valid YAML: mapping values are not allowed in this context"},
		{"store: x\nservers:\n  - id: a\n    command: [a]\n\t\n  - @x\n", "c.yaml:5: not valid YAML: found character that cannot start any token (indent with spaces: YAML does not allow tabs there)"},
		{"inference:\n  - {server: *, agent: ada}\n", `c.yaml:2: not valid YAML: did not find expected alphabetic or numeric character (a * that starts a value is read as an alias; quote it: "*")`},
		{"servers:\n  - id: a\n    command: [a]\n    tools: {enable: [*]}\n", `c.yaml:4: not valid YAML: did not find expected alphabetic or numeric character (a * that starts a value is read as an alias; quote it: "*")`},
	} {
		_, err := parse(t, tc.src, t.TempDir())
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
	// A long file gets its line too (found by bisecting prefixes).
	var b strings.Builder
	b.WriteString("servers:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  - id: s%d\n    command: [a]\n", i)
	}
	b.WriteString("  - id: [x\n")
	_, err := parse(t, b.String(), t.TempDir())
	if want := "c.yaml:2002: not valid YAML: did not find expected ',' or ']'"; err == nil || err.Error() != want {
		t.Errorf("long file: %v, want %s", err, want)
	}
}
