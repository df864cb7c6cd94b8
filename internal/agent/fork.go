package agent

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/mcpl-go/mcpl/internal/channels"
)

// A conversation fork (config conversations: per-channel) is an agent
// bound to one channel, its home. Before a fork's channel tool call
// reaches the registry, forkGuard holds it to its home: channel_open is
// refused outright; channel_publish, channel_close and the configured send
// tools (send: a server's tool that posts into the channel its channelId
// names) default a missing channelId to home and refuse any other. A
// fork's reply elsewhere would open a channel whose traffic goes to that
// channel's own fork, never to it.

// textForkOpen is a fork's channel_open (seeds/002, verbatim).
func textForkOpen(home string) string {
	return fmt.Sprintf(`This conversation is bound to channel "%s", so it can't open other channels, and nothing was opened. Reply in "%s".`, home, home)
}

// textForkElsewhere is a fork's publish to, or close of, another channel
// (the anchor host's, which seeds/002 leaves as it was).
func textForkElsewhere(home, verb, channel string) string {
	return fmt.Sprintf("This conversation is bound to channel %s; %s %s is not allowed.", home, verb, channel)
}

// forkGuard checks a fork's channel tool or send tool call: refusal, when
// not "", is what the fork reads and the call doesn't run; else args are
// what the tool gets. A channel tool's missing channelId and serverId are
// filled with home's; a send tool (send, posting on toolServer) must be
// one of home's server, and its missing channelId is filled with home's.
func forkGuard(home forkKey, tool, toolServer string, send bool, args json.RawMessage) (refusal string, out json.RawMessage) {
	if home == (forkKey{}) {
		return "", args
	}
	channelTool := tool == channels.ToolPublish || tool == channels.ToolClose
	switch {
	case tool == channels.ToolOpen:
		return textForkOpen(home.channel), nil
	case channelTool, send:
	default:
		return "", args
	}
	var a map[string]json.RawMessage
	if json.Unmarshal(args, &a) != nil || a == nil {
		a = map[string]json.RawMessage{}
	}
	id, server := stringArg(a, "channelId"), toolServer
	if channelTool {
		server = stringArg(a, "serverId")
	}
	if (id != "" && id != home.channel) || (server != "" && server != home.server) {
		verb := "publishing to"
		switch {
		case tool == channels.ToolClose:
			verb = "closing"
		case !channelTool:
			verb = "posting with " + tool + " to"
		}
		target := cmp.Or(id, home.channel)
		if server != "" && server != home.server {
			target += " on " + server
		}
		return textForkElsewhere(home.channel, verb, target), nil
	}
	if id == "" {
		a["channelId"], _ = json.Marshal(home.channel)
	}
	if channelTool && server == "" {
		a["serverId"], _ = json.Marshal(home.server)
	}
	out, _ = json.Marshal(a)
	return "", out
}

// stringArg reads an argument that should be a string; one that isn't is
// read as its JSON text, so that it is never taken for the home's.
func stringArg(a map[string]json.RawMessage, key string) string {
	v, ok := a[key]
	if !ok || string(v) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return string(v)
	}
	return s
}
