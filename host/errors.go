package host

import (
	"errors"
	"fmt"

	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Errors the host's methods fail with, matched with errors.Is.
var (
	// ErrHostClosed: Close has been called; the host connects nothing
	// more.
	ErrHostClosed = errors.New("host: closed")
	// ErrNotConnected: no server with that id is in the registry.
	ErrNotConnected = errors.New("host: server not connected")
	// ErrAlreadyConnected: a server with that id is in the registry.
	ErrAlreadyConnected = errors.New("host: server already connected")
	// ErrConnectInFlight: a connect of that id (at start, at runtime, or a
	// restart's) has not settled; nothing was changed.
	ErrConnectInFlight = errors.New("host: connect in flight")
	// ErrConnectionClosed: a request to the server failed because its
	// connection is closed (ToolError.Outcome says whether it was sent).
	ErrConnectionClosed = wire.ErrConnClosed
)

// ServerError is a refusal about one server: Err is ErrNotConnected,
// ErrAlreadyConnected or ErrConnectInFlight, and the text names the
// server, as an operator (or an agent, through a tool that quotes it)
// reads it.
type ServerError struct {
	ID  string
	Err error
}

func (e *ServerError) Error() string {
	switch e.Err {
	case ErrNotConnected:
		return fmt.Sprintf(`MCPL server "%s" is not connected`, e.ID)
	case ErrAlreadyConnected:
		return fmt.Sprintf(`MCPL server "%s" is already connected`, e.ID)
	case ErrConnectInFlight:
		return fmt.Sprintf(`MCPL server "%s" has a connect in flight; try again once it settles`, e.ID)
	}
	return fmt.Sprintf(`MCPL server "%s": %v`, e.ID, e.Err)
}

// Unwrap returns the sentinel.
func (e *ServerError) Unwrap() error { return e.Err }

// Outcome says what is known of a failed tool call's effect.
type Outcome string

// Tool call outcomes.
const (
	// OutcomeRefused: the host refused the call before sending it (no
	// such tool, its server gone or connecting, the policy denies it):
	// nothing ran.
	OutcomeRefused Outcome = "refused"
	// OutcomeNotSent: the request was not written: nothing ran.
	OutcomeNotSent Outcome = "not-sent"
	// OutcomeNoAnswer: the request was sent and no answer came (a
	// deadline, a closed connection), or one that could not be read: it
	// may have run.
	OutcomeNoAnswer Outcome = "no-answer"
	// OutcomeErrorAnswer: the server answered with a JSON-RPC error;
	// errors.As reaches it as a *protocol.Error.
	OutcomeErrorAnswer Outcome = "error-answer"
	// OutcomeToolError: the tool ran and reported a failure (an isError
	// result, in ToolError.Result).
	OutcomeToolError Outcome = "tool-error"
)

// ToolError is a tool call that did not succeed. Operator detail is in the
// log, and in Err.
type ToolError struct {
	// Text is what the caller (an agent) reads, and Error's text: what
	// happened, whether anything ran, and what works from there.
	Text string
	// Outcome is what is known of the call's effect.
	Outcome Outcome
	// Server is the id of the server that provides the tool, when the
	// name resolved to one.
	Server string
	// Err is what made the call fail, when something did: the request's
	// failure (matching ErrConnectionClosed, or reaching a
	// *protocol.Error), ErrNotConnected, ErrConnectInFlight or
	// ErrHostClosed.
	Err error
	// Result is the server's error result, for OutcomeToolError.
	Result *protocol.CallToolResult
}

func (e *ToolError) Error() string { return e.Text }
func (e *ToolError) Unwrap() error { return e.Err }

// requestFailed is the ToolError for a request that failed on the wire.
func requestFailed(server string, err error) *ToolError {
	te := &ToolError{Server: server, Err: err, Outcome: OutcomeNoAnswer, Text: textUnaccounted(server)}
	var ce *wire.CallError
	if !errors.As(err, &ce) {
		return te
	}
	te.Text = requestFailedText(ce)
	switch ce.Outcome {
	case wire.NotSent:
		te.Outcome = OutcomeNotSent
	case wire.ErrorResponse:
		te.Outcome = OutcomeErrorAnswer
	}
	return te
}
