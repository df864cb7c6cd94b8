package main

import (
	"strings"
	"testing"
)

// A switch reads =true and =false as they say, and refuses anything else;
// a value flag takes "=value" or the next argument.
func TestFlagArg(t *testing.T) {
	for in, want := range map[string]bool{"--json": true, "-json": true, "--json=true": true, "--json=false": false} {
		i := 0
		got, err := splitFlag([]string{in}, &i).on()
		if err != nil || got != want {
			t.Errorf("%s: on = %v, %v; want %v", in, got, err, want)
		}
	}
	i := 0
	if _, err := splitFlag([]string{"--json=yes"}, &i).on(); err == nil || !strings.Contains(err.Error(), `--json="yes": a switch is written alone, or =true or =false`) {
		t.Errorf("--json=yes: %v", err)
	}
	args := []string{"--store", "a.db", "--store=b.db", "--store"}
	i = 0
	if v, ok := splitFlag(args, &i).value(); !ok || v != "a.db" || i != 1 {
		t.Errorf("--store a.db: %q %v, at %d", v, ok, i)
	}
	i = 2
	if v, ok := splitFlag(args, &i).value(); !ok || v != "b.db" || i != 2 {
		t.Errorf("--store=b.db: %q %v, at %d", v, ok, i)
	}
	i = 3
	if _, ok := splitFlag(args, &i).value(); ok {
		t.Error("--store with nothing after it has a value")
	}
}

// Through the commands: =false turns a switch off, and a bad value is a
// usage error.
func TestSwitchValues(t *testing.T) {
	code, stdout, stderr := runCLI("channels", "--store", "none.db", "--json=maybe")
	if code != exitUsage || !strings.Contains(stderr, `mcplhost channels: --json="maybe": a switch is written alone, or =true or =false`) {
		t.Errorf("--json=maybe: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"run", "-v=sometimes", "--config", "x.yaml"},
		{"call", "--verbose=2", "--config", "x.yaml", "t", "{}"},
		{"demo", "--scripted=no"},
		{"probe", "--json=1", "--", "true"},
	} {
		if code, _, stderr := runCLI(args...); code != exitUsage || !strings.Contains(stderr, "a switch is written alone, or =true or =false") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}
