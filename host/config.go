package host

import (
	"slices"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
)

// The host's mapping of a server's configuration (data, package config)
// onto the machinery that runs it.

// grantPolicy is the server's host policy for the capability grant,
// keeping nil (no constraint) apart from empty (allow nothing).
func grantPolicy(s config.Server) grant.Policy {
	return grant.Policy{
		Enable:             slices.Clone(s.Capabilities.Enable),
		Disable:            slices.Clone(s.Capabilities.Disable),
		EnableFeatureSets:  slices.Clone(s.FeatureSets.Enable),
		DisableFeatureSets: slices.Clone(s.FeatureSets.Disable),
	}
}

// reconnect is the server's redial policy.
func reconnect(s config.Server) session.Reconnect {
	return session.Reconnect{Enabled: s.Reconnect.Enabled, Initial: s.Reconnect.Initial, Max: s.Reconnect.Max}
}

// command is how to start the server's process: Env as KEY=VALUE pairs
// sorted by name, in the server's directory.
func command(s config.Server) transport.Command {
	env := make([]string, 0, len(s.Env))
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return transport.Command{Argv: slices.Clone(s.Argv), Env: env, InheritEnv: s.InheritEnv, Dir: s.Dir}
}

// implemented is what this host implements for every server: tools, until
// the channel and agent layers wire their consumers (a grant is a promise,
// SPEC §5.4).
func implemented() []string { return session.DefaultImplemented() }

// toolsAllowed reports whether host policy lets the server's tools be
// listed and called: the "tools" path, which a Disable pattern or an
// Enable allowlist can deny, for a plain MCP server as for an MCPL one.
func toolsAllowed(s config.Server) bool {
	return grant.Grantable("tools", implemented(), grantPolicy(s))
}
