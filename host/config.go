package host

import (
	"context"
	"slices"
	"time"

	"github.com/mcpl-go/mcpl/config"
	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/channels"
	"github.com/mcpl-go/mcpl/internal/session"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
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

// implemented is what this host implements for every server: each path
// has its consumer wired (a grant is a promise, SPEC §5.4): tools, and the
// seven channel leaves package channels serves (typing and streaming are
// sent around an agent's speech, so a host without agents sends none).
// The agent paths come with agents (implementedFor).
func implemented() []string {
	return []string{"tools", "channels.register", "channels.incoming", "channels.lifecycle", "channels.publish",
		"channels.acknowledge", "channels.typing", "channels.streaming"}
}

// agentPaths are the paths the agents consume: push events become
// turns, context hooks run around their model calls, inference/lifecycle
// announces those calls, model/info describes the primary's model.
var agentPaths = []string{
	"pushEvents", "modelInfo", "inferenceLifecycle",
	"contextHooks.beforeInference.observe",
	"contextHooks.beforeInference.inject.system",
	"contextHooks.beforeInference.inject.beforeUser",
	"contextHooks.beforeInference.inject.afterUser",
}

// implementedFor is what this host implements for a server: the base,
// and, while agents run, what they consume; inferenceRequest only where an
// inference route could match the server (a grant is a promise: a server
// no route serves is not granted it).
func implementedFor(s config.Server, set *agentSet) []string {
	out := implemented()
	if set == nil {
		return out
	}
	out = append(out, agentPaths...)
	for _, r := range set.cfg.Inference {
		if r = r.WithDefaults(); r.Server == "*" || r.Server == s.ID {
			return append(out, "inferenceRequest", "inferenceRequest.streaming")
		}
	}
	return out
}

// coalescingFor is the eventCoalescing this host advertises: what its
// coalescer serves (coalesce.go), with the agents that consume pushEvents
// running; nil without them.
func coalescingFor(set *agentSet) *protocol.EventCoalescing {
	if set == nil {
		return nil
	}
	ec := advertisedCoalescing()
	return &ec
}

// channelConfig is the server's channel settings as the registry takes
// them.
func channelConfig(s config.Server) channels.ServerConfig {
	return channels.ServerConfig{
		Admits:          s.Channels.Subscription.Admits,
		SendTools:       s.Channels.SendTools,
		AcknowledgeSeen: s.Channels.AcknowledgeSeen,
		Timeout:         s.TimeoutFor(protocol.MethodChannelsOpen),

		MaxDescriptorBytes:      s.Channels.MaxDescriptorBytes,
		MaxTotalDescriptorBytes: s.Channels.MaxTotalDescriptorBytes,
	}
}

// sessionConn is a session as the channel registry calls it.
type sessionConn struct{ s *session.Session }

func (c sessionConn) Call(ctx context.Context, method string, params, result any, timeout time.Duration) error {
	return c.s.Call(ctx, method, params, result, wire.WithTimeout(timeout))
}

func (c sessionConn) Has(capability string) bool { return c.s.Grant().Has(capability) }

func (c sessionConn) Notify(ctx context.Context, method string, params any) error {
	return c.s.Notify(ctx, method, params)
}

// toolsAllowed reports whether host policy lets the server's tools be
// listed and called: the "tools" path, which a Disable pattern or an
// Enable allowlist can deny, for a plain MCP server as for an MCPL one.
func toolsAllowed(s config.Server) bool {
	return grant.Grantable("tools", implemented(), grantPolicy(s))
}
