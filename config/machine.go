package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The checks Check adds to Load: what the file names on this machine.
// They look and never change anything: no file is created, run or opened
// for writing.

// access(2) modes.
const (
	accessX = 1
	accessW = 2
)

// programProblem says why the program argv0 of a command server whose
// directory is dir and whose added environment is env can't be started as
// the host starts it (internal/transport's Spawn), or "". A name with a
// "/" is a path, relative to dir when not absolute (os/exec evaluates a
// relative path against the process's directory, and the host runs the
// server in dir). A bare name is looked for in the server's PATH: env's
// PATH when env sets one, else this host's, whose relative entries
// (".", "bin") are skipped, as the host skips them. A program is found
// when it is a regular file with an execute bit this user may use. No
// message quotes a PATH: env's values are never quoted.
func programProblem(argv0, dir string, env map[string]string) string {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			where := ""
			if !filepath.IsAbs(argv0) {
				where = " (a relative path in command is relative to this file's directory)"
			}
			return fmt.Sprintf("%q does not exist: there is no file %s%s; fix the path, or build or install the program there", argv0, p, where)
		case err != nil:
			return fmt.Sprintf("%q can't be looked at (%v); the host could not start it either", argv0, errors.Unwrap(err))
		case fi.IsDir():
			return fmt.Sprintf("%q is a directory (%s), not a program; name the program in it", argv0, p)
		case !fi.Mode().IsRegular():
			return fmt.Sprintf("%q (%s) is not a regular file, so not a program the host can start", argv0, p)
		case fi.Mode()&0o111 == 0 || syscall.Access(p, accessX) != nil:
			return fmt.Sprintf("%q (%s) is not executable by this user; make it so (chmod +x), or run it through its interpreter, like [sh, %s]", argv0, p, argv0)
		}
		return ""
	}
	pathVar, own := env["PATH"]
	if !own {
		pathVar = os.Getenv("PATH")
	}
	for _, d := range filepath.SplitList(pathVar) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, argv0)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 && syscall.Access(p, accessX) == nil {
			return ""
		}
	}
	whose := "this host's PATH, which the server gets"
	if own {
		whose = "the PATH that env: gives the server"
	}
	return fmt.Sprintf("%q is not found in %s; install it, or write its path, like /usr/local/bin/%s or ./%s (relative to this file's directory)", argv0, whose, argv0, argv0)
}

// storeMachineProblem says why the store at the absolute path store can't
// be opened as the host opens it (store/sqlite: the directories it goes in
// are created, then the file, and SQLite writes files beside it), or "".
// dflt is true when the file gives no store: key, so the path is the
// default's.
func storeMachineProblem(store string, dflt bool) string {
	msg := storeOnMachine(store)
	if msg != "" && dflt {
		msg += fmt.Sprintf(" (this is the default store, %s; set store: to put it elsewhere)", DefaultStore)
	}
	return msg
}

func storeOnMachine(store string) string {
	fi, err := os.Stat(store)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Sprintf("%s is a directory; store names the database file, like %s", store, filepath.Join(store, "host.db"))
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Sprintf("%s is not a regular file; store names the SQLite database file the host keeps its state in", store)
	case err == nil && syscall.Access(store, accessW) != nil:
		return fmt.Sprintf("%s is not writable by this user; the host writes its state there", store)
	case err == nil:
		return dirProblem(filepath.Dir(store), false)
	case errors.Is(err, fs.ErrNotExist):
		return dirProblem(filepath.Dir(store), true)
	case errors.Is(err, syscall.ENOTDIR):
		return dirProblem(filepath.Dir(store), true)
	}
	return fmt.Sprintf("%s can't be looked at (%v)", store, errors.Unwrap(err))
}

// dirProblem says why the store's directory dir can't take the store, or
// "": it must be a directory this user may write in, or be missing with
// its nearest existing ancestor such a directory (the host creates what
// is missing). create says the store file does not exist yet.
func dirProblem(dir string, create bool) string {
	what := "the store's directory"
	for d := dir; ; {
		fi, err := os.Stat(d)
		switch {
		case err == nil && !fi.IsDir():
			if d == dir {
				return fmt.Sprintf("%s, %s, is not a directory", d, what)
			}
			return fmt.Sprintf("%s is not a directory, so %s (%s) can't be created in it", d, what, dir)
		case err == nil && syscall.Access(d, accessW|accessX) != nil:
			if d == dir {
				if create {
					return fmt.Sprintf("%s, %s, is not writable by this user, so the store can't be created there", d, what)
				}
				return fmt.Sprintf("%s, %s, is not writable by this user; SQLite writes its journal beside the store", d, what)
			}
			return fmt.Sprintf("%s is not writable by this user, so %s (%s) can't be created in it", d, what, dir)
		case err == nil:
			return ""
		case errors.Is(err, fs.ErrNotExist):
			parent := filepath.Dir(d)
			if parent == d {
				return fmt.Sprintf("%s can't be created: no part of its path exists", dir)
			}
			d = parent
		case errors.Is(err, syscall.ENOTDIR):
			d = filepath.Dir(d) // the file in the way is found further up
		default:
			return fmt.Sprintf("%s can't be looked at (%v)", d, errors.Unwrap(err))
		}
	}
}

// checkProgram records why server s's program can't be started, at line
// of its command's first item, whose key path is key.
func (d *decoder) checkProgram(s Server, line int, key string) {
	if msg := programProblem(s.Argv[0], s.Dir, s.Env); msg != "" {
		d.add(line, key, "%s", msg)
	}
}

// checkStore records why the store can't be opened, at line of the store
// key (0 when the file gives none and store is the default).
func (d *decoder) checkStore(store string, line int) {
	if store == "" {
		return
	}
	if msg := storeMachineProblem(store, line == 0); msg != "" {
		d.add(line, "store", "%s", msg)
	}
}
