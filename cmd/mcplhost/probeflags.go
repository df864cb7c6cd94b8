package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpl-go/mcpl/protocol"
)

// probeFlags is what `mcplhost probe` was asked to do.
type probeFlags struct {
	id         string
	timeout    time.Duration
	json       bool
	calls      []probeCall
	url        string
	tokenEnv   string
	tokenParam string
	inheritEnv bool
	verbose    bool
	wait       time.Duration
	enable     []string
	disable    []string
	command    []string
	help       bool
}

type probeCall struct {
	tool string
	args json.RawMessage
}

const probeUsage = `usage: mcplhost probe [flags] -- COMMAND ARGS...
       mcplhost probe [flags] --url ws://HOST:PORT/PATH
       mcplhost probe [flags] --url http://HOST:PORT/PATH

Connects to one server (a subprocess over stdio, a WebSocket URL, or an http://
or https:// URL speaking MCP's Streamable HTTP), runs the
MCP handshake and the MCPL policy exchange, lists its tools and channels, makes
each --call, and prints a report: the server, its MCPL advertisement, the policy
outcome, the effective and denied capabilities, each feature set's state, and,
at the end, a warning for each thing the server did that SPEC does not allow
(such as channels/incoming sent as a notification), saying what to do.

flags:
  --id NAME           the server's name in the report (default: the command's name,
                      or the program a runner such as "go run" or "node" runs; the
                      URL's host)
  --timeout D         bounds every wait: each request (default 60s; 0 for none),
                      initialize (at most 30s) and the policy exchange (at most
                      15s); channels/list is asked for at most 3s
  --json              print the report as one JSON object
  --call TOOL JSON    call TOOL with JSON arguments (repeatable, in order)
  --url URL           connect to URL instead of running a command: ws:// or wss://
                      over WebSocket, http:// or https:// over Streamable HTTP
  --token-env NAME    send the bearer token held in environment variable NAME (with --url)
  --token-param NAME  send that token in the ws:// or wss:// URL's query parameter NAME
                      instead of the Authorization header
  --inherit-env       give the command this process's whole environment
  --wait D            after the calls, keep listening for D, printing each privileged
                      message the server sends (request or notification, admitted or
                      rejected, and why)
  --enable PATH       host policy: grant only capability paths matching these patterns
                      (repeatable; without it, everything advertised and implemented
                      except context injection)
  --disable PATH      host policy: never grant paths matching PATH or beneath it (repeatable)
  -v, --verbose       log operator detail (debug level) to stderr

Exit status: 0 when the report is complete and every --call succeeded, 1
when the handshake failed, the server exited or closed the connection
before the report was complete, or a --call failed (an error, an isError
result, or not made because host policy denies tools), with --json or
without; 2 for usage errors.
`

// parseProbeFlags reads probe's arguments. --call takes two values, which
// the standard flag package cannot express, so flags are read here by hand;
// each may be written with one dash or two, and with "=value".
func parseProbeFlags(args []string) (probeFlags, error) {
	f := probeFlags{timeout: 60 * time.Second}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			f.command = args[i+1:]
			break
		}
		if !strings.HasPrefix(a, "-") {
			return f, fmt.Errorf("unexpected argument %q: put the server's command after --", a)
		}
		fa := splitFlag(args, &i)
		name := fa.name
		next := func() (string, error) {
			if v, ok := fa.value(); ok {
				return v, nil
			}
			return "", fmt.Errorf("flag --%s needs a value", name)
		}
		var err error
		switch name {
		case "id":
			f.id, err = next()
			if err == nil && f.id == "" {
				err = errors.New("--id must not be empty")
			}
		case "timeout":
			var s string
			if s, err = next(); err == nil {
				f.timeout, err = time.ParseDuration(s)
				if err == nil && f.timeout < 0 {
					err = errors.New("--timeout must not be negative")
				}
				if err != nil {
					err = fmt.Errorf("--timeout %q: %v", s, err)
				}
			}
		case "wait":
			var s string
			if s, err = next(); err == nil {
				f.wait, err = time.ParseDuration(s)
				if err == nil && f.wait < 0 {
					err = errors.New("--wait must not be negative")
				}
				if err != nil {
					err = fmt.Errorf("--wait %q: %v", s, err)
				}
			}
		case "enable":
			var s string
			if s, err = next(); err == nil {
				f.enable = append(f.enable, s)
			}
		case "disable":
			var s string
			if s, err = next(); err == nil {
				f.disable = append(f.disable, s)
			}
		case "json":
			f.json, err = fa.on()
		case "url":
			f.url, err = next()
		case "token-env":
			f.tokenEnv, err = next()
		case "token-param":
			f.tokenParam, err = next()
			if err == nil && f.tokenParam == "" {
				err = errors.New("--token-param must not be empty")
			}
		case "inherit-env":
			f.inheritEnv, err = fa.on()
		case "v", "verbose":
			f.verbose, err = fa.on()
		case "h", "help":
			f.help = true
		case "call":
			if fa.hasVal {
				return f, errors.New("--call takes two arguments: --call TOOL JSON")
			}
			if i+2 >= len(args) {
				return f, errors.New("--call takes two arguments: --call TOOL JSON")
			}
			c := probeCall{tool: args[i+1], args: json.RawMessage(args[i+2])}
			i += 2
			if !json.Valid(c.args) {
				return f, fmt.Errorf("--call %s: the arguments are not valid JSON: %s", c.tool, c.args)
			}
			var kind string
			if c.args, kind = protocol.ToolArguments(c.args); kind != "" {
				return f, fmt.Errorf("--call %s: the arguments are %s, not a JSON object: %s", c.tool, kind, args[i])
			}
			f.calls = append(f.calls, c)
		default:
			return f, fmt.Errorf("unknown flag %s", a)
		}
		if err != nil {
			return f, err
		}
	}
	if f.help {
		return f, nil
	}
	switch {
	case f.url == "" && len(f.command) == 0:
		return f, errors.New("give the server's command after --, or --url")
	case f.url != "" && len(f.command) > 0:
		return f, errors.New("give either a command after -- or --url, not both")
	case f.tokenEnv != "" && f.url == "":
		return f, errors.New("--token-env applies only with --url")
	case f.tokenParam != "" && f.tokenEnv == "":
		return f, errors.New("--token-param applies only with --token-env: it names the URL parameter that carries that token")
	case f.tokenParam != "" && !strings.HasPrefix(f.url, "ws://") && !strings.HasPrefix(f.url, "wss://"):
		return f, errors.New("--token-param applies only with a ws:// or wss:// --url; a Streamable HTTP server gets the token in the Authorization header")
	}
	if f.id == "" {
		f.id = defaultID(f.url, f.command)
	}
	return f, nil
}

// runners are programs that run another named by their first argument
// that is not a flag (after "run", for those that take it): the server's
// name is that program's, not the runner's.
var runners = map[string]bool{
	"go": true, "node": true, "python": true, "python3": true, "uv": true, "uvx": true,
	"npx": true, "deno": true, "bun": true, "ruby": true, "java": true, "bash": true, "sh": true,
}

// defaultID names the server when --id is not given: the URL's host, or
// the command's base name (for a runner, the program it runs), without an
// extension.
func defaultID(rawURL string, argv []string) string {
	if rawURL != "" {
		if u, err := url.Parse(rawURL); err == nil && u.Hostname() != "" {
			return u.Hostname()
		}
		return "server"
	}
	name := filepath.Base(argv[0])
	if runners[name] {
	args:
		for _, a := range argv[1:] {
			switch {
			case a == "-c" || a == "-e" || a == "--eval":
				break args // an inline script names no program: the runner's name stands
			case a == "run" || strings.HasPrefix(a, "-"):
				continue
			}
			name = filepath.Base(strings.TrimRight(a, "/"))
			break
		}
	}
	if ext := filepath.Ext(name); ext != "" && ext != name {
		name = strings.TrimSuffix(name, ext)
	}
	if name == "" || name == "." || name == "/" {
		return "server"
	}
	return name
}
