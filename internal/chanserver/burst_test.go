package chanserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/chanserver"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// incomingHost is the host side of a connection to the server that
// answers channels/incoming as its answer func says, holding the answers
// until the test's release says to give them: so a test sees how many of
// the server's requests are out at once.
type incomingHost struct {
	peer *wire.Peer

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when a request comes
	ids      []string      // the messages' ids, in arrival order
	held     []heldIncoming
	maxOut   int // the most requests unanswered at once
	accepted func(id string) bool
}

type heldIncoming struct {
	id    string
	reply func(any, error)
}

// startIncoming serves the server on an in-memory pipe, with a host that
// answers channels/register and channels/incoming.
func startIncoming(t *testing.T, cfg chanserver.Config) *incomingHost {
	t.Helper()
	h := &incomingHost{changed: make(chan struct{}), accepted: func(string) bool { return true }}
	serverEnd, hostEnd := transport.Pipe(0)
	served := make(chan struct{})
	go func() {
		chanserver.Serve(serverEnd, cfg)
		close(served)
	}()
	mux := wire.NewMux()
	mux.HandleFunc(protocol.MethodChannelsRegister, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsRegisterParams
		json.Unmarshal(req.Params, &p)
		var res []map[string]any
		for _, c := range p.Channels {
			res = append(res, map[string]any{"id": c.ID, "accepted": true})
		}
		return map[string]any{"results": res}, nil
	})
	mux.HandleFunc(protocol.MethodChannelsIncoming, func(_ context.Context, req *wire.Request) (any, error) {
		var p protocol.ChannelsIncomingParams
		json.Unmarshal(req.Params, &p)
		id := ""
		if len(p.Messages) == 1 {
			id = p.Messages[0].MessageID
		}
		h.mu.Lock()
		h.ids = append(h.ids, id)
		h.held = append(h.held, heldIncoming{id, req.Defer()})
		h.maxOut = max(h.maxOut, len(h.held))
		close(h.changed)
		h.changed = make(chan struct{})
		h.mu.Unlock()
		return nil, nil
	})
	h.peer = wire.NewPeer(hostEnd, wire.Options{Name: "chanserver", Handler: mux, Logger: quietLog})
	t.Cleanup(func() {
		h.peer.Close()
		select {
		case <-served:
		case <-time.After(waitFor):
			t.Error("Serve did not return after the connection closed")
		}
	})
	return h
}

// waitHeld waits until n requests are unanswered.
func (h *incomingHost) waitHeld(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		h.mu.Lock()
		got, ch := len(h.held), h.changed
		h.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d requests unanswered after %s, want %d", got, waitFor, n)
		}
	}
}

// answerAll answers every request held, in order.
func (h *incomingHost) answerAll() {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	for _, m := range held {
		h.mu.Lock()
		ok := h.accepted(m.id)
		h.mu.Unlock()
		r := protocol.IncomingResult{MessageID: m.id, Accepted: ok}
		if !ok {
			r.Reason = "not-wanted"
		}
		m.reply(protocol.ChannelsIncomingResult{Results: []protocol.IncomingResult{r}}, nil)
	}
}

// TestIncomingBurst: a burst's requests arrive in the order of their ids,
// with as many out at once as inflight allows and no more, and the answer
// counts what the host accepted.
func TestIncomingBurst(t *testing.T) {
	h := startIncoming(t, chanserver.Config{})
	h.accepted = func(id string) bool { return id != "p-7" }
	done := make(chan string, 1)
	go func() {
		var res protocol.CallToolResult
		err := h.peer.Call(context.Background(), protocol.MethodToolsCall, protocol.CallToolParams{Name: "incoming_burst",
			Arguments: json.RawMessage(`{"channelId":"c","count":40,"inflight":16,"prefix":"p","size":20}`)}, &res)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- res.Text()
	}()
	// The host answers only once 16 are out: a 17th before that would be
	// past inflight.
	for range 2 {
		h.waitHeld(t, 16)
		h.answerAll()
	}
	h.waitHeld(t, 8)
	h.answerAll()
	var got string
	select {
	case got = <-done:
	case <-time.After(waitFor):
		t.Fatal("incoming_burst did not answer")
	}
	jsonEq(t, "incoming_burst", got, `{"sent":40,"accepted":39,"notAccepted":[{"messageId":"p-7","why":"not-wanted"}],"failed":[],"notAcceptedCount":1,"failedCount":0}`)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, id := range h.ids {
		if want := chanserver.BurstMessageID("p", i+1); id != want {
			t.Fatalf("request %d carried %q, want %q; all: %v", i+1, id, want, h.ids)
		}
	}
	if len(h.ids) != 40 || h.maxOut != 16 {
		t.Errorf("%d requests, at most %d out at once; want 40 and 16", len(h.ids), h.maxOut)
	}
	if got, want := chanserver.BurstText("p", 3, 20), "p-3 xxxxxxxxxxxxxxxx"; got != want || len(got) != 20 {
		t.Errorf("BurstText = %q, want %q", got, want)
	}
}

// TestControl: with Config.Control, the control file appears once the
// startup registration is answered, and the tools answer over HTTP on
// 127.0.0.1 as they do over the connection; -no-lifecycle's
// advertisement leaves channels.lifecycle out.
func TestControl(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.json")
	h := startIncoming(t, chanserver.Config{NoLifecycle: true, Control: path,
		Channels: []protocol.ChannelDescriptor{{ID: "a", Type: "chat", Label: "#a"}}})
	var init protocol.InitializeResult
	if err := h.peer.Call(t.Context(), protocol.MethodInitialize, map[string]any{}, &init); err != nil {
		t.Fatal(err)
	}
	ad, err := grant.ParseAdvertisement(init.Capabilities.MCPL(), init.Capabilities.Tools != nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ad.Capabilities {
		if strings.HasPrefix(c, "channels.lifecycle") {
			t.Errorf("advertised %s under NoLifecycle", c)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the control file is there before the policy: %v", err)
	}
	var receipt protocol.PolicyReceipt
	if err := h.peer.Call(t.Context(), protocol.MethodFeatureSetsUpdate, protocol.FeatureSetsUpdateParams{}, &receipt); err != nil || !receipt.Accepted {
		t.Fatalf("policy: %+v, %v", receipt, err)
	}
	cf := awaitControl(t, path)
	if !strings.HasPrefix(cf.URL, "http://127.0.0.1:") || cf.Pid != os.Getpid() {
		t.Errorf("control file %+v", cf)
	}
	for _, tc := range []struct {
		tool, args string
		want       chanserver.ControlAnswer
	}{
		{"script", `{"channelId":"a","publish":"refuse"}`, chanserver.ControlAnswer{Text: `"scripted"`}},
		{"release", `{"channelId":"a","method":"open"}`, chanserver.ControlAnswer{Text: "nothing held: open a", IsError: true}},
		{"nope", `{}`, chanserver.ControlAnswer{}}, // a JSON-RPC error: HTTP 500
	} {
		resp, err := http.Post(cf.URL+"/tools/"+tc.tool, "application/json", strings.NewReader(tc.args))
		if err != nil {
			t.Fatal(err)
		}
		var got chanserver.ControlAnswer
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if tc.tool == "nope" {
			if resp.StatusCode != http.StatusInternalServerError {
				t.Errorf("an unknown tool answered HTTP %d", resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || got != tc.want {
			t.Errorf("%s: HTTP %d %+v, want %+v", tc.tool, resp.StatusCode, got, tc.want)
		}
	}
}

// awaitControl waits for the control file (polling: a file appearing has
// no event) and reads it.
func awaitControl(t *testing.T, path string) chanserver.ControlFile {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			var cf chanserver.ControlFile
			if err := json.Unmarshal(b, &cf); err != nil {
				t.Fatalf("control file %q: %v", b, err)
			}
			return cf
		}
		if time.Now().After(deadline) {
			t.Fatalf("no control file at %s within %s", path, waitFor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
