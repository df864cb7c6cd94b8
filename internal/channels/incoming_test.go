package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/store"
)

// channels/incoming: validated at receipt, durable before it is
// acknowledged (SPEC §14.5).

// inboxIDs returns the inbox as "server/channel/message" in order.
func inboxIDs(t *testing.T, st store.Store) []string {
	t.Helper()
	var out []string
	if err := st.Messages(context.Background(), 0, func(m store.Message) error {
		out = append(out, m.Server+"/"+m.Channel+"/"+m.MessageID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func rawMsgs(msgs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		out[i] = json.RawMessage(m)
	}
	return out
}

func TestRegisterIncoming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c", "d")
		ctx := context.Background()
		long := strings.Repeat("m", MaxIDBytes+1)
		res, err := rg.reg.Incoming(ctx, "s", rawMsgs(
			`{"channelId":"c","messageId":"m1","threadId":"t1","content":"one"}`,
			`{"channelId":"d","messageId":"m2","content":"hi"}`,
			`{"channelId":"x","messageId":"m3","content":"hi"}`,
			`{"channelId":"c"}`,
			`{"messageId":"m4","content":"hi"}`,
			`{"channelId":"c","messageId":"","content":"hi"}`,
			`"not an object"`,
			`{"channelId":"c","messageId":"`+long+`","content":"hi"}`,
			`{"channelId":"c","messageId":"m1","content":"hi"}`,
			`{"channelId":"c","messageId":"m5","content":"hi"}`,
		))
		if err != nil {
			t.Fatal(err)
		}
		want := []protocol.IncomingResult{
			{MessageID: "m1", Accepted: true},
			{MessageID: "m2", Accepted: true},
			{MessageID: "m3", Accepted: false, Reason: `unknown channel "x" — register it first (§14.5)`},
			{MessageID: "", Accepted: false, Reason: "invalid channel/message identity"},
			{MessageID: "m4", Accepted: false, Reason: "invalid channel/message identity"},
			{MessageID: "", Accepted: false, Reason: "invalid channel/message identity"},
			{MessageID: "", Accepted: false, Reason: "invalid channel/message identity"},
			{MessageID: long[:64] + "…", Accepted: false, Reason: "invalid channel/message identity: an id is longer than 512 bytes"},
			{MessageID: "m1", Accepted: true},
			{MessageID: "m5", Accepted: true},
		}
		if diff := cmp.Diff(want, res.Results); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"s/c/m1", "s/d/m2", "s/c/m5"}, inboxIDs(t, rg.st)); diff != "" {
			t.Errorf("inbox (-want +got):\n%s", diff)
		}
		var first store.Message
		rg.st.Messages(ctx, 0, func(m store.Message) error {
			if first.MessageID == "" {
				first = m
			}
			return nil
		})
		if first.ThreadID != "t1" || string(first.Body) != `{"channelId":"c","messageId":"m1","threadId":"t1","content":"one"}` {
			t.Errorf("first message = %+v", first)
		}

		// Sent again: accepted, kept once.
		res, err = rg.reg.Incoming(ctx, "s", rawMsgs(`{"channelId":"c","messageId":"m1","content":"hi"}`, `{"channelId":"c","messageId":"m6","content":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]protocol.IncomingResult{{MessageID: "m1", Accepted: true}, {MessageID: "m6", Accepted: true}}, res.Results); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"s/c/m1", "s/d/m2", "s/c/m5", "s/c/m6"}, inboxIDs(t, rg.st)); diff != "" {
			t.Errorf("inbox (-want +got):\n%s", diff)
		}

		// Another server's channel c is not this one's.
		rg.reg.AddServer("t", newDouble(t, "channels.register"), ServerConfig{})
		res, _ = rg.reg.Incoming(ctx, "t", rawMsgs(`{"channelId":"c","messageId":"m7","content":"hi"}`))
		if res.Results[0].Accepted {
			t.Errorf("t's message into s's channel accepted: %+v", res.Results)
		}

		// A removed channel takes no more.
		rg.reg.Changed("s", protocol.ChannelsChangedParams{Removed: []string{"d"}}, false)
		res, _ = rg.reg.Incoming(ctx, "s", rawMsgs(`{"channelId":"d","messageId":"m8","content":"hi"}`))
		if res.Results[0].Accepted || res.Results[0].Reason != `unknown channel "d" — register it first (§14.5)` {
			t.Errorf("message into a removed channel = %+v", res.Results)
		}
	})
}

// inboxFailStore fails AddMessages while fail is set.
type inboxFailStore struct {
	store.Store
	mu   sync.Mutex
	fail bool
}

func (s *inboxFailStore) setFail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = on
}

func (s *inboxFailStore) AddMessages(ctx context.Context, msgs []store.Message) ([]bool, error) {
	s.mu.Lock()
	failing := s.fail
	s.mu.Unlock()
	if failing {
		return nil, errDiskFull
	}
	return s.Store.AddMessages(ctx, msgs)
}

func TestRegisterIncomingStoreFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		// Swapped in before the registry has any goroutine.
		inbox := &inboxFailStore{Store: rg.st.Store}
		rg.st.Store = inbox
		rg.registered("c")
		inbox.setFail(true)
		res, err := rg.reg.Incoming(context.Background(), "s", rawMsgs(`{"channelId":"c","messageId":"m1","content":"hi"}`, `{"channelId":"x","messageId":"m2","content":"hi"}`))
		var perr *protocol.Error
		if !errors.As(err, &perr) || perr.Code != protocol.CodeInternalError ||
			perr.Message != "this host could not store the messages; none was accepted: send them again later" {
			t.Errorf("error = %v", err)
		}
		for _, r := range res.Results {
			if r.Accepted {
				t.Errorf("accepted %+v", r)
			}
		}
		inbox.setFail(false)
		if got := inboxIDs(t, inbox); len(got) != 0 {
			t.Errorf("inbox = %v", got)
		}
		res, err = rg.reg.Incoming(context.Background(), "s", rawMsgs(`{"channelId":"c","messageId":"m1","content":"hi"}`))
		if err != nil || !res.Results[0].Accepted {
			t.Errorf("after the store recovered: %+v, %v", res, err)
		}
	})
}

// TestIncomingEmptyContent: a message that shows an agent nothing is
// refused with reason empty-content; blocks this host can't show still
// count, as their markers say something.
func TestIncomingEmptyContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		res, err := rg.reg.Incoming(context.Background(), "s", rawMsgs(
			`{"channelId":"c","messageId":"m1","content":[]}`,
			`{"channelId":"c","messageId":"m2"}`,
			`{"channelId":"c","messageId":"m3","content":[{"type":"text","text":"  "}]}`,
			`{"channelId":"c","messageId":"m4","content":"  "}`,
			`{"channelId":"c","messageId":"m5","content":{"type":"text","text":"hi"}}`,
			`{"channelId":"c","messageId":"m6","content":[{"type":"video"}]}`,
			`{"channelId":"c","messageId":"m7","content":"hello"}`,
		))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range res.Results {
			got = append(got, fmt.Sprintf("%s %v %s", r.MessageID, r.Accepted, r.Reason))
		}
		want := []string{"m1 false empty-content", "m2 false empty-content", "m3 false empty-content", "m4 false empty-content",
			"m5 false empty-content", "m6 true ", "m7 true "}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if got := inboxIDs(t, rg.st); !slices.Equal(got, []string{"s/c/m6", "s/c/m7"}) {
			t.Errorf("inbox = %v", got)
		}
	})
}

// TestIncomingTagsClosed: a message's tags are kept with the core closure
// applied at receipt (SPEC §16.3); what isn't a tag string is dropped.
func TestIncomingTagsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		_, err := rg.reg.Incoming(context.Background(), "s", rawMsgs(
			`{"channelId":"c","messageId":"m1","content":"hi","tags":["chat:ambient","chat:dm",7,"","discord:ping","chat:dm"]}`,
			`{"channelId":"c","messageId":"m2","content":"hi"}`,
			`{"channelId":"c","messageId":"m3","content":"hi","tags":"chat:dm"}`,
		))
		if err != nil {
			t.Fatal(err)
		}
		var got [][]string
		rg.st.Messages(context.Background(), 0, func(m store.Message) error {
			got = append(got, m.Tags)
			return nil
		})
		want := [][]string{{"chat:dm", "chat:addressed", "chat:private", "discord:ping"}, nil, nil}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tags (-want +got):\n%s", diff)
		}
	})
}

// TestIncomingNotification: channels/incoming sent as a notification
// (§14.3 makes it a request; connectors in use send it so) is kept like a
// request's messages, validated and deduplicated the same way; the log
// says so once a connection, at WARN, then at debug.
func TestIncomingNotification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t)
		rg.registered("c")
		peer := servePair(t, rg)
		ctx := context.Background()
		for _, m := range []string{
			`{"messages":[{"channelId":"c","messageId":"m1","content":"hi"},{"channelId":"x","messageId":"m2","content":"hi"}]}`,
			`{"messages":[{"channelId":"c","messageId":"m1","content":"hi again"},{"channelId":"c","messageId":"m3","content":"there"}]}`,
		} {
			if err := peer.Notify(ctx, protocol.MethodChannelsIncoming, json.RawMessage(m)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if diff := cmp.Diff([]string{"s/c/m1", "s/c/m3"}, inboxIDs(t, rg.st)); diff != "" {
			t.Errorf("inbox (-want +got):\n%s", diff)
		}
		warned := rg.logs.Find("channels/incoming sent as a notification: its messages are kept as a request's would be, but the server can't learn which were (SPEC §14.3 makes it a request); said once a connection")
		if len(warned) != 1 || warned[0].Level != slog.LevelWarn || warned[0].Attr("server") != "s" {
			t.Errorf("warnings = %+v, want one", warned)
		}
		if n := len(rg.logs.Find("channels/incoming sent as a notification")); n != 1 {
			t.Errorf("%d debug lines, want 1 (the second notification)", n)
		}
	})
}
