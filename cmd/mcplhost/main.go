// Command mcplhost is the mcpl-go host's command line.
//
//	mcplhost probe [flags] -- COMMAND ARGS...   connect to one server and report on it
//	mcplhost probe [flags] --url ws://HOST:PORT/PATH
//	mcplhost check --config FILE                  validate a configuration file
//	mcplhost call --config FILE [--wait D] TOOL JSON   call a tool through a host
//
// Exit status: 0 for success, 1 for a failure the command reports, 2 for a
// usage error.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: mcplhost <command> [flags]

commands:
  probe    connect to one MCPL or MCP server, report what it offers, call its tools
  check    validate a configuration file (--config FILE)
  call     start a host from a configuration file and call one tool

Run 'mcplhost <command> -h' for a command's flags.
`

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printer{stderr}.text(usage)
		return exitUsage
	}
	switch args[0] {
	case "probe":
		return runProbe(args[1:], stdout, stderr)
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "call":
		return runCall(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		printer{stdout}.text(usage)
		return exitOK
	}
	printer{stderr}.linef("mcplhost: unknown command %q", args[0])
	printer{stderr}.text(usage)
	return exitUsage
}
