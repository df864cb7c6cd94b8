package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/advert"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
	"github.com/mcpl-go/mcpl/server"
)

func TestAdvertisement(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts server.Options
		want string
	}{{
		name: "nothing declared: version alone",
		want: `{"version":"0.5"}`,
	}, {
		name: "channels and a feature set, in declared order",
		opts: server.Options{
			Capabilities: []string{"channels.register", "channels.lifecycle", "pushEvents", "channels.incoming", "tools"},
			FeatureSets:  []server.FeatureSet{{Name: "chat.messaging", Description: "chat", Uses: []string{"channels.register", "channels.incoming"}}},
		},
		want: `{"version":"0.5","channels":{"register":true,"lifecycle":true,"incoming":true},"pushEvents":true,` +
			`"featureSets":{"chat.messaging":{"description":"chat","uses":["channels.register","channels.incoming"]}}}`,
	}, {
		name: "a capability with sub-capabilities is an object, never true",
		opts: server.Options{Capabilities: []string{"inferenceRequest"}},
		want: `{"version":"0.5","inferenceRequest":{"streaming":false}}`,
	}, {
		name: "parent and child",
		opts: server.Options{Capabilities: []string{"inferenceRequest.streaming", "inferenceRequest"}},
		want: `{"version":"0.5","inferenceRequest":{"streaming":true}}`,
	}, {
		name: "depth four",
		opts: server.Options{Capabilities: []string{"contextHooks.beforeInference.observe", "contextHooks.beforeInference.inject.afterUser"}},
		want: `{"version":"0.5","contextHooks":{"beforeInference":{"observe":true,"inject":{"afterUser":true}}}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Logger = quiet
			h := start(t, server.New("ad", "1", &tc.opts))
			res := h.initialize()
			if got := string(res.Capabilities.MCPL()); got != tc.want {
				t.Errorf("advertisement:\ngot  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestAdvertisementRoundTrip: every single path, advertised alone (with
// the parent capability a sub-capability needs), reads back through the
// host's parser as exactly that.
func TestAdvertisementRoundTrip(t *testing.T) {
	for _, p := range grant.Vocabulary() {
		if p == "tools" {
			continue
		}
		caps := []string{p}
		if parent := advert.Orphan(p, caps); parent != "" {
			caps = append(caps, parent)
		}
		h := start(t, server.New("ad", "1", &server.Options{Capabilities: caps, Logger: quiet}))
		res := h.initialize()
		ad, err := grant.ParseAdvertisement(res.Capabilities.MCPL(), false)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(caps)
		if !slices.Equal(ad.Capabilities, caps) || len(ad.Ignored) != 0 {
			t.Errorf("%v advertised as %s reads back as %v (ignored %v)", caps, res.Capabilities.MCPL(), ad.Capabilities, ad.Ignored)
		}
	}
}

// TestOrphanCapabilityPanics: a sub-capability declared without its parent
// is a programmer's error New names.
func TestOrphanCapabilityPanics(t *testing.T) {
	defer func() {
		want := `server: capability "inferenceRequest.streaming" needs its parent "inferenceRequest" declared too: the object that advertises it advertises the parent (SPEC §5.1)`
		if v := recover(); fmt.Sprint(v) != want {
			t.Errorf("panic %v, want %s", v, want)
		}
	}()
	server.New("x", "1", &server.Options{Capabilities: []string{"inferenceRequest.streaming"}})
}

func TestInitialize(t *testing.T) {
	s := server.New("init", "2.0.0", &server.Options{Instructions: "Be nice.", Logger: quiet})
	h := start(t, s)
	res := h.initialize()
	if res.ServerInfo == nil || *res.ServerInfo != (protocol.Implementation{Name: "init", Version: "2.0.0"}) ||
		res.ProtocolVersion != protocol.ProtocolVersion || res.Instructions != "Be nice." {
		t.Errorf("initialize = %+v", res)
	}
	if res.Capabilities.Tools != nil {
		t.Errorf("tools capability %s advertised without tools", res.Capabilities.Tools)
	}
	server.AddTool(s, server.Tool{Name: "t"}, func(context.Context, struct{}) (protocol.CallToolResult, error) {
		return server.TextResult(""), nil
	})
	if res := h.initialize(); string(res.Capabilities.Tools) != `{}` {
		t.Errorf("tools capability = %s, want {}", res.Capabilities.Tools)
	}
}

func TestInitializeParamsKept(t *testing.T) {
	s, conns := chatServer(nil)
	h := start(t, s)
	c := recvConn(t, conns)
	if _, ok := c.Initialize(); ok {
		t.Error("Initialize() reports params before initialize")
	}
	h.initialize()
	if p, ok := c.Initialize(); !ok || p.ClientInfo.Name != "test-host" {
		t.Errorf("Initialize() = %+v, %v", p, ok)
	}
}

func TestNewPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts server.Options
		want string
	}{
		{"unknown capability", server.Options{Capabilities: []string{"channel.register"}}, `"channel.register" is not a path`},
		{"parent path", server.Options{Capabilities: []string{"channels"}}, `"channels" is not a path`},
		{"unnamed set", server.Options{FeatureSets: []server.FeatureSet{{Description: "d", Uses: []string{"tools"}}}}, "no name"},
		{"twice", server.Options{FeatureSets: []server.FeatureSet{{Name: "a", Description: "d", Uses: []string{"tools"}}, {Name: "a", Description: "d", Uses: []string{"tools"}}}}, "twice"},
		{"no description", server.Options{FeatureSets: []server.FeatureSet{{Name: "a", Uses: []string{"tools"}}}}, "no description"},
		{"no uses", server.Options{FeatureSets: []server.FeatureSet{{Name: "a", Description: "d"}}}, "no uses"},
		{"bad uses", server.Options{FeatureSets: []server.FeatureSet{{Name: "a", Description: "d", Uses: []string{"channels.*"}}}}, `uses "channels.*"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				v := recover()
				err, _ := v.(error)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("panic %v, want one containing %q", v, tc.want)
				}
			}()
			server.New("x", "1", &tc.opts)
		})
	}
}

func TestServeReturns(t *testing.T) {
	t.Run("host closes: nil", func(t *testing.T) {
		h := start(t, server.New("x", "1", &server.Options{Logger: quiet}))
		h.initialize()
		h.peer.Close()
		if err := <-h.served; err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		h.served <- nil
	})
	t.Run("ctx ends: its error", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		h := startCtx(t, ctx, server.New("x", "1", &server.Options{Logger: quiet}))
		h.initialize()
		cancel()
		if err := <-h.served; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
		h.served <- nil
		waitClosed(t, h.peer.Done(), "the host seeing the close")
	})
	t.Run("Server.Close: ErrServerClosed, now and later", func(t *testing.T) {
		s := server.New("x", "1", &server.Options{Logger: quiet})
		h := start(t, s)
		h.initialize()
		s.Close()
		if err := <-h.served; !errors.Is(err, server.ErrServerClosed) {
			t.Errorf("Serve = %v, want ErrServerClosed", err)
		}
		h.served <- nil
		a, b := transport.Pipe(0)
		defer a.Close()
		if err := server.ServeStream(s, context.Background(), b); !errors.Is(err, server.ErrServerClosed) {
			t.Errorf("Serve after Close = %v, want ErrServerClosed", err)
		}
	})
	t.Run("Conn.Close from a handler: nil", func(t *testing.T) {
		s := server.New("x", "1", &server.Options{Logger: quiet})
		server.AddTool(s, server.Tool{Name: "quit"}, func(ctx context.Context, _ struct{}) (protocol.CallToolResult, error) {
			c, _ := server.ConnFromContext(ctx)
			c.Close()
			return server.TextResult("bye"), nil
		})
		h := start(t, s)
		h.initialize()
		h.peer.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "quit"}, nil)
		if err := <-h.served; err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		h.served <- nil
	})
}

func TestOnConnectLifetime(t *testing.T) {
	returned := make(chan struct{})
	s := server.New("x", "1", &server.Options{Logger: quiet, OnConnect: func(ctx context.Context, c *server.Conn) {
		if got, ok := server.ConnFromContext(ctx); !ok || got != c {
			t.Error("OnConnect's ctx does not carry its Conn")
		}
		<-ctx.Done()
		close(returned)
	}})
	h := start(t, s)
	h.initialize()
	h.peer.Close()
	err := <-h.served
	h.served <- err
	if !closed(returned) {
		t.Error("Serve returned before OnConnect did")
	}
}

// TestServeStdioBody runs ServeStdio's body over pipes: it answers, and
// returns nil when its input closes.
func TestServeStdioBody(t *testing.T) {
	s := server.New("stdio", "1", &server.Options{Logger: quiet})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- server.ServeIO(s, context.Background(), inR, outW); outW.Close() }()

	go inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"))
	buf := make([]byte, 256)
	n, err := outR.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n" {
		t.Errorf("answer = %q", got)
	}
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil at end of input", err)
		}
	case <-time.After(waitFor):
		t.Fatal("ServeStdio did not return when its input closed")
	}
	io.Copy(io.Discard, outR)
}

// TestServeStdioCancel: ending ctx ends the connection even though the
// read of the input cannot be interrupted.
func TestServeStdioCancel(t *testing.T) {
	s := server.New("stdio", "1", &server.Options{Logger: quiet})
	inR, inW := io.Pipe()
	defer inW.Close() // releases the copy still blocked reading
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.ServeIO(s, ctx, inR, io.Discard) }()
	cancel()
	select {
	case err := <-served:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
	case <-time.After(waitFor):
		t.Fatal("ServeStdio did not return when ctx ended")
	}
}

func TestServeHTTP(t *testing.T) {
	s, conns := chatServer(nil)
	server.AddTool(s, server.Tool{Name: "echo"}, func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (protocol.CallToolResult, error) {
		return server.TextResult(in.Text), nil
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	for i := range 2 { // one connection per request, one after another
		ws, err := transport.DialWebSocket(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), transport.WebSocketOptions{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		peer := wire.NewPeer(ws, wire.Options{Name: "server", Logger: quiet, Timeout: waitFor})
		var res protocol.InitializeResult
		if err := peer.Call(context.Background(), protocol.MethodInitialize, protocol.InitializeParams{}, &res); err != nil {
			t.Fatal(err)
		}
		c := recvConn(t, conns)
		var rec json.RawMessage
		if err := peer.Call(context.Background(), protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{EffectiveCapabilities: allCaps}, &rec); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c.Ready(), "Ready over WebSocket")
		var out protocol.CallToolResult
		if err := peer.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"over ws"}`)}, &out); err != nil {
			t.Fatal(err)
		}
		if out.Text() != "over ws" {
			t.Errorf("connection %d: echo = %q", i, out.Text())
		}
		peer.Close()
	}
}
