package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/host"
)

const checkUsage = `usage: mcplhost check --config FILE

Reads a host configuration file and reports every problem in it, one a line,
in file order, as FILE:LINE: KEY: what is wrong. Besides the file itself it
checks what the file names on this machine: that each command's program
exists and is executable, and that the store can be created or opened. It
starts no server, dials nothing, writes nothing and reads no token.
docs/config.md describes every key.

flags:
  --config FILE   the configuration file to check

For a valid file it prints, for each agent, what wakes it: the debounce and
the treatment rules, the agent's own and then the host's defaults, in the
order they are tried.

Exit status: 0 when the file is valid, 2 when it is not (or cannot be
read), as for run and call, whose configuration error it is, and 2 for
usage errors.
`

// runCheck implements `mcplhost check`.
func runCheck(args []string, stdout, stderr io.Writer) int {
	var path string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			printer{stderr}.usageError(checkUsage, "mcplhost check: unexpected argument %q: give the file with --config FILE", a)
			return exitUsage
		}
		f := splitFlag(args, &i)
		switch f.name {
		case "config":
			v, ok := f.value()
			if !ok {
				printer{stderr}.usageError(checkUsage, "mcplhost check: --config needs a file")
				return exitUsage
			}
			path = v
		case "h", "help":
			printer{stdout}.text(checkUsage)
			return exitOK
		default:
			printer{stderr}.usageError(checkUsage, "mcplhost check: unknown flag %s", a)
			return exitUsage
		}
	}
	if path == "" {
		printer{stderr}.usageError(checkUsage, "mcplhost check: give the file with --config FILE")
		return exitUsage
	}
	cfg, err := config.Check(path)
	var cerr *config.Error
	switch {
	case errors.As(err, &cerr):
		for _, p := range cerr.Problems {
			printer{stderr}.linef("%s", p)
		}
		printer{stderr}.linef("config %s: %s", path, checkCount(len(cerr.Problems), "problem"))
		return exitUsage // a configuration error, as run and call exit for it
	case err != nil:
		printer{stderr}.linef("mcplhost check: %v", err)
		return exitUsage
	}
	printer{stdout}.linef("config %s: ok (%s)", path, checkCount(len(cfg.Servers), "server"))
	for _, a := range cfg.Agents {
		// What wakes each agent, defaults included (docs/agents.md).
		printer{stdout}.linef("agent %s wakes by these rules, first match wins:", a.Name)
		for _, l := range host.WakeLines(a.Wake) {
			printer{stdout}.linef("  %s", l)
		}
	}
	return exitOK
}

// checkCount says "1 server" or "2 servers".
func checkCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
