package host

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Progress of long tool calls (MCP's notifications/progress). Every
// tools/call the host sends a server carries a progressToken of its own;
// what the server reports against it is kept with the call while it runs,
// shown on the status page (ServerState.Calls) and logged at debug. It
// reaches no agent: the call's answer is what the agent reads. A report
// for a token not in flight on that server, one that does not increase,
// and one that is unreadable are dropped, logged at debug.

// CallInFlight is a tool call the host has sent a server and not yet had
// answered, with the latest progress the server reported for it.
type CallInFlight struct {
	Tool    string
	Started time.Time
	// Progress and Total (0 when the server gave none) are the last
	// report's; Message its words, cut to one line of at most 200
	// characters; Updated when it came (zero: none yet).
	Progress, Total float64
	Message         string
	Updated         time.Time
}

// progressSeq numbers the host's progress tokens.
var progressSeq atomic.Int64

// startCall records a call in flight on srv and returns its token and
// the function that forgets it.
func (h *Host) startCall(srv *server, tool string) (token string, done func()) {
	token = fmt.Sprintf("mcplhost-%d", progressSeq.Add(1))
	srv.mu.Lock()
	if srv.calls == nil {
		srv.calls = map[string]*CallInFlight{}
	}
	srv.calls[token] = &CallInFlight{Tool: tool, Started: h.now()}
	srv.mu.Unlock()
	return token, func() {
		srv.mu.Lock()
		delete(srv.calls, token)
		srv.mu.Unlock()
	}
}

// progressParams is notifications/progress.
type progressParams struct {
	Token    json.RawMessage `json:"progressToken"`
	Progress *float64        `json:"progress"`
	Total    *float64        `json:"total"`
	Message  string          `json:"message"`
}

// onProgress takes a server's notifications/progress.
func (h *Host) onProgress(srv *server, req *wire.Request) {
	var p progressParams
	var token string
	if json.Unmarshal(req.Params, &p) != nil || p.Progress == nil || json.Unmarshal(p.Token, &token) != nil {
		h.log.Debug("a progress notification that can't be read was dropped", "server", srv.cfg.ID)
		return
	}
	srv.mu.Lock()
	c, ok := srv.calls[token]
	stale := ok && !c.Updated.IsZero() && *p.Progress <= c.Progress
	if ok && !stale {
		c.Progress, c.Updated = *p.Progress, h.now()
		if p.Total != nil {
			c.Total = *p.Total
		}
		c.Message = wire.OneLine(p.Message, 200)
	}
	var tool string
	if ok {
		tool = c.Tool
	}
	srv.mu.Unlock()
	switch {
	case !ok:
		h.log.Debug("progress for no call in flight was dropped", "server", srv.cfg.ID, "token", wire.Cut(token, 64))
	case stale:
		h.log.Debug("progress that did not increase was dropped", "server", srv.cfg.ID, "tool", tool)
	default:
		h.log.Debug("tool progress", "server", srv.cfg.ID, "tool", tool, "progress", *p.Progress, "total", p.Total, "message", wire.OneLine(p.Message, 200))
	}
}

// callsOf returns srv's calls in flight, oldest first.
func callsOf(srv *server) []CallInFlight {
	srv.mu.Lock()
	out := make([]CallInFlight, 0, len(srv.calls))
	for _, c := range srv.calls {
		out = append(out, *c)
	}
	srv.mu.Unlock()
	slices.SortFunc(out, func(a, b CallInFlight) int { return a.Started.Compare(b.Started) })
	return out
}

// withProgressToken is a tools/call's params with its progress token.
func withProgressToken(p protocol.CallToolParams, token string) protocol.CallToolParams {
	p.Meta = map[string]any{"progressToken": token}
	return p
}
