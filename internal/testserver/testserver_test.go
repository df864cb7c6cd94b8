package testserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/testserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveInProcess runs the test server over an in-memory pipe and returns a
// peer talking to it.
func serveInProcess(t *testing.T, cfg testserver.Config) *wire.Peer {
	t.Helper()
	host, srv := transport.Pipe(0)
	exited := make(chan int, 1)
	cfg.Exit = func(code int) { exited <- code; srv.Close() }
	done := make(chan struct{})
	go func() {
		defer close(done)
		testserver.Serve(srv, cfg)
	}()
	p := wire.NewPeer(host, wire.Options{Name: "ts", Logger: slog.New(slog.DiscardHandler), Timeout: 10 * time.Second})
	t.Cleanup(func() {
		p.Close()
		<-done
	})
	return p
}

func TestToolsListPages(t *testing.T) {
	p := serveInProcess(t, testserver.Config{PageSize: 3})
	ctx := context.Background()
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > len(testserver.Tools) {
			t.Fatal("paging does not end")
		}
		var page protocol.ListToolsResult
		if err := p.Call(ctx, protocol.MethodToolsList, protocol.ListToolsParams{Cursor: cursor}, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Tools) > 3 {
			t.Fatalf("page of %d tools, want at most 3", len(page.Tools))
		}
		for _, tool := range page.Tools {
			names = append(names, tool.Name)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(names) != len(testserver.Tools) || names[0] != "echo" || names[len(names)-1] != testserver.Tools[len(testserver.Tools)-1].Name {
		t.Fatalf("listed %v", names)
	}
}

func TestInitializeShapes(t *testing.T) {
	ctx := context.Background()
	p := serveInProcess(t, testserver.Config{MCPL: json.RawMessage(`{"version":"0.4"}`)})
	var res protocol.InitializeResult
	if err := p.Call(ctx, protocol.MethodInitialize, protocol.InitializeParams{}, &res); err != nil {
		t.Fatal(err)
	}
	if res.ServerInfo == nil || res.ServerInfo.Name != "testserver" || string(res.Capabilities.MCPL()) != `{"version":"0.4"}` {
		t.Fatalf("initialize = %+v", res)
	}

	bare := serveInProcess(t, testserver.Config{NoServerInfo: true})
	var raw map[string]json.RawMessage
	if err := bare.Call(ctx, protocol.MethodInitialize, protocol.InitializeParams{}, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["serverInfo"]; ok {
		t.Errorf("serverInfo present with NoServerInfo: %s", raw["serverInfo"])
	}
	if _, ok := raw["protocolVersion"]; ok {
		t.Errorf("protocolVersion present with NoServerInfo")
	}
}

func TestToolBehaviours(t *testing.T) {
	ctx := context.Background()
	p := serveInProcess(t, testserver.Config{})
	call := func(name, args string, opts ...wire.CallOption) (protocol.CallToolResult, error) {
		var res protocol.CallToolResult
		err := p.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: name, Arguments: json.RawMessage(args)}, &res, opts...)
		return res, err
	}
	if res, err := call("echo", `{"text":"hi"}`); err != nil || res.Text() != "hi" {
		t.Fatalf("echo = %q, %v", res.Text(), err)
	}
	_, err := call("fail", `{"message":"nope","code":-32042}`)
	var ce *wire.CallError
	if !errorsAs(err, &ce) || ce.Outcome != wire.ErrorResponse || ce.Answer.Code != -32042 || ce.Answer.Message != "nope" {
		t.Fatalf("fail = %#v", err)
	}
	if res, err := call("tool_error", `{"text":"bad"}`); err != nil || !res.IsError || res.Text() != "bad" {
		t.Fatalf("tool_error = %+v, %v", res, err)
	}
	if res, err := call("sleep", `{"ms":1,"text":"late"}`); err != nil || res.Text() != "late" {
		t.Fatalf("sleep = %q, %v", res.Text(), err)
	}
	if _, err := call("hang", `{}`, wire.WithTimeout(100*time.Millisecond)); !errorsAs(err, &ce) || ce.Cause != wire.CauseDeadline {
		t.Fatalf("hang = %v, want its deadline to pass", err)
	}
	// Six requests so far, this one included.
	if res, err := call("count", `{}`); err != nil || res.Text() != "6" {
		t.Fatalf("count = %q, %v", res.Text(), err)
	}
}

func errorsAs(err error, target **wire.CallError) bool {
	ce, ok := err.(*wire.CallError)
	if ok {
		*target = ce
	}
	return ok
}
