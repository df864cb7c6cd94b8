package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/config"
)

// loadWithin runs load(path) and fails the test if it hasn't returned in
// 60 s: a blocked open must fail the test, not hang it.
func loadWithin(t *testing.T, load func(string) (*config.Config, error), path string) (*config.Config, error) {
	t.Helper()
	type result struct {
		cfg *config.Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := load(path)
		done <- result{cfg, err}
	}()
	select {
	case r := <-done:
		return r.cfg, r.err
	case <-time.After(60 * time.Second):
		t.Fatalf("loading %s still blocked after 60s", path)
		return nil, nil
	}
}

// TestLoadNotRegular: a directory, a named pipe with no writer and a
// device are refused, promptly, each named for what it is; Check refuses
// them the same way.
func TestLoadNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "host.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, what string }{
		{dir, "a directory"},
		{fifo, "a named pipe (FIFO)"},
	}
	if fi, err := os.Stat("/dev/zero"); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cases = append(cases, struct{ path, what string }{"/dev/zero", "a character device"})
	} else {
		t.Log("no /dev/zero here: the device case is not run")
	}
	for _, tc := range cases {
		for name, load := range map[string]func(string) (*config.Config, error){"Load": config.Load, "Check": config.Check} {
			cfg, err := loadWithin(t, load, tc.path)
			if cfg != nil || !errors.Is(err, config.ErrNotRegular) {
				t.Errorf("%s(%s) = %v, %v; want ErrNotRegular", name, tc.path, cfg, err)
				continue
			}
			want := "read " + tc.path + ": is " + tc.what + ", not a regular file; give the path of a YAML config file"
			if err.Error() != want {
				t.Errorf("%s(%s): %q\nwant %q", name, tc.path, err, want)
			}
		}
	}
}

// TestLoadSize: a file of MaxFileSize bytes loads; one byte more is
// refused unread, naming its size and the bound.
func TestLoadSize(t *testing.T) {
	dir := t.TempDir()
	head := "servers: []\n#"
	at := filepath.Join(dir, "at.yaml")
	if err := os.WriteFile(at, []byte(head+strings.Repeat("x", config.MaxFileSize-len(head))), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := config.Load(at); err != nil || len(cfg.Servers) != 0 {
		t.Errorf("Load of a file of MaxFileSize bytes: %v, %v", cfg, err)
	}
	over := filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(over, []byte(head+strings.Repeat("x", config.MaxFileSize+1-len(head))), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(over)
	if cfg != nil || !errors.Is(err, config.ErrTooLarge) {
		t.Fatalf("Load of a file past MaxFileSize = %v, %v; want ErrTooLarge", cfg, err)
	}
	if want := "read " + over + ": is 1048577 bytes, larger than 1048576 (1 MiB), the most a config file may be"; err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
	if config.MaxFileSize != 1<<20 {
		t.Errorf("MaxFileSize = %d; docs/limits.md and docs/config.md say 1 MiB", config.MaxFileSize)
	}
}

// TestDurationOverflow: a duration written right but too long for
// time.Duration is named as overflowing, with the most there is; one
// written wrong is still "not a duration".
func TestDurationOverflow(t *testing.T) {
	const most = "2562047h47m16.854775807s"
	for _, tc := range []struct{ v, want string }{
		{"9999999999999h", `"9999999999999h" overflows a duration (at most ` + most + `, about 292 years)`},
		{"2562048h", `"2562048h" overflows a duration (at most ` + most + `, about 292 years)`},
		{"99999999999999999999ns", `"99999999999999999999ns" overflows a duration (at most ` + most + `, about 292 years)`},
		{"2562047h1h", `"2562047h1h" overflows a duration (at most ` + most + `, about 292 years)`},
		{"9999999999999x", `"9999999999999x" is not a duration (write it like 5s or 2m30s)`},
		{"9999999999999", `"9999999999999" is not a duration (write it like 5s or 2m30s)`},
		{"h", `"h" is not a duration (write it like 5s or 2m30s)`},
	} {
		_, err := one(t, "    requestTimeout: "+tc.v+"\n")
		var cerr *config.Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 {
			t.Errorf("%s: %v, want one problem", tc.v, err)
			continue
		}
		if p := cerr.Problems[0]; p.Line != 4 || p.Key != "servers[0].requestTimeout" || p.Msg != tc.want {
			t.Errorf("%s: %s\nwant message %s", tc.v, p, tc.want)
		}
	}
	// The largest there is still loads.
	if s, err := one(t, "    requestTimeout: "+most+"\n"); err != nil || s.RequestTimeout != time.Duration(1<<63-1) {
		t.Errorf("requestTimeout: %s: %v, %v", most, s.RequestTimeout, err)
	}
}

// TestURLPorts: a server URL's port is the scheme's default or an
// explicit one from 1 to 65535; an empty port after ":" (which Go would
// dial as :80) and a missing host are the file's problems, for Load (so
// run refuses them) as for Check.
func TestURLPorts(t *testing.T) {
	for _, u := range []string{"ws://127.0.0.1/mcpl", "wss://example.com/mcpl", "ws://127.0.0.1:9000/mcpl", "ws://[::1]:1/", "wss://h:65535", "http://127.0.0.1:3000/mcp", "https://example.com/mcp"} {
		cfg, err := parse(t, "servers:\n  - id: r\n    url: "+u+"\n", t.TempDir())
		if err != nil || cfg.Servers[0].URL != u {
			t.Errorf("url %s: %v", u, err)
		}
	}
	for _, tc := range []struct{ u, want string }{
		{"ws://127.0.0.1:/mcpl", `"ws://127.0.0.1:/mcpl" has an empty port after its ":"; write the port, like ws://127.0.0.1:9000/mcpl, or leave out the ":" for the scheme's default (80 for ws, 443 for wss)`},
		{"wss://[::1]:/mcpl?room=a", `"wss://[::1]:/mcpl" has an empty port after its ":"; write the port, like ws://127.0.0.1:9000/mcpl, or leave out the ":" for the scheme's default (80 for ws, 443 for wss)`},
		{"http://127.0.0.1:/mcp", `"http://127.0.0.1:/mcp" has an empty port after its ":"; write the port, like http://127.0.0.1:3000/mcp, or leave out the ":" for the scheme's default (80 for http, 443 for https)`},
		{"ftp://h/mcp", `"ftp://h/mcp" has scheme ftp; a server URL must be ws://, wss://, http:// or https://`},
		{"ws://h:0/", `"ws://h:0/" has port 0; a port is a number from 1 to 65535`},
		{"ws://h:65536/", `"ws://h:65536/" has port 65536; a port is a number from 1 to 65535`},
		{"ws://:9000/mcpl", `"ws://:9000/mcpl" has no host; write it like ws://host:port/path`},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, []byte("servers:\n  - id: r\n    url: "+tc.u+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, load := range map[string]func(string) (*config.Config, error){"Load": config.Load, "Check": config.Check} {
			_, err := load(path)
			var cerr *config.Error
			if !errors.As(err, &cerr) || len(cerr.Problems) != 1 {
				t.Errorf("%s of url %s: %v, want one problem", name, tc.u, err)
				continue
			}
			if p := cerr.Problems[0]; p.Line != 3 || p.Key != "servers[0].url" || p.Msg != tc.want {
				t.Errorf("%s of url %s: %s\nwant message %s", name, tc.u, p, tc.want)
			}
		}
	}
}

// writeConfig writes src as dir/host.yaml and returns its path.
func writeConfig(t *testing.T, dir, src string) string {
	t.Helper()
	path := filepath.Join(dir, "host.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// problems returns err's problems as FILE:LINE: KEY: message lines, with
// dir written DIR; nil for no error. Any other error fails the test.
func problems(t *testing.T, err error, dir string) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("%T %v, want *config.Error", err, err)
	}
	var out []string
	for _, p := range cerr.Problems {
		out = append(out, strings.ReplaceAll(p.String(), dir, "DIR"))
	}
	return out
}

// TestCheckPrograms: Check finds each command's program as the host will
// start it, and says what is wrong where it is not there to start, at the
// line of command's first item; Load, which run uses, looks at none.
func TestCheckPrograms(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{bin, filepath.Join(dir, "rel")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "rel", "relonly"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"server": 0o755, "plain": 0o644, "mytool": 0o755} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	// PATH: a relative entry (skipped, as the host skips it), then bin.
	t.Setenv("PATH", "rel"+string(filepath.ListSeparator)+bin)
	t.Chdir(dir)
	src := `servers:
  - {id: ok-relative, command: [./bin/server, --flag]}
  - {id: ok-absolute, command: [` + filepath.Join(bin, "server") + `]}
  - {id: ok-path, command: [mytool]}
  - {id: ok-env-path, command: [mytool], env: {PATH: ` + bin + `}}
  - {id: missing, command: [./no-such-server]}
  - {id: missing-abs, command: [/no/such/server]}
  - {id: missing-path, command: [no-such-tool-zz]}
  - {id: env-path, command: [mytool], env: {PATH: /nonexistent}}
  - {id: not-exec, command: [./bin/plain]}
  - id: a-dir
    command:
      - ./bin
  - {id: through-a-file, command: [./bin/server/x]}
  - {id: relative-path-entry, command: [relonly]}
`
	path := writeConfig(t, dir, src)
	if _, err := config.Load(path); err != nil {
		t.Fatalf("Load looked at the machine: %v", err)
	}
	_, err := config.Check(path)
	const notFound = `is not found in this host's PATH, which the server gets; install it, or write its path, like /usr/local/bin/`
	want := []string{
		`DIR/host.yaml:6: servers[4].command[0]: "./no-such-server" does not exist: there is no file DIR/no-such-server (a relative path in command is relative to this file's directory); fix the path, or build or install the program there`,
		`DIR/host.yaml:7: servers[5].command[0]: "/no/such/server" does not exist: there is no file /no/such/server; fix the path, or build or install the program there`,
		`DIR/host.yaml:8: servers[6].command[0]: "no-such-tool-zz" ` + notFound + `no-such-tool-zz or ./no-such-tool-zz (relative to this file's directory)`,
		`DIR/host.yaml:9: servers[7].command[0]: "mytool" is not found in the PATH that env: gives the server; install it, or write its path, like /usr/local/bin/mytool or ./mytool (relative to this file's directory)`,
		`DIR/host.yaml:10: servers[8].command[0]: "./bin/plain" (DIR/bin/plain) is not executable by this user; make it so (chmod +x), or run it through its interpreter, like [sh, ./bin/plain]`,
		`DIR/host.yaml:13: servers[9].command[0]: "./bin" is a directory (DIR/bin), not a program; name the program in it`,
		`DIR/host.yaml:14: servers[10].command[0]: "./bin/server/x" does not exist: there is no file DIR/bin/server/x (a relative path in command is relative to this file's directory); fix the path, or build or install the program there`,
		`DIR/host.yaml:15: servers[11].command[0]: "relonly" ` + notFound + `relonly or ./relonly (relative to this file's directory)`,
	}
	got := problems(t, err, dir)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Check:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(strings.Join(got, "\n"), "/nonexistent") {
		t.Errorf("a problem quotes the PATH env: sets")
	}
}

// TestCheckStore: Check says where the store can't be, at the store key's
// line (line 0, and saying so, for the default); a store whose directory
// is missing is fine when it can be created; nothing is created.
func TestCheckStore(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"adir", "data"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.db"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ store, want string }{
		{"", ""}, // the default, ./data/host.db: data exists
		{"store: ./old.db\n", ""},
		{"store: ./new/deeper/host.db\n", ""},
		{"store: ./adir\n", "DIR/host.yaml:1: store: DIR/adir is a directory; store names the database file, like DIR/adir/host.db"},
		{"store: ./fifo.db\n", "DIR/host.yaml:1: store: DIR/fifo.db is not a regular file; store names the SQLite database file the host keeps its state in"},
		{"store: ./afile/host.db\n", "DIR/host.yaml:1: store: DIR/afile, the store's directory, is not a directory"},
		{"store: ./afile/sub/host.db\n", "DIR/host.yaml:1: store: DIR/afile is not a directory, so the store's directory (DIR/afile/sub) can't be created in it"},
		{"store: \"\"\n", "DIR/host.yaml:1: store: is empty; give a file path, or leave the key out for ./data/host.db"},
	} {
		path := writeConfig(t, dir, tc.store+"servers: []\n")
		if _, err := config.Load(path); err != nil && tc.want == "" {
			t.Errorf("Load of %q: %v", tc.store, err)
		}
		_, err := config.Check(path)
		if got := strings.Join(problems(t, err, dir), "\n"); got != tc.want {
			t.Errorf("Check of %q:\n%s\nwant:\n%s", tc.store, got, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check created the store's directory: %v", err)
	}

	// The default store, in a directory where it can't go.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := config.Check(writeConfig(t, other, "servers: []\n"))
	want := "DIR/host.yaml: store: DIR/data, the store's directory, is not a directory (this is the default store, ./data/host.db; set store: to put it elsewhere)"
	if got := strings.Join(problems(t, err, other), "\n"); got != want {
		t.Errorf("Check with the default store in the way:\n%s\nwant:\n%s", got, want)
	}

	// Writability: root may write anywhere, so this needs another user.
	if os.Geteuid() == 0 {
		t.Log("running as root, who may write in any directory: the unwritable-directory case is not run")
		return
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	_, err = config.Check(writeConfig(t, dir, "store: ./ro/sub/host.db\nservers: []\n"))
	want = "DIR/host.yaml:1: store: DIR/ro is not writable by this user, so the store's directory (DIR/ro/sub) can't be created in it"
	if got := strings.Join(problems(t, err, dir), "\n"); got != want {
		t.Errorf("Check with an unwritable directory:\n%s\nwant:\n%s", got, want)
	}
}
