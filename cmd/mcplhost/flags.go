package main

import (
	"fmt"
	"strings"
)

// flagArg is one "--name" or "--name=value" argument (one dash or two).
type flagArg struct {
	name   string
	val    string
	hasVal bool
	args   []string
	i      *int
}

// splitFlag reads args[*i] as a flag.
func splitFlag(args []string, i *int) flagArg {
	name, val, hasVal := strings.Cut(strings.TrimLeft(args[*i], "-"), "=")
	return flagArg{name: name, val: val, hasVal: hasVal, args: args, i: i}
}

// value is the flag's value: the part after "=", else the next argument,
// which it consumes (ok is false when there is none).
func (f flagArg) value() (v string, ok bool) {
	if f.hasVal {
		return f.val, true
	}
	if *f.i+1 < len(f.args) {
		*f.i++
		return f.args[*f.i], true
	}
	return "", false
}

// on reads a boolean flag: on when written alone, else as "=true" or
// "=false" say; another value is a usage error naming the flag.
func (f flagArg) on() (bool, error) {
	switch {
	case !f.hasVal || f.val == "true":
		return true, nil
	case f.val == "false":
		return false, nil
	}
	return false, fmt.Errorf("--%s=%q: a switch is written alone, or =true or =false", f.name, f.val)
}
