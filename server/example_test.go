package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

// pretendHost serves s on one end of an in-memory pipe and returns a bare
// JSON-RPC peer on the other, initialized, standing in for an MCPL host
// (this module's own, which examples cannot import); handler answers what
// the server sends it. done closes it and waits for ServeConn. A real
// server runs s.ServeStdio(ctx), or mounts s on an HTTP mux.
func pretendHost(s *server.Server, handler wire.Handler) (host *wire.Peer, done func()) {
	a, b := net.Pipe()
	served := make(chan struct{})
	go func() {
		s.ServeConn(context.Background(), b)
		close(served)
	}()
	host = wire.NewPeer(transport.NewLineStream(a, a, a, 0), wire.Options{Name: "server", Handler: handler, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	host.Call(ctx, protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: protocol.ProtocolVersion}, nil)
	host.Notify(ctx, protocol.MethodInitialized, nil)
	return host, func() {
		host.Close()
		<-served
	}
}

// grantPolicy sends the host's policy Request and returns the receipt.
func grantPolicy(host *wire.Peer, effective ...string) string {
	var receipt json.RawMessage
	host.Call(context.Background(), protocol.MethodFeatureSetsUpdate,
		protocol.FeatureSetsUpdateParams{EffectiveCapabilities: effective}, &receipt)
	return string(receipt)
}

var discard = slog.New(slog.DiscardHandler)

// A server with one tool, called by a host.
func Example() {
	s := server.New("greeter", "1.0.0", &server.Options{Logger: discard})
	type args struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	server.AddTool(s, server.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, in args) (protocol.CallToolResult, error) {
			return server.TextResult("Hello, " + in.Name + "!"), nil
		})

	host, done := pretendHost(s, nil)
	defer done()
	var res protocol.CallToolResult
	host.Call(context.Background(), protocol.MethodToolsCall,
		protocol.CallToolParams{Name: "greet", Arguments: json.RawMessage(`{"name":"Ada"}`)}, &res)
	fmt.Println(res.Text())
	// Output: Hello, Ada!
}

// A tool's Go error reaches the model as an isError result carrying the
// error's text.
func ExampleAddTool() {
	s := server.New("files", "1.0.0", &server.Options{Logger: discard})
	server.AddTool(s, server.Tool{Name: "read", Description: "Reads a file."},
		func(ctx context.Context, in struct {
			Path string `json:"path"`
		}) (protocol.CallToolResult, error) {
			if strings.Contains(in.Path, "..") {
				return server.ErrorResult("Paths may not leave the workspace."), nil
			}
			return protocol.CallToolResult{}, errors.New("no such file: " + in.Path)
		})

	host, done := pretendHost(s, nil)
	defer done()
	for _, args := range []string{`{"path":"../etc/passwd"}`, `{"path":"notes.txt"}`} {
		var res protocol.CallToolResult
		host.Call(context.Background(), protocol.MethodToolsCall,
			protocol.CallToolParams{Name: "read", Arguments: json.RawMessage(args)}, &res)
		fmt.Printf("isError=%v %s\n", res.IsError, res.Text())
	}
	// Output:
	// isError=true Paths may not leave the workspace.
	// isError=true no such file: notes.txt
}

func ExampleSchemaFor() {
	type args struct {
		Query string   `json:"query" jsonschema:"what to search for"`
		Limit int      `json:"limit,omitempty"`
		Tags  []string `json:"tags,omitempty"`
	}
	fmt.Println(string(server.SchemaFor[args]()))
	// Output: {"type":"object","properties":{"query":{"type":"string","description":"what to search for"},"limit":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["query"]}
}

// A connection's own work waits for the policy, then registers channels
// and delivers a message. Before the policy, RegisterChannels would have
// returned ErrNoPolicy and sent nothing.
func ExampleConn_Ready() {
	delivered := make(chan struct{})
	s := server.New("room", "1.0.0", &server.Options{
		Logger:       discard,
		Capabilities: []string{"channels.register", "channels.incoming"},
		OnConnect: func(ctx context.Context, c *server.Conn) {
			defer close(delivered)
			select {
			case <-c.Ready():
			case <-ctx.Done():
				return
			}
			res, err := c.RegisterChannels(ctx, protocol.ChannelDescriptor{ID: "room:#general", Label: "#general", InitiallyOpen: true})
			if err != nil || !res[0].Accepted {
				return
			}
			c.Incoming(ctx, server.Message{
				ChannelID: "room:#general", Author: server.Author{Name: "alice"},
				Content: server.TextContent("@agent, are you there?"), Tags: []string{"chat:mention"},
			})
		},
	})

	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodChannelsRegister, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsRegisterParams
		json.Unmarshal(req.Params, &p)
		fmt.Println("registered:", p.Channels[0].ID)
		return protocol.ChannelResults{Results: []protocol.ChannelResult{{ID: p.Channels[0].ID, Accepted: true}}}, nil
	})
	mux.HandleFunc(protocol.MethodChannelsIncoming, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsIncomingParams
		json.Unmarshal(req.Params, &p)
		m := p.Messages[0]
		fmt.Printf("incoming on %s: %s %v\n", m.ChannelID, m.Author, m.Tags)
		return protocol.ChannelsIncomingResult{Results: []protocol.IncomingResult{{MessageID: m.MessageID, Accepted: true}}}, nil
	})
	host, done := pretendHost(s, mux)
	defer done()
	grantPolicy(host, "channels.register", "channels.incoming")
	<-delivered
	// Output:
	// registered: room:#general
	// incoming on room:#general: {"name":"alice"} [chat:mention]
}

// A declared feature set whose uses the host does not grant is reported
// degraded in the receipt, and its push events are refused here.
func ExampleConn_PushEvent() {
	ready := make(chan *server.Conn, 1)
	s := server.New("alerts", "1.0.0", &server.Options{
		Logger:       discard,
		Capabilities: []string{"pushEvents"},
		FeatureSets:  []server.FeatureSet{{Name: "alerts.build", Description: "Build failures", Uses: []string{"pushEvents"}}},
		OnConnect:    func(ctx context.Context, c *server.Conn) { ready <- c },
	})
	host, done := pretendHost(s, nil)
	defer done()
	c := <-ready
	fmt.Println(grantPolicy(host)) // nothing granted
	<-c.Ready()
	_, err := c.PushEvent(context.Background(), server.Event{FeatureSet: "alerts.build", Content: server.TextContent("build 42 failed")})
	fmt.Println(errors.Is(err, server.ErrNotGranted), err)
	// Output:
	// {"accepted":true,"mode":"degraded","unavailableFeatures":[{"featureSet":"alerts.build","missingCapabilities":["pushEvents"],"effect":"disabled"}]}
	// true server: push/event not sent: capability "pushEvents" is not granted
}

// CheckPolicy refuses a policy the server cannot work under; the receipt
// names the consequence.
func ExampleRefusal() {
	s := server.New("injector", "1.0.0", &server.Options{
		Logger:       discard,
		Capabilities: []string{"contextHooks.beforeInference.inject.beforeUser"},
		CheckPolicy: func(ctx context.Context, p server.Policy, r *protocol.PolicyReceipt) error {
			if !p.Has("contextHooks.beforeInference.inject.beforeUser") {
				return &server.Refusal{
					Fallback:            protocol.FallbackMCPOnly,
					MissingCapabilities: []string{"contextHooks.beforeInference.inject.beforeUser"},
					Reason:              "this server only injects context",
				}
			}
			return nil
		},
	})
	host, done := pretendHost(s, nil)
	defer done()
	fmt.Println(grantPolicy(host, "tools"))
	// Output: {"accepted":false,"fallback":"mcp-only","missingCapabilities":["contextHooks.beforeInference.inject.beforeUser"],"reason":"this server only injects context"}
}

func ExampleServer_HandleChannelPublish() {
	s := server.New("room", "1.0.0", &server.Options{Logger: discard, Capabilities: []string{"channels.publish"}})
	s.HandleChannelPublish(func(ctx context.Context, p server.PublishRequest) (string, error) {
		if p.ChannelID != "room:#general" {
			return "", server.ErrUnknownChannel // answered -32023
		}
		fmt.Printf("agent says in %s: %s\n", p.ChannelID, p.Text())
		return "m-1", nil
	})
	host, done := pretendHost(s, nil)
	defer done()
	grantPolicy(host, "channels.publish")
	host.Call(context.Background(), "ping", nil, nil) // the grant applies once the receipt is written
	var res json.RawMessage
	host.Call(context.Background(), protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{
		ChannelID: "room:#general", Content: server.TextContent("Hi all!"),
	}, &res)
	fmt.Println(string(res))
	err := host.Call(context.Background(), protocol.MethodChannelsPublish, protocol.ChannelsPublishParams{ChannelID: "room:#nope"}, nil)
	var ce *wire.CallError
	if errors.As(err, &ce) {
		fmt.Println(ce.Answer.Code)
	}
	// Output:
	// agent says in room:#general: Hi all!
	// {"delivered":true,"messageId":"m-1"}
	// -32023
}

// A chat connector marks a message the agent saw and stays out of: the
// handler advertises channels.acknowledge, and runs once the host grants
// it.
func ExampleServer_HandleChannelAcknowledge() {
	s := server.New("room", "1.0.0", &server.Options{Logger: discard})
	s.HandleChannelAcknowledge(func(ctx context.Context, req server.AcknowledgeRequest) (server.AcknowledgeResult, error) {
		if req.MessageID != "m-7" {
			return server.AcknowledgeResult{Reason: "no such message"}, nil
		}
		fmt.Printf("react %s to %s in %s (%s)\n", req.Value, req.MessageID, req.ChannelID, req.Intent)
		return server.AcknowledgeResult{Acknowledged: true, Representation: req.Value}, nil
	})
	host, done := pretendHost(s, nil)
	defer done()
	grantPolicy(host, "channels.acknowledge")
	host.Call(context.Background(), "ping", nil, nil) // the grant applies once the receipt is written
	for _, id := range []string{"m-7", "m-8"} {
		var res json.RawMessage
		host.Call(context.Background(), protocol.MethodChannelsAcknowledge, map[string]string{
			"channelId": "room:#dev", "messageId": id, "intent": server.AckSeenNotOpening, "value": "👀",
		}, &res)
		fmt.Println(string(res))
	}
	// Output:
	// react 👀 to m-7 in room:#dev (seen-not-opening)
	// {"acknowledged":true,"representation":"👀"}
	// {"acknowledged":false,"reason":"no such message"}
}

// One connection per WebSocket request: mount the Server as an
// http.Handler.
func ExampleServer_ServeHTTP() {
	s := server.New("ws-echo", "1.0.0", &server.Options{Logger: discard})
	server.AddTool(s, server.Tool{Name: "echo"}, func(ctx context.Context, in struct {
		Text string `json:"text"`
	}) (protocol.CallToolResult, error) {
		return server.TextResult(in.Text), nil
	})
	srv := httptest.NewServer(s) // in production: http.Handle("/mcpl", s)
	defer srv.Close()

	ws, err := transport.DialWebSocket(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), transport.WebSocketOptions{Logger: discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	host := wire.NewPeer(ws, wire.Options{Logger: discard})
	defer host.Close()
	var init protocol.InitializeResult
	host.Call(context.Background(), protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: protocol.ProtocolVersion}, &init)
	fmt.Println(init.ServerInfo.Name, string(init.Capabilities.MCPL()))
	var res protocol.CallToolResult
	host.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"over a socket"}`)}, &res)
	fmt.Println(res.Text())
	// Output:
	// ws-echo {"version":"0.5"}
	// over a socket
}
