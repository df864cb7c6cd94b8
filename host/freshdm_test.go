package host_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestFreshDMPublishedAtOnce is issue 22's fresh DM through the path a
// user takes: the server registers a channel (closed by default, as a new
// DM is) and the agent publishes into it at once, the registration's
// default close still on its way. Each of 100 times, with 100 channels,
// the publish opens the channel and is delivered, and the server sees,
// for that channel, one open then one publish, after the registration's
// close when that went first (the publish can decide the channel open
// before the registration's work starts; then its open stands for both,
// and no close goes), and never a second close.
func TestFreshDMPublishedAtOnce(t *testing.T) {
	r := newChannelRig(t)
	const n = 100
	for i := range n {
		id := fmt.Sprintf("dm-%d", i)
		out := r.must("chat--register", fmt.Sprintf(`{"channels":[{"id":%q,"type":"dm","label":"@u%d","address":{"user":"u%d"}}]}`, id, i, i))
		if !strings.Contains(out, `"accepted":true`) {
			t.Fatalf("register %s: %s", id, out)
		}
		text, failed := r.tool("channel_publish", fmt.Sprintf(`{"channelId":%q,"serverId":"chat","text":"hello %d"}`, id, i))
		var res struct {
			Delivered bool   `json:"delivered"`
			Status    string `json:"status"`
			ChannelID string `json:"channelId"`
			MessageID string `json:"messageId"`
		}
		if failed || json.Unmarshal([]byte(text), &res) != nil || !res.Delivered || res.Status != "delivered" || res.ChannelID != id || res.MessageID == "" {
			t.Fatalf("publish %d into a channel registered a moment earlier = %q (failed %v), want it delivered", i, text, failed)
		}
	}
	var log []string
	json.Unmarshal([]byte(r.must("chat--log", fmt.Sprintf(`{"count":%d}`, 2*n))), &log)
	byChannel := map[string][]string{}
	for _, l := range log {
		method, rest, _ := strings.Cut(l, " ")
		channel, _, _ := strings.Cut(rest, ":")
		byChannel[channel] = append(byChannel[channel], method)
	}
	for i := range n {
		id := fmt.Sprintf("dm-%d", i)
		if got := byChannel[id]; !slices.Equal(got, []string{"close", "open", "publish"}) && !slices.Equal(got, []string{"open", "publish"}) {
			t.Errorf("the server got, for %s: %q; want close, open, publish (or open, publish)", id, got)
		}
	}
}
