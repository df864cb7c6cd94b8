package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpl-go/mcpl/internal/advert"
	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// corpusPeer is the MCPL server of the coalescing corpus: a WebSocket
// server on 127.0.0.1 that the host dials, sending the corpus's wire
// requests as they are written (method and params unmodified) and
// answering push/render by the plan a step set. It outlives the hosts of
// a scenario (a restart dials it again), and can refuse connections for a
// while (disconnect).
type corpusPeer struct {
	t   *testing.T
	srv *httptest.Server
	ad  json.RawMessage // its experimental.mcpl

	mu       sync.Mutex
	conn     *wire.Peer    // the current connection; nil between
	ready    chan struct{} // closed when a connection's policy is answered
	refusing bool          // disconnected: upgrades are refused
	plan     renderPlan
	renders  []*peerRender
	rendered chan struct{} // signalled at each push/render received
	held     []chan string // renders held, waiting for releaseRender
	channels []string      // registered, and so registered again on each connection
}

// registerParams are channels/register's for chat channels ids.
func registerParams(ids ...string) json.RawMessage {
	var chans []map[string]string
	for _, id := range ids {
		chans = append(chans, map[string]string{"id": id, "type": "chat", "label": "#" + id})
	}
	b, _ := json.Marshal(map[string]any{"channels": chans})
	return b
}

// register registers channel id, now and on every later connection.
func (p *corpusPeer) register(t *testing.T, id string) map[string]any {
	p.mu.Lock()
	p.channels = append(p.channels, id)
	p.mu.Unlock()
	return p.call(t, protocol.MethodChannelsRegister, registerParams(id))
}

// renderPlan is how push/render is answered: mode immediate, empty, held,
// error, inference-request or notice-summary; text the content.
type renderPlan struct {
	Mode string `json:"mode"`
	Text string `json:"text"`
}

// peerRender is one push/render the peer received.
type peerRender struct {
	Params            json.RawMessage `json:"params"`
	InferenceResponse json.RawMessage `json:"inferenceResponse,omitempty"`
}

func newCorpusPeer(t *testing.T, ad json.RawMessage) *corpusPeer {
	p := &corpusPeer{t: t, ad: ad, ready: make(chan struct{}), rendered: make(chan struct{}, 1024), plan: renderPlan{Mode: "immediate", Text: "RENDERED"}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.mu.Lock()
		for _, h := range p.held {
			close(h)
		}
		p.held = nil
		c := p.conn
		p.mu.Unlock()
		if c != nil {
			c.Close()
		}
		p.srv.Close()
	})
	return p
}

// url is what the host's config dials.
func (p *corpusPeer) url() string { return "ws" + p.srv.URL[len("http"):] + "/mcpl" }

func (p *corpusPeer) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	refusing := p.refusing
	p.mu.Unlock()
	if refusing {
		http.Error(w, "the corpus peer is disconnected", http.StatusServiceUnavailable)
		return
	}
	ws, err := transport.AcceptWebSocket(w, r, transport.WebSocketOptions{})
	if err != nil {
		return
	}
	peer := wire.NewPeer(ws, wire.Options{Name: "host", Handler: wire.HandlerFunc(p.handle)})
	p.mu.Lock()
	old := p.conn
	p.conn = peer
	p.mu.Unlock()
	if old != nil {
		old.Close()
	}
	<-peer.Done()
	p.mu.Lock()
	if p.conn == peer {
		p.conn = nil
		p.ready = make(chan struct{})
	}
	p.mu.Unlock()
}

// corpusAdvertisement is the corpus server's experimental.mcpl: push
// events, channels it registers and their messages, inference requests,
// and feature sets doc and other.
func corpusAdvertisement() json.RawMessage {
	fs := json.RawMessage(`{"doc":{"description":"the corpus's documents","uses":["pushEvents","inferenceRequest"]},` +
		`"other":{"description":"the corpus's other feature set","uses":["pushEvents"]}}`)
	return advert.Marshal(protocol.MCPLVersion05, []string{"pushEvents", "inferenceRequest", "channels.register", "channels.incoming"}, fs)
}

// otherAdvertisement is a second corpus server's: the corpus server's,
// but for inference requests, which this host routes for editor alone.
func otherAdvertisement() json.RawMessage {
	fs := json.RawMessage(`{"doc":{"description":"the other server's documents","uses":["pushEvents"]}}`)
	return advert.Marshal(protocol.MCPLVersion05, []string{"pushEvents", "channels.register", "channels.incoming"}, fs)
}

// probeAdvertisement is the adapter's control server's: push events in
// feature set doc.
func probeAdvertisement() json.RawMessage {
	return advert.Marshal(protocol.MCPLVersion05, []string{"pushEvents"}, json.RawMessage(`{"doc":{"description":"the adapter's controls","uses":["pushEvents"]}}`))
}

func (p *corpusPeer) handle(ctx context.Context, req *wire.Request) (any, error) {
	switch req.Method {
	case protocol.MethodInitialize:
		return map[string]any{
			"protocolVersion": protocol.ProtocolVersion,
			"serverInfo":      protocol.Implementation{Name: "corpus", Version: "1"},
			"capabilities":    map[string]any{"experimental": map[string]json.RawMessage{"mcpl": p.ad}},
		}, nil
	case protocol.MethodInitialized:
		return nil, nil
	case protocol.MethodFeatureSetsUpdate:
		p.mu.Lock()
		ready := p.ready
		p.mu.Unlock()
		reply := req.Defer()
		reply(protocol.PolicyReceipt{Accepted: true}, nil)
		// A server registers its channels on every connection (SPEC
		// §14): the ones registered before are registered again, then
		// the connection is ready.
		p.mu.Lock()
		chans, conn := slices.Clone(p.channels), p.conn
		p.mu.Unlock()
		go func() {
			if len(chans) > 0 && conn != nil {
				var res json.RawMessage
				conn.Call(context.Background(), protocol.MethodChannelsRegister, registerParams(chans...), &res, wire.WithTimeout(10*time.Second))
			}
			select {
			case <-ready:
			default:
				close(ready)
			}
		}()
		return nil, nil
	case protocol.MethodChannelsList:
		return protocol.ChannelsListResult{}, nil
	case protocol.MethodPushRender:
		return p.render(ctx, req)
	case protocol.MethodToolsList:
		return map[string]any{"tools": []any{}}, nil
	}
	return nil, wire.ErrMethodNotFound
}

func (p *corpusPeer) render(ctx context.Context, req *wire.Request) (any, error) {
	p.mu.Lock()
	plan := p.plan
	rec := &peerRender{Params: append(json.RawMessage(nil), req.Params...)}
	p.renders = append(p.renders, rec)
	var held chan string
	if plan.Mode == "held" {
		held = make(chan string, 1)
		p.held = append(p.held, held)
	}
	conn := p.conn
	p.mu.Unlock()
	p.rendered <- struct{}{}
	text := plan.Text
	switch plan.Mode {
	case "empty":
		return protocol.PushRenderResult{Content: []json.RawMessage{}}, nil
	case "error":
		return nil, &protocol.Error{Code: -32000, Message: "the corpus peer fails this render, as planned"}
	case "held":
		reply := req.Defer()
		go func() {
			t, ok := <-held
			if !ok {
				reply(nil, &protocol.Error{Code: -32000, Message: "never released"})
				return
			}
			reply(protocol.PushRenderResult{Content: textContent(t)}, nil)
		}()
		return nil, nil
	case "inference-request":
		var res json.RawMessage
		err := conn.Call(ctx, protocol.MethodInferenceRequest, json.RawMessage(`{"featureSet":"doc","messages":[{"role":"user","content":{"type":"text","text":"render me"}}],"maxTokens":16}`), &res, wire.WithTimeout(10*time.Second))
		resp := map[string]any{"result": res}
		var ce *wire.CallError
		if errors.As(err, &ce) && ce.Answer != nil {
			resp = map[string]any{"error": map[string]any{"code": ce.Answer.Code, "message": ce.Answer.Message}}
		} else if err != nil {
			resp = map[string]any{"error": map[string]any{"code": 0, "message": err.Error()}}
		}
		b, _ := json.Marshal(resp)
		p.mu.Lock()
		rec.InferenceResponse = b
		p.mu.Unlock()
	case "notice-summary":
		var params protocol.PushRenderParams
		json.Unmarshal(req.Params, &params)
		text = fmt.Sprintf("%s (%d notices, %d dropped)", plan.Text, len(params.Notices), params.Dropped)
	}
	return protocol.PushRenderResult{Content: textContent(text)}, nil
}

func textContent(text string) []json.RawMessage {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	return []json.RawMessage{b}
}

// waitReady waits for a connection whose policy is answered.
func (p *corpusPeer) waitReady(t *testing.T) *wire.Peer {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		ready, conn := p.ready, p.conn
		p.mu.Unlock()
		select {
		case <-ready:
			if conn != nil {
				return conn
			}
		case <-deadline:
			t.Fatal("the host did not connect to the corpus peer within 30s")
		}
		select {
		case <-ready:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// call sends one request as the corpus wrote it, and returns the reply as
// the corpus reads it: {"result": …} or {"error": {code, message, data}}.
func (p *corpusPeer) call(t *testing.T, method string, params json.RawMessage) map[string]any {
	t.Helper()
	conn := p.waitReady(t)
	var res json.RawMessage
	err := conn.Call(context.Background(), method, params, &res, wire.WithTimeout(30*time.Second))
	var ce *wire.CallError
	switch {
	case errors.As(err, &ce) && ce.Answer != nil:
		e := map[string]any{"code": float64(ce.Answer.Code), "message": ce.Answer.Message}
		if len(ce.Answer.Data) > 0 {
			var data any
			json.Unmarshal(ce.Answer.Data, &data)
			e["data"] = data
		}
		return map[string]any{"error": e}
	case err != nil:
		t.Fatalf("%s: %v", method, err)
	}
	var v any
	if err := json.Unmarshal(res, &v); err != nil {
		t.Fatalf("%s answered %s: %v", method, res, err)
	}
	return map[string]any{"result": v}
}

// disconnect drops the connection and refuses the host's redials until
// reconnect.
func (p *corpusPeer) disconnect() {
	p.mu.Lock()
	p.refusing = true
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.Close()
		<-c.Done()
	}
}

func (p *corpusPeer) reconnect() {
	p.mu.Lock()
	p.refusing = false
	p.mu.Unlock()
}

func (p *corpusPeer) setPlan(pl renderPlan) {
	p.mu.Lock()
	p.plan = pl
	p.mu.Unlock()
}

// release answers the oldest held render with text.
func (p *corpusPeer) release(t *testing.T, text string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.held) == 0 {
		t.Fatal("releaseRender with no render held")
	}
	p.held[0] <- text
	p.held = p.held[1:]
}

// waitRenders waits until n push/renders have come.
func (p *corpusPeer) waitRenders(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		got := len(p.renders)
		p.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-p.rendered:
		case <-deadline:
			t.Fatalf("%d push/renders came within 30s, want %d", got, n)
		}
	}
}

// rendersSeen is every push/render so far, as the corpus reads them.
func (p *corpusPeer) rendersSeen() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]any, len(p.renders))
	for i, r := range p.renders {
		b, _ := json.Marshal(r)
		var v any
		json.Unmarshal(b, &v)
		out[i] = v
	}
	return out
}
