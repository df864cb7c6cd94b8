package agent

import (
	"encoding/json"
	"testing"
)

func TestForkGuard(t *testing.T) {
	for _, tc := range []struct {
		name, home, tool, args string
		refusal, out           string
		send                   bool
	}{
		{"not a fork", "", "channel_open", `{"channelId":"b"}`, "", `{"channelId":"b"}`, false},
		{"a fork's open", "general", "channel_open", `{"channelId":"general"}`,
			`This conversation is bound to channel "general", so it can't open other channels, and nothing was opened. Reply in "general".`, "", false},
		{"publish defaults to home", "general", "channel_publish", `{"text":"hi"}`, "", `{"channelId":"general","text":"hi"}`, false},
		{"publish home", "general", "channel_publish", `{"channelId":"general","text":"hi"}`, "", `{"channelId":"general","text":"hi"}`, false},
		{"publish elsewhere", "general", "channel_publish", `{"channelId":"news","text":"hi"}`,
			"This conversation is bound to channel general; publishing to news is not allowed.", "", false},
		{"close elsewhere", "general", "channel_close", `{"channelId":"news"}`,
			"This conversation is bound to channel general; closing news is not allowed.", "", false},
		{"close defaults to home", "general", "channel_close", `{}`, "", `{"channelId":"general"}`, false},
		{"another tool passes", "general", "channel_list", `{}`, "", `{}`, false},
		{"a send tool home", "general", "chat--send_message", `{"text":"hi"}`, "", `{"channelId":"general","text":"hi"}`, true},
		{"a send tool elsewhere", "general", "chat--send_message", `{"channelId":"news","text":"hi"}`,
			"This conversation is bound to channel general; posting with chat--send_message to news is not allowed.", "", true},
	} {
		refusal, out := forkGuard(tc.home, tc.tool, tc.send, json.RawMessage(tc.args))
		if refusal != tc.refusal || string(out) != tc.out {
			t.Errorf("%s: forkGuard = %q, %s\nwant %q, %s", tc.name, refusal, out, tc.refusal, tc.out)
		}
	}
}
