package session

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// A connection at 2026-07-28 is stateless: every request carries the
// revision, this host's identity and its capabilities in _meta; results
// carry a resultType, and one of input_required is sent again with the
// server's requestState, up to MaxLegs times; tool list changes come on a
// subscriptions/listen request held open for the connection's life. MCPL
// is off on it (version.go says why).

// whyModern is why policy is not established on a 2026-07-28 connection.
const whyModern = "the server speaks MCP 2026-07-28, which has no session for MCPL"

// MaxLegs bounds the round trips of one request that a 2026-07-28 server
// answers with input_required: the first and every retry.
const MaxLegs = 8

// modernReady finishes the handshake of a 2026-07-28 connection: there is
// nothing more to send, and MCPL stays off.
func (c *conn) modernReady(st State) (State, string, error) {
	c.modern = st.Version
	c.s.modernSeen.Store(true)
	st.Grant = emptyGrant()
	c.offer(nil, whyModern)
	if st.Init.Capabilities.MCPL() == nil {
		c.s.log.Info("an MCP 2026-07-28 server: tools work, MCPL is off")
	}
	return st, whyModern, nil
}

// modernCall is Call on a 2026-07-28 connection.
func (c *conn) modernCall(ctx context.Context, method string, params, result any, opts ...wire.CallOption) error {
	sent := c.meta(c.modern, params)
	for leg := 1; ; leg++ {
		var raw json.RawMessage
		if err := c.peer.Call(ctx, method, sent, &raw, opts...); err != nil {
			return err
		}
		var env protocol.ResultEnvelope
		_ = json.Unmarshal(raw, &env) // a result that is no object is the caller's to refuse
		if !env.InputRequired() {
			if result == nil {
				return nil
			}
			if err := json.Unmarshal(raw, result); err != nil {
				return &wire.CallError{Outcome: wire.BadResponse, Cause: wire.CauseBadAnswer, Server: c.s.cfg.ID, Method: method, Err: err}
			}
			return nil
		}
		if len(env.InputRequests) > 0 {
			asked := make([]string, 0, len(env.InputRequests))
			for _, r := range env.InputRequests {
				var m struct {
					Method string `json:"method"`
				}
				_ = json.Unmarshal(r, &m)
				asked = append(asked, wire.Cut(m.Method, 60))
			}
			c.s.log.Warn("the server asked for input this host does not give (it declares no elicitation, sampling or roots); the request was not completed",
				"method", method, "asked", asked)
			return inputRefused(c.s.cfg.ID, method, "the server asked for input this host cannot give, so the request was not completed")
		}
		if leg >= MaxLegs {
			c.s.log.Warn("the server kept answering input_required; the host stopped retrying", "method", method, "legs", leg)
			return inputRefused(c.s.cfg.ID, method, fmt.Sprintf("the server asked for another round trip %d times, so the host stopped; the request was not completed", leg))
		}
		c.s.log.Debug("input_required: sending the request again with the server's state", "method", method, "leg", leg+1)
		sent = withRequestState(sent, env.RequestState)
	}
}

// inputRefused is the error of a request whose input_required rounds this
// host ended: the server answered, and the request did not complete.
func inputRefused(server, method, msg string) error {
	return &wire.CallError{Outcome: wire.ErrorResponse, Cause: wire.CauseErrorAnswer, Server: server, Method: method,
		Answer: &protocol.Error{Code: protocol.CodeInternalError, Message: msg}}
}

// withRequestState returns params (an object from meta) with requestState
// set to state, or removed when the server gave none.
func withRequestState(params any, state *string) any {
	obj, ok := params.(map[string]json.RawMessage)
	if !ok {
		return params
	}
	next := make(map[string]json.RawMessage, len(obj)+1)
	for k, v := range obj {
		next[k] = v
	}
	delete(next, "requestState")
	if state != nil {
		b, _ := json.Marshal(*state)
		next["requestState"] = b
	}
	return next
}

// listChanged reports whether a tools capability says listChanged.
func listChanged(tools json.RawMessage) bool {
	var t struct {
		ListChanged bool `json:"listChanged"`
	}
	return len(tools) > 0 && json.Unmarshal(tools, &t) == nil && t.ListChanged
}

// listen holds a subscriptions/listen open for tool list changes while the
// connection lives; the changes arrive as notifications/tools/list_changed,
// which Handler takes as on any connection. A refused listen is asked
// again after a pause that doubles from a second, five times in all.
func (c *conn) listen() {
	defer c.s.running.done()
	defer close(c.listening)
	params := c.meta(c.modern, map[string]any{"notifications": map[string]bool{"toolsListChanged": true}})
	wait := time.Second
	for attempt := 1; ; attempt++ {
		err := c.peer.Call(c.s.ctx, protocol.MethodSubscriptionsListen, params, nil, wire.WithTimeout(0))
		if !c.live() || c.s.ctx.Err() != nil {
			return
		}
		reason := "the server ended it"
		if err != nil {
			reason = policyErrorReason(err)
		}
		if attempt == 5 {
			c.s.log.Warn("subscriptions/listen failed five times; tool list changes are not seen until the server reconnects", "reason", reason)
			return
		}
		c.s.log.Warn("subscriptions/listen ended; asking again", "reason", reason, "in", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.peer.Done():
			t.Stop()
			return
		}
		wait *= 2
	}
}
