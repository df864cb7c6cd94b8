package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/internal/channels"
)

var (
	general = channels.ChannelRef{ID: "general", Label: "#general"}
	news    = channels.ChannelRef{ID: "news", Label: "#news"}
)

func readers(rs ...Reader) map[string]Reader {
	m := map[string]Reader{}
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}

func only(tools ...string) func(string) bool {
	return func(t string) bool {
		for _, x := range tools {
			if x == t {
				return true
			}
		}
		return false
	}
}

func TestRouteOpened(t *testing.T) {
	ada, bob := Reader{Name: "ada"}, Reader{Name: "bob"}
	fork := Reader{Name: "ada@general", Home: "general"}
	noClose := Reader{Name: "carl", Allowed: only("channel_open")}
	const tail = " If you don't want it, use channel_close — your choice sticks; neither policy nor a later send will silently reopen it."
	for _, tc := range []struct {
		name    string
		n       channels.Notice
		readers map[string]Reader
		want    []Delivery
	}{
		{"policy, to the primary", channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceSubscriptionPolicy, Channels: []channels.ChannelRef{general, news}},
			readers(ada, bob), []Delivery{{"ada", "[channels] Selected for opening by subscription policy: #general (general), #news (news). This is an admission decision; channel_list shows current transport state. If you don't want one of them, use channel_close — your choice sticks; neither policy nor a later send will silently reopen it."}}},
		{"delivery, to its agent", channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByDelivery, Agent: "bob", Channels: []channels.ChannelRef{general}},
			readers(ada, bob), []Delivery{{"bob", "[channels] Now open: #general (general) — your own message into the closed channel engaged it. Ongoing traffic from this channel will reach you." + tail}}},
		{"reply of an agent that can't close: the primary by name too", channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByReply, Agent: "carl", Channels: []channels.ChannelRef{news}},
			readers(ada, noClose), []Delivery{
				{"carl", "[channels] Now open: #news (news) — your own message into the closed channel engaged it. Ongoing traffic from this channel will reach you."},
				{"ada", "[channels] Now open: #news (news) — carl's message into the closed channel engaged it. Ongoing traffic from this channel will reach you." + tail},
			}},
		{"a fork away from home", channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByReply, Agent: "ada@general", Channels: []channels.ChannelRef{news}},
			readers(ada, fork), []Delivery{
				{"ada@general", "[channels] Now open: #news (news) — your own message into the closed channel engaged it. Ongoing traffic from this channel will reach you."},
				{"ada", "[channels] Now open: #news (news) — ada@general's message into the closed channel engaged it. Ongoing traffic from this channel will reach you." + tail},
			}},
		{"the primary of per-channel forks: the traffic goes elsewhere", channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByDelivery, Server: "chat", Agent: "ada", Channels: []channels.ChannelRef{news}},
			readers(Reader{Name: "ada", Forked: true}), []Delivery{
				{"ada", "[channels] Now open: #news (news) — your own message into the closed channel engaged it. Ongoing traffic from this channel goes to its own conversation (conversations: per-channel), not to you." + tail},
			}},
		{"a fork's home on another server is not its home", channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByReply, Server: "other", Agent: "ada@general", Channels: []channels.ChannelRef{general}},
			readers(ada, Reader{Name: "ada@general", Home: "general", HomeServer: "chat"}), []Delivery{
				{"ada@general", "[channels] Now open: #general (general) — your own message into the closed channel engaged it. Ongoing traffic from this channel will reach you."},
				{"ada", "[channels] Now open: #general (general) — ada@general's message into the closed channel engaged it. Ongoing traffic from this channel will reach you." + tail},
			}},
		{"an ended agent: the primary in its place", channels.Notice{Kind: channels.NoticeOpened, Cause: channels.SourceOpenedByReply, Agent: "bob", Channels: []channels.ChannelRef{general}},
			readers(ada, Reader{Name: "bob", Ended: true}), []Delivery{
				{"ada", "[channels] Now open: #general (general) — bob's message into the closed channel engaged it. Ongoing traffic from this channel will reach you." + tail},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Route(tc.n, tc.readers, "ada")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRouteReplyFailed(t *testing.T) {
	base := channels.Notice{Kind: channels.NoticeReplyOpenFailed, Cause: channels.SourceOpenedByReply, Channels: []channels.ChannelRef{news},
		Tool: "send_message", Opening: true, Reason: `The "chat" server answered with an error: no room.`}
	with := func(agent, selected string) channels.Notice {
		n := base
		n.Agent, n.SelectedForOpening = agent, selected
		return n
	}
	ada, bob := Reader{Name: "ada"}, Reader{Name: "bob"}
	noOpen := Reader{Name: "bob", Allowed: only("channel_close")}
	noClose := Reader{Name: "bob", Allowed: only("channel_open")}
	fork := Reader{Name: "ada@general", Home: "general"}
	head := `[channels] Not open: #news (news). Your reply through send_message went out, but opening the channel failed: The "chat" server answered with an error: no room.`
	for _, tc := range []struct {
		name    string
		n       channels.Notice
		readers map[string]Reader
		want    []Delivery
	}{
		{"to its agent, channel_open named", with("bob", ""), readers(ada, bob), []Delivery{{"bob", head + " channel_open tries again."}}},
		{"not to an agent without channel_open", with("bob", ""), readers(ada, noOpen), []Delivery{{"bob", head}}},
		{"not to a fork", with("ada@general", ""), readers(ada, fork), []Delivery{{"ada@general", head}}},
		{"stays selected, unrecorded", with("bob", channels.SelectedUnrecorded), readers(ada, bob),
			[]Delivery{{"bob", head + " It stays selected for opening, as the host couldn't record undoing that: a later delivery or reconnect tries again, and channel_close withdraws that."}}},
		{"selected again by the server, channel_open not named", with("bob", channels.SelectedServerBootstrap), readers(ada, bob),
			[]Delivery{{"bob", head + " It is selected for opening again, as its server announces it open: this host tries again itself, and channel_close withdraws that."}}},
		{"selected again by policy", with("bob", channels.SelectedSubscriptionPolicy), readers(ada, bob),
			[]Delivery{{"bob", head + " It is selected for opening again, as the subscription policy admits it: this host tries again itself, and channel_close withdraws that."}}},
		{"an ended agent, selected: the primary by name", with("bob", channels.SelectedUnrecorded), readers(ada, Reader{Name: "bob", Ended: true}),
			[]Delivery{{"ada", `[channels] Not open: #news (news). bob's reply through send_message went out, but opening the channel failed: The "chat" server answered with an error: no room. It stays selected for opening, as the host couldn't record undoing that: a later delivery or reconnect tries again, and channel_close withdraws that.`}}},
		{"an ended agent, not selected: no one", with("bob", ""), readers(ada, Reader{Name: "bob", Ended: true}), nil},
		{"an ended agent, no primary: no one", with("bob", channels.SelectedUnrecorded), readers(Reader{Name: "bob", Ended: true}), nil},
		{"a reader that can't close, selected: the primary too", with("bob", channels.SelectedServerBootstrap), readers(ada, noClose),
			[]Delivery{
				{"bob", head + " It is selected for opening again, as its server announces it open: this host tries again itself."},
				{"ada", `[channels] Not open: #news (news). bob's reply through send_message went out, but opening the channel failed: The "chat" server answered with an error: no room. It is selected for opening again, as its server announces it open: this host tries again itself, and channel_close withdraws that.`},
			}},
		{"a reader that can't close, the primary can't either: not told", with("bob", channels.SelectedServerBootstrap), readers(Reader{Name: "ada", Allowed: only()}, noClose),
			[]Delivery{{"bob", head + " It is selected for opening again, as its server announces it open: this host tries again itself."}}},
		{"a fork away from home, selected: the primary too", with("ada@general", channels.SelectedUnrecorded), readers(ada, fork),
			[]Delivery{
				{"ada@general", head + " It stays selected for opening, as the host couldn't record undoing that: a later delivery or reconnect tries again."},
				{"ada", `[channels] Not open: #news (news). ada@general's reply through send_message went out, but opening the channel failed: The "chat" server answered with an error: no room. It stays selected for opening, as the host couldn't record undoing that: a later delivery or reconnect tries again, and channel_close withdraws that.`},
			}},
		{"the primary's own reply: told once", with("ada", channels.SelectedUnrecorded), readers(ada),
			[]Delivery{{"ada", head + " It stays selected for opening, as the host couldn't record undoing that: a later delivery or reconnect tries again, and channel_close withdraws that."}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Route(tc.n, tc.readers, "ada")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
