package chanserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// TestRegisterBig: register_big sends one descriptor a request, each of
// exactly the size asked, and answers the host's itemized results in order.
func TestRegisterBig(t *testing.T) {
	serverEnd, hostEnd := transport.Pipe(0)
	served := make(chan struct{})
	go func() {
		chanserver.Serve(serverEnd, chanserver.Config{})
		close(served)
	}()
	var (
		mu    sync.Mutex
		sizes []int
	)
	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodChannelsRegister, func(_ context.Context, req *wire.Request) (any, error) {
		var p struct {
			Channels []json.RawMessage `json:"channels"`
		}
		json.Unmarshal(req.Params, &p)
		var res protocol.ChannelResults
		for _, raw := range p.Channels {
			var d protocol.ChannelDescriptor
			json.Unmarshal(raw, &d)
			mu.Lock()
			sizes = append(sizes, len(raw))
			n := len(sizes)
			mu.Unlock()
			r := protocol.ChannelResult{ID: d.ID, Accepted: n != 2}
			if !r.Accepted {
				r.Reason = fmt.Sprintf("%d bytes, label %q", len(raw), d.Label)
			}
			res.Results = append(res.Results, r)
		}
		return res, nil
	})
	peer := wire.NewPeer(hostEnd, wire.Options{Name: "chanserver", Handler: mux, Logger: quietLog})
	t.Cleanup(func() {
		peer.Close()
		select {
		case <-served:
		case <-time.After(waitFor):
			t.Error("Serve did not return after the connection closed")
		}
	})
	var res protocol.CallToolResult
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := peer.Call(ctx, protocol.MethodToolsCall, protocol.CallToolParams{Name: "register_big", Arguments: json.RawMessage(`{"count":3,"size":5000,"prefix":"q"}`)}, &res); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, "register_big", res.Text(), `{"sent":3,"results":[{"id":"q-1","accepted":true},{"id":"q-2","accepted":false,"reason":"5000 bytes, label \"big 2\""},{"id":"q-3","accepted":true}],"failed":[]}`)
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(sizes) != "[5000 5000 5000]" {
		t.Errorf("descriptor sizes %v, want three of 5000 bytes", sizes)
	}
}
