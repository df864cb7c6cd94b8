package agent

import (
	"encoding/json"
	"testing"
)

func TestForkGuard(t *testing.T) {
	home := forkKey{"chat", "general"}
	for _, tc := range []struct {
		name       string
		home       forkKey
		tool, args string
		server     string // a send tool's
		send       bool
		refusal    string
		out        string
	}{
		{"not a fork", forkKey{}, "channel_open", `{"channelId":"b"}`, "", false, "", `{"channelId":"b"}`},
		{"a fork's open", home, "channel_open", `{"channelId":"general"}`, "", false,
			`This conversation is bound to channel "general", so it can't open other channels, and nothing was opened. Reply in "general".`, ""},
		{"publish defaults to home", home, "channel_publish", `{"text":"hi"}`, "", false, "", `{"channelId":"general","serverId":"chat","text":"hi"}`},
		{"publish home", home, "channel_publish", `{"channelId":"general","serverId":"chat","text":"hi"}`, "", false, "", `{"channelId":"general","serverId":"chat","text":"hi"}`},
		{"publish elsewhere", home, "channel_publish", `{"channelId":"news","text":"hi"}`, "", false,
			"This conversation is bound to channel general; publishing to news is not allowed.", ""},
		{"publish on another server", home, "channel_publish", `{"channelId":"general","serverId":"other","text":"hi"}`, "", false,
			"This conversation is bound to channel general; publishing to general on other is not allowed.", ""},
		{"a channelId that is no string", home, "channel_publish", `{"channelId":7,"text":"hi"}`, "", false,
			"This conversation is bound to channel general; publishing to 7 is not allowed.", ""},
		{"close elsewhere", home, "channel_close", `{"channelId":"news"}`, "", false,
			"This conversation is bound to channel general; closing news is not allowed.", ""},
		{"close defaults to home", home, "channel_close", `{}`, "", false, "", `{"channelId":"general","serverId":"chat"}`},
		{"another tool passes", home, "channel_list", `{}`, "", false, "", `{}`},
		{"a send tool home", home, "chat--send_message", `{"text":"hi"}`, "chat", true, "", `{"channelId":"general","text":"hi"}`},
		{"a send tool elsewhere", home, "chat--send_message", `{"channelId":"news","text":"hi"}`, "chat", true,
			"This conversation is bound to channel general; posting with chat--send_message to news is not allowed.", ""},
		{"another server's send tool", home, "other--send_message", `{}`, "other", true,
			"This conversation is bound to channel general; posting with other--send_message to general on other is not allowed.", ""},
	} {
		refusal, out := forkGuard(tc.home, tc.tool, tc.server, tc.send, json.RawMessage(tc.args))
		if refusal != tc.refusal || string(out) != tc.out {
			t.Errorf("%s: forkGuard = %q, %s\nwant %q, %s", tc.name, refusal, out, tc.refusal, tc.out)
		}
	}
}
