package agent

import (
	"encoding/json"
	"testing"
)

func TestForkGuard(t *testing.T) {
	for _, tc := range []struct {
		name, home, tool, args string
		refusal, out           string
	}{
		{"not a fork", "", "channel_open", `{"channelId":"b"}`, "", `{"channelId":"b"}`},
		{"a fork's open", "general", "channel_open", `{"channelId":"general"}`,
			`This conversation is bound to channel "general", so it can't open other channels, and nothing was opened. Reply in "general".`, ""},
		{"publish defaults to home", "general", "channel_publish", `{"text":"hi"}`, "", `{"channelId":"general","text":"hi"}`},
		{"publish home", "general", "channel_publish", `{"channelId":"general","text":"hi"}`, "", `{"channelId":"general","text":"hi"}`},
		{"publish elsewhere", "general", "channel_publish", `{"channelId":"news","text":"hi"}`,
			"This conversation is bound to channel general; publishing to news is not allowed.", ""},
		{"close elsewhere", "general", "channel_close", `{"channelId":"news"}`,
			"This conversation is bound to channel general; closing news is not allowed.", ""},
		{"close defaults to home", "general", "channel_close", `{}`, "", `{"channelId":"general"}`},
		{"another tool passes", "general", "channel_list", `{}`, "", `{}`},
	} {
		refusal, out := forkGuard(tc.home, tc.tool, json.RawMessage(tc.args))
		if refusal != tc.refusal || string(out) != tc.out {
			t.Errorf("%s: forkGuard = %q, %s\nwant %q, %s", tc.name, refusal, out, tc.refusal, tc.out)
		}
	}
}
