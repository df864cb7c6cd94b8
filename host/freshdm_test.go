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
// for that channel, the registration's close, one open, one publish, in
// that order.
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
		// The server numbers its answers: close, open and publish of each
		// channel in turn make this publish's the (3i+3)th.
		want := fmt.Sprintf(`{"channelId":%q,"channelLabel":"@u%d","delivered":true,"messageId":"m%d","serverId":"chat","status":"delivered"}`, id, i, 3*i+3)
		if failed || text != want {
			t.Fatalf("publish %d into a channel registered a moment earlier = %q (failed %v)\nwant %q", i, text, failed, want)
		}
	}
	var log []string
	json.Unmarshal([]byte(r.must("chat--log", fmt.Sprintf(`{"count":%d}`, 3*n))), &log)
	byChannel := map[string][]string{}
	for _, l := range log {
		method, rest, _ := strings.Cut(l, " ")
		channel, _, _ := strings.Cut(rest, ":")
		byChannel[channel] = append(byChannel[channel], method)
	}
	for i := range n {
		id := fmt.Sprintf("dm-%d", i)
		if got := byChannel[id]; !slices.Equal(got, []string{"close", "open", "publish"}) {
			t.Errorf("the server got, for %s: %q; want close, open, publish", id, got)
		}
	}
	if len(log) != 3*n {
		t.Errorf("the server got %d requests, want %d:\n%s", len(log), 3*n, strings.Join(log, "\n"))
	}
}
