package main

import (
	"io"

	"github.com/mcpl-go/mcpl/internal/buildinfo"
)

const versionUsage = `usage: mcplhost version [--json]

Prints which build of mcplhost this is, on one line: the module version
("(devel)" for a build from a checkout), then the VCS revision and commit
time it was built from (and "modified" when the tree had changes), then
the Go version. --json prints the same as one JSON object with the keys
version, revision, time, modified and goVersion (those the build doesn't
know are left out, goVersion and version aside). mcplhost --version and
-version are the same as mcplhost version.

Exit status: 0; 1 when the output could not be written; 2 for usage errors.
`

// runVersion implements `mcplhost version` (and --version).
func runVersion(args []string, stdout, stderr io.Writer) int {
	asJSON := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			printer{stderr}.usageError(versionUsage, "mcplhost version: unexpected argument %q", a)
			return exitUsage
		}
		f := splitFlag(args, &i)
		switch f.name {
		case "json":
			on, err := f.on()
			if err != nil {
				printer{stderr}.usageError(versionUsage, "mcplhost version: %v", err)
				return exitUsage
			}
			asJSON = on
		case "h", "help":
			printer{stdout}.text(versionUsage)
			return exitOK
		default:
			printer{stderr}.usageError(versionUsage, "mcplhost version: unknown flag %s", a)
			return exitUsage
		}
	}
	in := buildinfo.Get()
	if asJSON {
		if err := (printer{stdout}).json(in); err != nil {
			printer{stderr}.linef("mcplhost version: %v", err)
			return exitFail
		}
		return exitOK
	}
	printer{stdout}.linef("mcplhost %s", in)
	return exitOK
}

// commandUsage prints command's usage text on w, for `mcplhost help
// CMD`: the same text as `mcplhost CMD -h` prints. ok is false when
// command is not one.
func commandUsage(w io.Writer, command string) (ok bool) {
	p := printer{w}
	switch command {
	case "probe":
		p.text(probeUsage)
	case "check":
		p.text(checkUsage)
	case "demo":
		p.text(demoUsage)
	case "run":
		p.text(runUsage)
	case "call":
		p.text(callUsage)
	case "channels":
		p.text(channelsUsage)
	case "transcript":
		p.text(transcriptUsage)
	case "version":
		p.text(versionUsage)
	case "help":
		p.text(helpUsage)
	default:
		return false
	}
	return true
}

const helpUsage = `usage: mcplhost help [COMMAND]

Prints mcplhost's usage, or with a command's name that command's usage,
the same text as 'mcplhost COMMAND -h'. Exit status: 0, or 2 for a name
that is not a command.
`

// runHelp implements `mcplhost help [CMD]`.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		printer{stdout}.text(usage)
		return exitOK
	case len(args) > 1:
		printer{stderr}.usageError(helpUsage, "mcplhost help: give one command's name, not %d words", len(args))
		return exitUsage
	}
	if commandUsage(stdout, args[0]) {
		return exitOK
	}
	if args[0] == "-h" || args[0] == "--help" {
		printer{stdout}.text(helpUsage)
		return exitOK
	}
	printer{stderr}.linef("mcplhost help: unknown command %q", args[0])
	printer{stderr}.text(usage)
	return exitUsage
}
