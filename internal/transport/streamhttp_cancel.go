package transport

import (
	"encoding/json"
	"errors"
)

// A request this side cancels (it writes notifications/cancelled naming
// it) has its POST ended too: the answer stream is closed and never
// resumed, and nothing more is read or answered for it. On 2026-07-28
// that is how a server learns of it, as each request is its own POST and
// a stateless server has no session to route the notification by; on
// the session-era revisions the notification goes to the server as well.

// errAborted is the cause of a POST ended because its request was
// cancelled.
var errAborted = errors.New("transport: the request was cancelled")

// track records p, a request's POST, until it is done.
func (s *StreamableHTTP) track(p *post) (untrack func()) {
	key := idKey(p.m.id)
	s.mu.Lock()
	if s.posts == nil {
		s.posts = map[string]*post{}
	}
	s.posts[key] = p
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.posts[key] == p {
			delete(s.posts, key)
		}
		s.mu.Unlock()
	}
}

// abortCancelled ends the POST of the request a notifications/cancelled
// in msg names, if it is under way.
func (s *StreamableHTTP) abortCancelled(msg []byte) {
	var env struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &env) != nil || len(env.Params.RequestID) == 0 {
		return
	}
	s.mu.Lock()
	p := s.posts[idKey(env.Params.RequestID)]
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.aborted.Store(true)
	p.cancel(errAborted)
	s.log.Debug("Streamable HTTP request cancelled; its POST is ended", "url", s.shown, "method", p.m.method)
}

// idKey is a JSON-RPC id as a map key: a string id and a number id stay
// apart, and an escaped string matches its plain form.
func idKey(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	b, _ := json.Marshal(v)
	if _, ok := v.(string); ok {
		return "s" + string(b)
	}
	return "n" + string(b)
}
