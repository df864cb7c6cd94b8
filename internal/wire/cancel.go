package wire

import (
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// MCP's cancellation (basic/utilities/cancellation): the side that sent a
// request tells the other it has abandoned it, so the other can stop the
// work; initialize is never cancelled. Package protocol names these
// methods too; a test pins them equal, as wire imports nothing above it.
const (
	methodCancelled  = "notifications/cancelled"
	methodInitialize = "initialize"
)

// cancelWrite bounds the write of a notifications/cancelled. The caller
// that abandoned its call waits for it, so it is short: a cancellation
// the other side takes none of in that time is dropped, with a log line,
// and its answer, should one come, is dropped here as any abandoned call's
// is. A bound this short says nothing of whether the other side still
// reads, so it does not close the connection as WriteTimeout's would.
const cancelWrite = time.Second

// The reasons a notifications/cancelled gives: operator words, read in the
// other side's log, naming neither side's role.
const reasonAbandoned = "the request was abandoned by its caller"

func reasonDeadline(d time.Duration) string { return "no answer within " + ShortDuration(d) }

// cancelReason is the reason sent for a call abandoned as e says.
func cancelReason(e *CallError) string {
	if e.Cause == CauseDeadline {
		return reasonDeadline(e.Timeout)
	}
	return reasonAbandoned
}

// appendCancelled appends the notifications/cancelled for request id.
func appendCancelled(b []byte, id int64, reason string) []byte {
	b = append(b, `{"jsonrpc":"2.0","method":"`+methodCancelled+`","params":{"requestId":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"reason":`...)
	b = appendString(b, reason)
	return append(b, `}}`...)
}

// sendCancelled tells the other side that this side has abandoned its
// request id (for method), written while the caller waits, bounded by
// cancelWrite (or WriteTimeout, if shorter) and by the connection's end.
// No lock is held across the write. It is called only for a request that
// was written whole, on a connection that was open when the call gave up.
func (p *Peer) sendCancelled(method string, id int64, reason string) {
	body := appendCancelled(make([]byte, 0, 96+len(reason)), id, reason)
	bound := min(cancelWrite, p.wtime)
	err := transport.WriteBy(p.s, p.wctx, body, time.Now().Add(bound))
	attrs := []any{slog.String("method", Cut(method, 100)), slog.Int64("id", id)}
	switch {
	case err == nil:
		p.log.Debug("cancellation sent", append(attrs, slog.String("reason", reason))...)
	case p.wctx.Err() != nil:
		// The connection ended meanwhile: nothing is left to cancel.
	case errors.Is(err, transport.ErrPartialWrite) && ownDeadline(p.wctx, err):
		p.stalled(bound, "notification", methodCancelled)
	case errors.Is(err, transport.ErrPartialWrite):
		p.log.Warn("notification written in part; the connection is closed",
			slog.String("method", methodCancelled), slog.String("error", err.Error()))
		p.shutdown(err, true)
	case errors.Is(err, transport.ErrClosed):
		p.writeFoundClosed(err)
	default:
		p.limits.Log(&logCancelNotSent, append(attrs, slog.String("error", err.Error()))...)
	}
}
