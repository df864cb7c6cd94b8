package agent

import (
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
// what the tool gets (a missing channelId filled with home).
func forkGuard(home, tool string, send bool, args json.RawMessage) (refusal string, out json.RawMessage) {
	if home == "" {
		return "", args
	}
	switch {
	case tool == channels.ToolOpen:
		return textForkOpen(home), nil
	case tool == channels.ToolPublish, tool == channels.ToolClose, send:
	default:
		return "", args
	}
	var a map[string]json.RawMessage
	if json.Unmarshal(args, &a) != nil || a == nil {
		a = map[string]json.RawMessage{}
	}
	var id string
	if v, ok := a["channelId"]; ok && string(v) != "null" {
		if json.Unmarshal(v, &id) != nil {
			id = string(v)
		}
	}
	switch {
	case id == "":
		a["channelId"], _ = json.Marshal(home)
	case id != home:
		verb := "publishing to"
		switch {
		case tool == channels.ToolClose:
			verb = "closing"
		case send && tool != channels.ToolPublish:
			verb = "posting with " + tool + " to"
		}
		return textForkElsewhere(home, verb, id), nil
	}
	out, _ = json.Marshal(a)
	return "", out
}
