package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
)

// Outcome says what is known about a failed request's effect. Code decides
// by outcome, never by an error's message.
type Outcome int

const (
	// NotSent: nothing was written, so the peer never saw the request.
	NotSent Outcome = iota + 1
	// NoResponse: the request was written (or may have been, in part) and
	// no answer came: a deadline, a cancellation, or a close while waiting.
	// It may have taken effect.
	NoResponse
	// ErrorResponse: the peer answered with a JSON-RPC error.
	ErrorResponse
	// BadResponse: the peer answered, but the result could not be decoded
	// into what the caller expected. It may have taken effect.
	BadResponse
)

func (o Outcome) String() string {
	switch o {
	case NotSent:
		return "not-sent"
	case NoResponse:
		return "no-response"
	case ErrorResponse:
		return "error-response"
	case BadResponse:
		return "bad-response"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Cause refines an Outcome: the layers above pick their own words from it.
type Cause int

const (
	// CauseClosed: the connection was closed by the peer or failed
	// (Outcome NotSent: before the call; NoResponse: while it waited).
	CauseClosed Cause = iota + 1
	// CauseClosedHere: this side closed the connection (Peer.Close).
	CauseClosedHere
	// CauseWriteFailed: the transport refused the write.
	CauseWriteFailed
	// CauseDeadline: the call's deadline passed (Outcome NoResponse: while
	// it waited for an answer; NotSent: before it could be written).
	CauseDeadline
	// CauseCanceled: the caller's context ended (NoResponse: while it
	// waited for an answer; NotSent: before it was written).
	CauseCanceled
	// CauseErrorAnswer: the peer answered with an error.
	CauseErrorAnswer
	// CauseBadAnswer: the answer could not be decoded.
	CauseBadAnswer
	// CauseEncodeFailed: the request's params could not be encoded as
	// JSON, so nothing was written.
	CauseEncodeFailed
	// CauseTooLarge: this side closed the connection because the peer
	// sent a message over the size limit (NotSent: before the call;
	// NoResponse: while it waited).
	CauseTooLarge
	// CauseStalled: this side closed the connection because the peer took
	// none of a message for Timeout: it has stopped reading (NotSent: the
	// call's own write stalled, or came after; NoResponse: while it
	// waited).
	CauseStalled
)

// Sentinels a *CallError matches with errors.Is. A JSON-RPC error answer
// is reached with errors.As and a *jsonrpc.Error instead.
var (
	// ErrConnClosed: the request failed because the connection is closed,
	// by the peer or by this side, before it was sent or while it waited.
	ErrConnClosed = errors.New("connection closed")
	// ErrNotSent: nothing was written, so the request did not take effect.
	ErrNotSent = errors.New("request not sent")
	// ErrNoAnswer: the request was sent (or may have been) and no answer
	// came, or one that could not be read: it may have taken effect.
	ErrNoAnswer = errors.New("no answer to the request")
)

// CallError is a failed outbound request. Its Error method returns an
// operator's one-line account (method, peer, what happened); the words an
// agent reads are chosen from its fields by the layer that knows the agent
// (package host), never taken from Error. It matches ErrConnClosed,
// ErrNotSent and ErrNoAnswer with errors.Is as its outcome and cause say,
// and an error answer's *jsonrpc.Error with errors.As.
type CallError struct {
	Outcome Outcome
	Cause   Cause
	// Server names the peer (the Peer's Options.Name).
	Server string
	// Method and ID identify the request (ID 0 for a notification).
	Method string
	ID     int64
	// Reconnecting records whether this side was reconnecting to the peer
	// when the call failed on a closed connection.
	Reconnecting bool
	// Timeout is the deadline that passed, for CauseDeadline.
	Timeout time.Duration
	// Answer is the peer's error answer, for ErrorResponse.
	Answer *jsonrpc.Error
	// Err is the underlying error, if any (a transport's, a decoder's, a
	// context's; for CauseTooLarge and CauseStalled, why this side closed
	// the connection: a *transport.TooLargeError or a *StallError).
	Err error
}

// Error returns the operator's account, such as
//
//	tools/call to "chat": no answer within 60s
func (e *CallError) Error() string {
	subject := e.Method
	if subject == "" {
		subject = "request"
	}
	if e.Server != "" {
		subject += fmt.Sprintf(" to %q", e.Server)
	}
	switch e.Cause {
	case CauseClosed:
		switch {
		case e.Outcome == NotSent:
			return subject + " not sent: the connection is closed"
		case e.ID == 0:
			return subject + ": the connection closed while it was written"
		}
		return subject + ": the connection closed before an answer"
	case CauseClosedHere:
		if e.Outcome == NotSent {
			return subject + " not sent: the connection was closed on this side"
		}
		return subject + ": the connection was closed on this side before an answer"
	case CauseTooLarge:
		why := "this side closed the connection because the peer sent a message over the size limit"
		if e.Outcome == NotSent {
			return subject + " not sent: " + why
		}
		return subject + ": no answer: " + why
	case CauseStalled:
		why := "this side closed the connection because the peer took none of a message within " + ShortDuration(e.Timeout)
		if e.Outcome == NotSent {
			return subject + " not sent: " + why
		}
		return subject + ": no answer: " + why
	case CauseWriteFailed:
		return subject + " not sent: the write failed: " + errText(e.Err)
	case CauseEncodeFailed:
		return subject + " not sent: its params could not be encoded: " + errText(e.Err)
	case CauseDeadline:
		if e.Outcome == NotSent {
			return subject + " not sent: not written within " + ShortDuration(e.Timeout)
		}
		return subject + ": no answer within " + ShortDuration(e.Timeout)
	case CauseCanceled:
		if e.Outcome == NotSent {
			return subject + " not sent: abandoned by its caller before it was written"
		}
		return subject + ": abandoned by its caller before an answer"
	case CauseErrorAnswer:
		if e.Answer == nil {
			return subject + ": answered with an error"
		}
		words := OneLine(e.Answer.Message, 500)
		if words == "" {
			return fmt.Sprintf("%s: error %d", subject, e.Answer.Code)
		}
		return fmt.Sprintf("%s: error %d: %s", subject, e.Answer.Code, words)
	}
	return subject + ": the answer could not be read: " + errText(e.Err)
}

// errText is an underlying error's words, as one bounded line.
func errText(err error) string {
	if err == nil {
		return "unknown"
	}
	return OneLine(err.Error(), 500)
}

// Unwrap returns the sentinels the error matches, the peer's error answer,
// and the underlying error.
func (e *CallError) Unwrap() []error {
	var out []error
	switch e.Outcome {
	case NotSent:
		out = append(out, ErrNotSent)
	case NoResponse, BadResponse:
		out = append(out, ErrNoAnswer)
	}
	switch e.Cause {
	case CauseClosed, CauseClosedHere, CauseTooLarge, CauseStalled:
		out = append(out, ErrConnClosed)
	}
	if e.Answer != nil {
		out = append(out, e.Answer)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// NotSentError returns the error for a request that could not be sent
// because there is no open connection to server: reconnecting says whether
// this side is reconnecting to it. It lets a layer that holds no connection
// at the moment (a session between reconnects) fail a call as a closed
// connection does.
func NotSentError(server, method string, reconnecting bool) *CallError {
	return &CallError{Outcome: NotSent, Cause: CauseClosed, Server: server, Method: method, Reconnecting: reconnecting}
}
