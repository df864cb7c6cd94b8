package testserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// The 2026-07-28 (stateless) server, for Config.Modern "only" or "dual".
// It answers server/discover (versions, capabilities, serverInfo in _meta,
// cache hints), subscriptions/listen (acknowledged, held open), tools/list
// with cache hints, and tools/call; every request must carry
// _meta.protocolVersion 2026-07-28 or it is refused with -32022. As "only"
// it answers initialize -32601; as "dual" it serves initialize (and what
// follows) as the legacy test server does, and lists 2025-11-25 in
// discover too.
//
// Its tools:
//
//	plain {}          answers "plain"
//	op {}             declares outputSchema {value: integer}, answers {value: "not an integer"}
//	good {}           declares the same outputSchema, answers {value: 42}
//	err {}            answers a JSON-RPC error
//	touch {}          adds the tool "extra" and announces a list change on the open subscription
//	noise {}          writes lines that are not JSON-RPC messages, then answers
//	cont {}           a first leg of input_required with requestState only; the second answers "leg 2 done (<state>)"
//	ask {}            input_required asking elicitation/create (which the host never declares)
//	loop {}           input_required with a new requestState every time
//	extra {}          present after touch; answers "extra"
//	meta {}           answers the request's _meta, as JSON (not listed)
//	resources {}      answers an embedded text resource, an embedded blob and a resource link (not listed)

// ModernTools lists the 2026-07-28 tools before touch adds extra.
var ModernTools = []string{"plain", "op", "good", "err", "touch", "noise", "cont", "ask", "loop"}

var valueSchema = json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`)

type modernState struct {
	mu      sync.Mutex
	sub     json.RawMessage // the open listen's id
	extra   bool
	listens int
}

func (srv *Server) modernServe(ctx context.Context, req *wire.Request) (any, bool, error) {
	if srv.cfg.Modern == "" {
		return nil, false, nil
	}
	if req.Method == protocol.MethodInitialize || req.Method == protocol.MethodInitialized {
		if srv.cfg.Modern == "dual" {
			return nil, false, nil
		}
		if req.IsNotification() {
			return nil, true, nil
		}
		return nil, true, &protocol.Error{Code: protocol.CodeMethodNotFound, Message: "Method not found: initialize (this server speaks MCP 2026-07-28 only)",
			Data: json.RawMessage(`{"supported":["2026-07-28"]}`)}
	}
	var p struct {
		Meta         map[string]json.RawMessage `json:"_meta"`
		Name         string                     `json:"name"`
		RequestState *string                    `json:"requestState"`
	}
	_ = json.Unmarshal(req.Params, &p)
	var v string
	_ = json.Unmarshal(p.Meta[protocol.MetaProtocolVersion], &v)
	if v == "" && srv.cfg.Modern == "dual" {
		return nil, false, nil // a legacy request on a dual server
	}
	if req.IsNotification() {
		return nil, true, nil
	}
	if v != protocol.Version20260728 {
		data, _ := json.Marshal(protocol.UnsupportedVersionData{Supported: srv.modernVersions(), Requested: v})
		return nil, true, &protocol.Error{Code: protocol.CodeUnsupportedProtocolVers, Message: "Unsupported protocol version", Data: data}
	}
	st := &srv.modern
	switch req.Method {
	case protocol.MethodDiscover:
		caps := map[string]any{"tools": map[string]any{"listChanged": true}}
		if len(srv.cfg.MCPL) > 0 {
			caps["experimental"] = map[string]json.RawMessage{"mcpl": srv.cfg.MCPL}
		}
		return complete(map[string]any{
			"supportedVersions": srv.modernVersions(),
			"capabilities":      caps,
			"ttlMs":             60000,
			"cacheScope":        "private",
			"_meta":             map[string]any{protocol.MetaServerInfo: protocol.Implementation{Name: srv.cfg.Name, Version: "2.0.0"}},
		}), true, nil
	case protocol.MethodSubscriptionsListen:
		st.mu.Lock()
		st.listens++
		n := st.listens
		if !(srv.cfg.ListenFailFirst && n == 1) {
			st.sub = append(json.RawMessage(nil), req.ID()...)
		}
		st.mu.Unlock()
		if srv.cfg.ListenFailFirst && n == 1 {
			return nil, true, &protocol.Error{Code: protocol.CodeInternalError, Message: "first listen unavailable"}
		}
		srv.notify(ctx, protocol.MethodSubscriptionsAcked, map[string]any{
			"notifications": map[string]bool{"toolsListChanged": true},
			"_meta":         map[string]json.RawMessage{protocol.MetaSubscriptionID: req.ID()},
		})
		res, err := neverAnswer(ctx, req)
		return res, true, err
	case protocol.MethodToolsList:
		tools := []map[string]any{}
		st.mu.Lock()
		names := ModernTools
		if st.extra {
			names = append(names[:len(names):len(names)], "extra")
		}
		st.mu.Unlock()
		for _, n := range names {
			t := map[string]any{"name": n, "description": "The " + n + " tool.", "inputSchema": map[string]any{"type": "object"}}
			if n == "op" || n == "good" {
				t["outputSchema"] = valueSchema
			}
			if n == "plain" {
				t["annotations"] = map[string]any{"readOnlyHint": true, "title": "Plain"}
			}
			tools = append(tools, t)
		}
		return complete(map[string]any{"tools": tools, "ttlMs": 60000, "cacheScope": "private"}), true, nil
	case protocol.MethodToolsCall:
		if p.Name == "meta" {
			b, _ := json.Marshal(p.Meta)
			return complete(map[string]any{"content": []protocol.TextContent{{Type: "text", Text: string(b)}}}), true, nil
		}
		res, err := srv.modernCall(ctx, p.Name, p.RequestState)
		return res, true, err
	}
	return nil, true, wire.ErrMethodNotFound
}

func (srv *Server) modernVersions() []string {
	if srv.cfg.Modern == "dual" {
		return []string{protocol.Version20260728, protocol.Version20251125}
	}
	return []string{protocol.Version20260728}
}

func (srv *Server) modernCall(ctx context.Context, name string, state *string) (any, error) {
	st := &srv.modern
	text := func(s string) any {
		return complete(map[string]any{"content": []protocol.TextContent{{Type: "text", Text: s}}})
	}
	switch name {
	case "plain":
		return text("plain"), nil
	case "op":
		return complete(map[string]any{"content": []any{}, "structuredContent": map[string]any{"value": "not an integer"}}), nil
	case "good":
		return complete(map[string]any{"content": []protocol.TextContent{{Type: "text", Text: `{"value":42}`}}, "structuredContent": map[string]any{"value": 42}}), nil
	case "err":
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "boom", Data: json.RawMessage(`{"why":"on purpose"}`)}
	case "touch":
		st.mu.Lock()
		st.extra = true
		sub := st.sub
		st.mu.Unlock()
		if sub == nil {
			return text("no subscription"), nil
		}
		srv.notify(ctx, protocol.MethodToolsListChanged, map[string]any{"_meta": map[string]json.RawMessage{protocol.MetaSubscriptionID: sub}})
		return text("touched"), nil
	case "extra":
		return text("extra"), nil
	case "resources":
		return complete(map[string]any{"content": []any{
			map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "the notes"}},
			map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///logo.png", "mimeType": "image/png", "blob": "iVBORw0KGgoSECRETBASE64"}},
			map[string]any{"type": "resource_link", "uri": "https://example.com/report", "name": "report", "mimeType": "application/pdf"},
		}}), nil
	case "noise":
		for _, line := range []string{"null", "[1,2]", `"just a string"`, `{"no":"jsonrpc"}`} {
			srv.s.Write(ctx, []byte(line))
		}
		return text("after the noise"), nil
	case "cont":
		if state == nil {
			return map[string]any{"resultType": protocol.ResultTypeInputRequired, "requestState": "state-for-leg2"}, nil
		}
		return text(fmt.Sprintf("leg 2 done (%s)", *state)), nil
	case "ask":
		return map[string]any{"resultType": protocol.ResultTypeInputRequired, "inputRequests": map[string]any{
			"login": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "Your name?", "requestedSchema": map[string]any{"type": "object"}}},
		}}, nil
	case "loop":
		n := 0
		if state != nil {
			fmt.Sscanf(*state, "loop-%d", &n)
		}
		return map[string]any{"resultType": protocol.ResultTypeInputRequired, "requestState": fmt.Sprintf("loop-%d", n+1)}, nil
	}
	return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: "unknown tool: " + name}
}

// complete marks a 2026-07-28 result complete.
func complete(m map[string]any) map[string]any {
	m["resultType"] = protocol.ResultTypeComplete
	return m
}

// notify sends the host a notification; errors are the connection's.
func (srv *Server) notify(ctx context.Context, method string, params any) {
	_ = srv.peer.Notify(ctx, method, params)
}
