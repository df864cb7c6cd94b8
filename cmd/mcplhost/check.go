package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mcpl-go/mcpl/config"
)

const checkUsage = `usage: mcplhost check --config FILE

Reads a host configuration file and reports every problem in it, one a line,
in file order, as FILE:LINE: KEY: what is wrong. It starts no server, dials
nothing and reads no token. docs/config.md describes every key.

flags:
  --config FILE   the configuration file to check

Exit status: 0 when the file is valid, 1 when it is not (or cannot be read),
2 for usage errors.
`

// runCheck implements `mcplhost check`.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, checkUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "mcplhost check: %v\n\n%s", err, checkUsage)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "mcplhost check: unexpected argument %q: give the file with --config FILE\n\n%s", fs.Arg(0), checkUsage)
		return exitUsage
	case *path == "":
		fmt.Fprintf(stderr, "mcplhost check: give the file with --config FILE\n\n%s", checkUsage)
		return exitUsage
	}
	cfg, err := config.Load(*path)
	var cerr *config.Error
	switch {
	case errors.As(err, &cerr):
		for _, p := range cerr.Problems {
			fmt.Fprintln(stderr, p)
		}
		fmt.Fprintf(stderr, "config %s: %s\n", *path, checkCount(len(cerr.Problems), "problem"))
		return exitFail
	case err != nil:
		fmt.Fprintf(stderr, "mcplhost check: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "config %s: ok (%s)\n", *path, checkCount(len(cfg.Servers), "server"))
	return exitOK
}

// checkCount says "1 server" or "2 servers".
func checkCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
