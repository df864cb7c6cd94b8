package wire

import (
	"encoding/json"
	"fmt"
	"time"
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

// Cause refines an Outcome: it picks the text an agent reads.
type Cause int

const (
	// CauseClosed: the connection was closed by the peer or failed
	// (Outcome NotSent: before the call; NoResponse: while it waited).
	CauseClosed Cause = iota + 1
	// CauseHostClosed: this host closed the connection.
	CauseHostClosed
	// CauseWriteFailed: the transport refused the write.
	CauseWriteFailed
	// CauseDeadline: the call's deadline passed.
	CauseDeadline
	// CauseCanceled: the caller's context ended.
	CauseCanceled
	// CauseErrorAnswer: the peer answered with an error.
	CauseErrorAnswer
	// CauseBadAnswer: the answer could not be decoded.
	CauseBadAnswer
)

// CallError is a failed outbound request. Its Error method returns the text
// an agent reads; the fields carry what code and operators need.
type CallError struct {
	Outcome Outcome
	Cause   Cause
	// Server names the peer in texts.
	Server string
	// Method and ID identify the request (for logs, never for texts).
	Method string
	ID     int64
	// Reconnecting records whether this host was reconnecting to the peer
	// when the call failed on a closed connection.
	Reconnecting bool
	// Timeout is the deadline that passed, for CauseDeadline.
	Timeout time.Duration
	// Code, Message and Data are the peer's error answer, for
	// ErrorResponse.
	Code    int64
	Message string
	Data    json.RawMessage
	// Err is the underlying error, if any (a transport's, a decoder's, a
	// context's).
	Err error
}

// Error returns the agent-facing text.
func (e *CallError) Error() string {
	switch e.Cause {
	case CauseClosed:
		if e.Outcome == NotSent {
			return textNotSentClosed(e.Server, e.Reconnecting)
		}
		return textClosedPending(e.Server, e.Reconnecting)
	case CauseHostClosed:
		if e.Outcome == NotSent {
			return textNotSentHostClosed(e.Server)
		}
		return textHostClosedPending(e.Server)
	case CauseWriteFailed:
		return textNotWritten(e.Server)
	case CauseDeadline:
		return textDeadline(e.Server, e.Timeout)
	case CauseCanceled:
		return textCanceled(e.Server)
	case CauseErrorAnswer:
		if w := serverWords(e.Message); w != "" {
			return textErrorAnswer(e.Server, w)
		}
		return textErrorAnswerNoWords(e.Server)
	case CauseBadAnswer:
		return textBadAnswer(e.Server)
	}
	return textBadAnswer(e.Server)
}

// Unwrap returns the underlying error.
func (e *CallError) Unwrap() error { return e.Err }

// NotSentError returns the error for a request that could not be sent
// because there is no open connection to server: reconnecting says whether
// this host is reconnecting to it. It lets a layer that holds no connection
// at the moment (a session between reconnects) fail a call in the same
// words a closed connection uses.
func NotSentError(server string, reconnecting bool) *CallError {
	return &CallError{Outcome: NotSent, Cause: CauseClosed, Server: server, Reconnecting: reconnecting}
}
