// Package transport carries whole JSON-RPC messages between two peers: over a
// subprocess's stdin and stdout, over WebSocket, over MCP's Streamable HTTP
// (client side), or through an in-memory pipe.
//
// A Stream knows nothing of JSON-RPC: it frames and unframes messages, bounds
// their size, and reports how it ended. Package wire builds the JSON-RPC peer
// on top of it.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultMaxMessageSize bounds one message (16 MiB) unless a stream is told
// otherwise.
const DefaultMaxMessageSize = 16 << 20

// A Stream carries messages in both directions. Read is called from one
// goroutine at a time; Write is safe for concurrent use; Close may be called
// at any time, from any goroutine, any number of times.
type Stream interface {
	// Read returns the next message, which the caller owns. When the stream
	// has ended it returns an error: one wrapping io.EOF when the peer closed
	// it cleanly, ErrClosed after Close, *TooLargeError for a message over the
	// size limit (the stream is then unusable), or the transport's own error.
	Read() ([]byte, error)
	// Write sends one whole message. Concurrent writes take turns, and
	// messages never interleave. ctx bounds the wait for the turn: when it
	// ends first, Write returns ctx.Err(), nothing was sent and the stream
	// is still usable. ctx also bounds a write that blocks, on streams that
	// can abandon one. A returned error means the message was not
	// delivered whole; when it wraps ErrStalled the peer took none of it
	// before ctx ended, and the stream is still open (the caller decides
	// whether to close it); when it wraps ErrPartialWrite part of it may
	// have reached the peer, and the stream has closed itself because its
	// framing is lost. It wraps ErrClosed when the stream is closed: by
	// Close (a write waiting for its turn gives up then too), or by the
	// peer (a subprocess that has closed its stdin or exited, a WebSocket
	// closed). Write keeps nothing of msg once it returns: the caller
	// may reuse it.
	Write(ctx context.Context, msg []byte) error
	// Close ends the stream and releases what it holds (for a subprocess:
	// stops it). Reads and writes then fail with ErrClosed.
	Close() error
	// CloseInfo says how the stream ended, as far as is known once Read
	// has failed.
	CloseInfo() CloseInfo
}

// ErrClosed is returned by a Stream used after Close, and by Write once
// the peer has closed its end.
var ErrClosed = errors.New("transport: stream closed")

// ErrPartialWrite marks a write that stopped part way: the peer may have
// received some of the message, and the stream has closed.
var ErrPartialWrite = errors.New("transport: partial write")

// ErrStalled marks a write abandoned because its context ended before the
// peer took any byte of the message: the error wraps ctx.Err() too. Nothing
// was sent, the framing holds, and the stream stays open and usable; the
// stream does not close itself. A peer that took nothing for that long has
// likely stopped reading, so the layer above may decide to close the
// stream. A write abandoned after the peer took part of the message wraps
// ErrPartialWrite instead, and a write that was still waiting for its turn
// returns ctx.Err() alone. Only a stream that can abandon a write under way
// returns it.
var ErrStalled = errors.New("transport: the peer took none of the message before the write's deadline")

// TooLargeError reports a message over the stream's size limit.
type TooLargeError struct {
	Limit int // the limit in bytes
	Size  int // the size seen when it was refused (at least Limit+1)
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("transport: message of at least %d bytes exceeds the limit of %d bytes", e.Size, e.Limit)
}

// PeerFaultError is a Read error for a peer that broke the transport's
// rules (a binary frame on a WebSocket). The stream is unusable; the layer
// above closes it, as its own doing, and Close tells the peer why.
type PeerFaultError struct{ Reason string }

func (e *PeerFaultError) Error() string { return "transport: " + e.Reason }

// CloseInfo describes how a stream ended. Zero fields are unknown or do not
// apply. It is operator detail, for the log: none of it belongs in a text an
// agent reads.
type CloseInfo struct {
	// Subprocess streams.
	Exited     bool   // the process has exited and ExitCode/Signal are known
	ExitCode   int    // exit status, -1 when killed by a signal
	Signal     string // the signal that ended it, if any
	StderrTail string // the last lines it wrote to stderr

	// WebSocket streams.
	WSCode   int    // the close status code the peer sent, 0 if none
	WSReason string // the peer's own close text

	// Any stream: the transport's words for why it ended, if not clean.
	Err string
}

// LogAttrs returns the known fields as slog attributes. The stderr tail is
// left out: a subprocess stream logs it once, when the process exits.
func (c CloseInfo) LogAttrs() []slog.Attr {
	var a []slog.Attr
	if c.Exited {
		a = append(a, slog.Int("exit_code", c.ExitCode))
		if c.Signal != "" {
			a = append(a, slog.String("signal", c.Signal))
		}
	}
	if c.WSCode != 0 {
		a = append(a, slog.Int("ws_code", c.WSCode))
	}
	if c.WSReason != "" {
		a = append(a, slog.String("ws_reason", c.WSReason))
	}
	if c.Err != "" {
		a = append(a, slog.String("transport_error", c.Err))
	}
	return a
}

// loggerOr returns l, or slog.Default() when l is nil.
func loggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// A ReadDeadliner is a Stream whose Read can be cut short without losing
// anything: once the deadline set passes, a Read under way, or the next
// one, returns an error wrapping os.ErrDeadlineExceeded, and a later Read
// goes on where it stopped. The zero time means no deadline. A deadline in
// the past interrupts a Read from another goroutine (package wire hands
// the reading role between goroutines this way). Subprocess streams and
// Pipe have it.
type ReadDeadliner interface {
	SetReadDeadline(t time.Time) error
}

// deadlineWriter is a Stream that bounds a write by a deadline of its own
// as well as by its context, without deriving a context for it.
type deadlineWriter interface {
	WriteBy(ctx context.Context, msg []byte, deadline time.Time) error
}

// WriteBy writes msg to s as Write does, bounded by ctx and also by
// deadline (zero for none): when the deadline passes first, the write ends
// as when a context's deadline passes, its error wrapping
// context.DeadlineExceeded while ctx.Err() stays nil. A stream that bounds
// writes by a deadline of its own (a subprocess's pipe) does so without a
// context a write; others get one.
func WriteBy(s Stream, ctx context.Context, msg []byte, deadline time.Time) error {
	if w, ok := s.(deadlineWriter); ok {
		return w.WriteBy(ctx, msg, deadline)
	}
	if deadline.IsZero() {
		return s.Write(ctx, msg)
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return s.Write(wctx, msg)
}
