// Command mcplhost is the mcpl-go host's command line.
//
//	mcplhost probe [flags] -- COMMAND ARGS...   connect to one server and report on it
//	mcplhost probe [flags] --url ws://HOST:PORT/PATH
//	mcplhost probe [flags] --url http://HOST:PORT/PATH   (Streamable HTTP)
//	mcplhost check --config FILE                  validate a configuration file
//	mcplhost demo                                 an agent in a simulated chat room, as it happens
//	mcplhost run --config FILE [--transcript FILE]   run the agents and servers until a signal
//	mcplhost call --config FILE [--wait D] TOOL JSON   call a tool through a host
//	mcplhost channels --store FILE [--json] [--history | --messages]   read channel decisions
//	mcplhost transcript [--agent NAME] FILE       print a transcript for a person
//	mcplhost version [--json]                     print which build this is
//	mcplhost help [COMMAND]                       print the usage, or a command's
//
// Exit status, the same for every command (docs/cli.md's table): 0 for
// success, 1 when the job itself failed (a probe's --call, a damaged
// transcript, a host that could not start or stopped with an error), 2
// for usage or configuration errors (a bad flag, a config file that does
// not load). run stopped by a signal exits 128+N.
package main

import (
	"context"
	"io"
	"os"
)

func main() {
	os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
}

// mainCode runs mcplhost as a process: the command, inside the stopper
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT and a closed stdout stop it in order;
// a second signal at once). It returns the exit status.
func mainCode(args []string, stdout, stderr io.Writer) int {
	s := newStopper()
	defer s.stop()
	es := &stderrSink{Writer: stderr}
	code := run(s.ctx, args, s.guard(stdout), es)
	if c := s.stopped(); c != nil {
		sayStop(es, c.why)
		return c.code
	}
	return code
}

const usage = `usage: mcplhost <command> [flags]

commands:
  probe    connect to one MCPL or MCP server, report what it offers, call its tools
  check    validate a configuration file (--config FILE)
  demo     an agent in a simulated chat room, as it happens (offline unless a model key is set)
  run      run the host from a configuration file: its agents and servers, until a signal
  call     start a host from a configuration file and call one tool
  channels print the channel decisions (or --history, --messages) in a store file
  transcript print a transcript (run --transcript's JSON lines) for a person
  version  print which build this is (--json for JSON)
  help     print this, or with a command's name that command's usage

Run 'mcplhost <command> -h' or 'mcplhost help <command>' for a command's flags.
Exit status: 0 ok, 1 the job failed, 2 usage or configuration error.
`

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// run runs the command args name. ctx ending stops it: what is pending
// fails, its servers close, and it returns.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printer{stderr}.text(usage)
		return exitUsage
	}
	switch args[0] {
	case "probe":
		return runProbe(ctx, args[1:], stdout, stderr)
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "run":
		return runRun(ctx, args[1:], stdout, stderr)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "call":
		return runCall(ctx, args[1:], stdout, stderr)
	case "channels":
		return runChannels(ctx, args[1:], stdout, stderr)
	case "transcript":
		return runTranscript(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "help":
		return runHelp(args[1:], stdout, stderr)
	case "-h", "--help":
		printer{stdout}.text(usage)
		return exitOK
	}
	printer{stderr}.linef("mcplhost: unknown command %q", args[0])
	printer{stderr}.text(usage)
	return exitUsage
}
