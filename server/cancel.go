package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// ErrCancelled is the cause of a handler's ctx (context.Cause) when the
// host cancelled the request it is answering, with MCP's
// notifications/cancelled: the host has given up on it and reads no
// answer, so the handler should stop its work. The cause's text gives the
// host's reason, when it sent one: "cancelled by the host: <reason>".
// Match it with errors.Is.
var ErrCancelled = errors.New("cancelled by the host")

// maxReason bounds the host's reason as a cause's text carries it.
const maxReason = 200

// cancelledError is ErrCancelled with the host's reason.
type cancelledError struct{ reason string }

func (e *cancelledError) Error() string {
	if e.reason == "" {
		return ErrCancelled.Error()
	}
	return ErrCancelled.Error() + ": " + e.reason
}

func (e *cancelledError) Unwrap() error { return ErrCancelled }

// running is a request whose handler runs in a goroutine of its own, which
// the host may cancel.
type running struct {
	method string
	id     string // as the host sent it, bounded, for the log
	cancel context.CancelCauseFunc
}

// requestKey is the key of a request id in Conn.running: a string id and
// a number id never meet, and a string is compared by its value, however
// the host escaped it. ok is false for what is no id (null, an object).
func requestKey(id json.RawMessage) (key string, ok bool) {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return "", false
	}
	if id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) != nil {
			return "", false
		}
		return "s" + s, true
	}
	var n json.Number
	if json.Unmarshal(id, &n) != nil || n == "" {
		return "", false
	}
	return "n" + n.String(), true
}

// goCancellable answers req from f run in a goroutine of its own, whose
// ctx the host's notifications/cancelled for req ends, with a
// *cancelledError as its cause. A request the host cancelled is not
// answered, whatever f returns: the host reads no answer to it. The
// request is known by its id only while f runs.
func (c *Conn) goCancellable(ctx context.Context, req *wire.Request, f func(ctx context.Context) (any, error)) {
	ctx, cancel := context.WithCancelCause(ctx)
	r := &running{method: req.Method, id: wire.Cut(string(req.ID()), 64), cancel: cancel}
	key, ok := requestKey(req.ID())
	c.runMu.Lock()
	if _, dup := c.running[key]; ok && !dup {
		// A host that reuses the id of a request still running can cancel
		// the first of them only.
		c.running[key] = r
	}
	c.runMu.Unlock()
	reply := req.Defer()
	c.goFunc(func() {
		res, err := f(ctx)
		c.runMu.Lock()
		if c.running[key] == r {
			delete(c.running, key)
		}
		c.runMu.Unlock()
		// Untracked, the cause is settled: a cancellation from now on
		// finds the request finished.
		cancel(nil)
		if errors.Is(context.Cause(ctx), ErrCancelled) {
			c.log.Debug("answer withheld: the host cancelled the request",
				slog.String("method", r.method), slog.String("id", r.id))
			reply(nil, wire.ErrNoReply)
			return
		}
		reply(res, err)
	})
}

// cancelled acts on the host's notifications/cancelled: the handler of
// the request it names, if one still runs, has its ctx ended. An unknown
// or finished request, and params that name none, are ignored, as MCP
// has it (a cancellation may cross the answer on the way).
func (c *Conn) cancelled(req *wire.Request) {
	var p protocol.CancelledParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		c.log.Debug("notifications/cancelled ignored: its params are not an object", slog.String("error", err.Error()))
		return
	}
	key, ok := requestKey(p.RequestID)
	if !ok {
		c.log.Debug("notifications/cancelled ignored: it names no request id")
		return
	}
	c.runMu.Lock()
	r := c.running[key]
	c.runMu.Unlock()
	if r == nil {
		c.log.Debug("notifications/cancelled ignored: no request of that id is running",
			slog.String("id", wire.Cut(string(p.RequestID), 64)))
		return
	}
	reason := wire.OneLine(p.Reason, maxReason)
	c.log.Info("the host cancelled a request; its handler's ctx ends",
		slog.String("method", r.method), slog.String("id", r.id), slog.String("reason", reason))
	r.cancel(&cancelledError{reason: reason})
}
