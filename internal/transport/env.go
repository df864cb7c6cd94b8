package transport

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// baseEnvNames are the variables a server process gets from this process's
// environment when it does not inherit the whole of it. LC_* is matched by
// prefix.
var baseEnvNames = []string{"PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "SHELL"}

// buildEnv returns the environment for a server process: this process's
// whole environment when inherit is set, otherwise only the base variables;
// then the configured variables (KEY=VALUE), which win over either.
func buildEnv(parent, extra []string, inherit bool) []string {
	var env []string
	seen := make(map[string]bool)
	for _, kv := range parent {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || seen[name] {
			// Malformed, or shadowed: getenv sees the first of duplicates.
			continue
		}
		if inherit || isBaseEnv(name) {
			seen[name] = true
			env = append(env, kv)
		}
	}
	// Later entries win in os/exec (it keeps the last of duplicates), but
	// remove shadowed ones so the child sees each name once.
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		env = dropEnv(env, name)
		env = append(env, kv)
	}
	return env
}

func isBaseEnv(name string) bool {
	if strings.HasPrefix(name, "LC_") {
		return true
	}
	for _, n := range baseEnvNames {
		if name == n {
			return true
		}
	}
	return false
}

func dropEnv(env []string, name string) []string {
	out := env[:0]
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); n != name {
			out = append(out, kv)
		}
	}
	return out
}

// parentEnv is the environment a spawn starts from; a variable so tests can
// see what buildEnv is given.
var parentEnv = os.Environ

// lookPathIn resolves a program name the way exec.LookPath does, but in the
// PATH of env, the environment the program will run with, rather than this
// process's: a configured PATH is where its command is expected to be found.
// A name with a slash is returned as it is. Relative PATH entries are
// skipped, as exec.LookPath refuses what they find.
func lookPathIn(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path, ok := "", false
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, "PATH="); found {
			path, ok = v, true
		}
	}
	if ok && path == os.Getenv("PATH") {
		// This process's own PATH: leave it to os/exec as usual.
		return file, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}
