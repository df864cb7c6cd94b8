package config_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/config"
)

// channels.bots: whether bots may wake an agent, where, and how often in a
// row; every mistake named with its line.
func TestChannelsBots(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want config.Bots
		err  string
	}{
		{src: "", want: config.Bots{}},
		{src: "    channels: {bots: {wake: true}}\n", want: config.Bots{Wake: true}},
		{src: "    channels: {bots: {channels: [arena, \"discord:g1:bots\"], maxReplies: 5}}\n", want: config.Bots{Channels: []string{"arena", "discord:g1:bots"}, MaxReplies: 5}},
		{src: "    channels: {bots: {maxReplies: 0}}\n", err: `c.yaml:4: servers[0].channels.bots.maxReplies: must be a number of turns more than 0, not 0 (leave it out for 3)`},
		{src: "    channels: {bots: {maxReplies: \"3\"}}\n", err: `c.yaml:4: servers[0].channels.bots.maxReplies: must be a whole number without quotes`},
		{src: "    channels: {bots: {wake: yes please}}\n", err: "c.yaml:4: servers[0].channels.bots.wake: "},
		{src: "    channels: {bots: {channels: arena}}\n", err: "c.yaml:4: servers[0].channels.bots.channels: "},
		{src: "    channels: {bots: {maxReply: 3}}\n", err: "c.yaml:4: servers[0].channels.bots.maxReply: unknown key"},
		{src: "    channels: {bots: true}\n", err: "c.yaml:4: servers[0].channels.bots: "},
	} {
		s, err := one(t, tc.src)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%q: err = %v\nwant it to start %s", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, s.Channels.Bots); diff != "" {
			t.Errorf("%q: Bots (-want +got):\n%s", tc.src, diff)
		}
	}
}
