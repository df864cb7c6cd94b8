package main

import "strings"

// splitFlag reads args[*i], a "--name" or "--name=value" flag, as its name
// and a func that returns its value: the part after "=", else the next
// argument, which it consumes (ok is false when there is none).
func splitFlag(args []string, i *int) (name string, value func() (string, bool)) {
	name, val, hasVal := strings.Cut(strings.TrimLeft(args[*i], "-"), "=")
	return name, func() (string, bool) {
		if hasVal {
			return val, true
		}
		if *i+1 < len(args) {
			*i++
			return args[*i], true
		}
		return "", false
	}
}
