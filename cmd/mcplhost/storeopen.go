package main

import (
	"errors"
	"io"

	"github.com/mcpl-go/mcpl/store/sqlite"
)

// openStore opens the store at path for a command that runs a host (run,
// call): the one writer of it (see store/sqlite, "One writer"). A store
// another host holds, or a damaged one, is said to stderr with what to do
// (docs/run.md, "One host per store"); ok is false when it was not
// opened, and the command exits 1.
func openStore(command, path string, stderr io.Writer) (*sqlite.DB, bool) {
	st, err := sqlite.Open(path, nil)
	if err == nil {
		return st, true
	}
	p := printer{stderr}
	var (
		iu *sqlite.InUseError
		ce *sqlite.CorruptError
	)
	switch {
	case errors.As(err, &iu):
		p.linef("mcplhost %s: the store %s is in use by another host (%s); %s", command, iu.Path, iu.Holder(), inUseAdvice(command))
	case errors.As(err, &ce):
		p.linef("mcplhost %s: the store %s is damaged, and was not opened (%s): %s", command, ce.Path, nothingDone(command), ce.Found())
		p.linef("mcplhost %s: restore %s from a backup, or move it aside (with its -wal and -shm files, if there are any) to start afresh with a new store there; a new store has none of what this one kept: the channel decisions (each channel is decided anew), the inbox (the messages the servers sent, and how far each agent had read) and the agents' histories", command, ce.Path)
	default:
		p.linef("mcplhost %s: %v", command, err)
	}
	return nil, false
}

func inUseAdvice(command string) string {
	if command == "call" {
		return "nothing was called: a call runs its own copy of the config's servers, which would answer their messages a second time beside that host's. Stop that host first, or give the call a config whose store is its own"
	}
	return "nothing was started. Stop that host first, or give this one a store of its own (store: in its config)"
}

func nothingDone(command string) string {
	if command == "call" {
		return "nothing was called"
	}
	return "nothing was started"
}
