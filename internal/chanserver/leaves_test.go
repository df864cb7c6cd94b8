package chanserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// serveLeaves serves cfg on a pipe and returns the host's end.
func serveLeaves(t *testing.T, cfg chanserver.Config) *wire.Peer {
	t.Helper()
	serverEnd, hostEnd := transport.Pipe(0)
	served := make(chan struct{})
	go func() {
		chanserver.Serve(serverEnd, cfg)
		close(served)
	}()
	peer := wire.NewPeer(hostEnd, wire.Options{Name: "chanserver", Handler: wire.NewMux(), Logger: quietLog})
	t.Cleanup(func() {
		peer.Close()
		select {
		case <-served:
		case <-time.After(waitFor):
			t.Error("Serve did not return after the connection closed")
		}
	})
	return peer
}

// channelsAdvert is the server's channels advertisement.
func channelsAdvert(t *testing.T, peer *wire.Peer) map[string]bool {
	t.Helper()
	var res struct {
		Capabilities struct {
			Experimental struct {
				MCPL struct {
					Channels map[string]bool `json:"channels"`
				} `json:"mcpl"`
			} `json:"experimental"`
		} `json:"capabilities"`
	}
	if err := peer.Call(t.Context(), protocol.MethodInitialize, map[string]any{}, &res); err != nil {
		t.Fatal(err)
	}
	return res.Capabilities.Experimental.MCPL.Channels
}

func callTool(t *testing.T, peer *wire.Peer, name, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	var res protocol.CallToolResult
	if err := peer.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: name, Arguments: json.RawMessage(args)}, &res); err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("%s: %s", name, res.Text())
	}
	return res.Text()
}

// TestLeavesOptIn: without the options, channels.acknowledge and
// channels.typing are not advertised and channels/acknowledge is not
// answered; with them, both are advertised, answered or taken, and logged
// in order with the lifecycle requests; opens has every channels/open's
// params as they came.
func TestLeavesOptIn(t *testing.T) {
	plain := serveLeaves(t, chanserver.Config{})
	if caps := channelsAdvert(t, plain); caps["acknowledge"] || caps["typing"] {
		t.Errorf("advertised %v without the options", caps)
	}
	err := plain.Call(t.Context(), protocol.MethodChannelsAcknowledge, map[string]string{"channelId": "c"}, nil)
	if ce, ok := err.(*wire.CallError); !ok || ce.Answer == nil || ce.Answer.Code != protocol.CodeMethodNotFound {
		t.Errorf("channels/acknowledge without the option = %v, want method not found", err)
	}

	peer := serveLeaves(t, chanserver.Config{Acknowledge: true, Typing: true})
	if caps := channelsAdvert(t, peer); !caps["acknowledge"] || !caps["typing"] || !caps["lifecycle"] {
		t.Errorf("advertised %v with the options", caps)
	}
	const openParams = `{"channelId":"c","type":"chat","address":{"room-id":"7", "n":1.50}}`
	if err := peer.Call(t.Context(), protocol.MethodChannelsOpen, json.RawMessage(openParams), nil); err != nil {
		t.Fatal(err)
	}
	var ack protocol.ChannelsAcknowledgeResult
	if err := peer.Call(t.Context(), protocol.MethodChannelsAcknowledge, protocol.ChannelsAcknowledgeParams{ChannelID: "c", MessageID: "m1", Intent: protocol.AckSeen, Value: "👀"}, &ack); err != nil {
		t.Fatal(err)
	}
	if !ack.Acknowledged || ack.Representation != "👀" {
		t.Errorf("channels/acknowledge answered %+v", ack)
	}
	for _, op := range []string{protocol.TypingStart, protocol.TypingStop} {
		if err := peer.Notify(t.Context(), protocol.MethodChannelsTyping, protocol.ChannelsTypingParams{ChannelID: "c", Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	jsonEq(t, "log", callTool(t, peer, "log", `{"count":4}`), `["open c","acknowledge c m1: seen","typing c start","typing c stop"]`)
	var opens []json.RawMessage
	json.Unmarshal([]byte(callTool(t, peer, "opens", `{"count":1}`)), &opens)
	if len(opens) != 1 || string(opens[0]) != `{"channelId":"c","type":"chat","address":{"room-id":"7","n":1.50}}` {
		t.Errorf("opens = %s, want the one open's params as sent", opens)
	}
}
