package protocol

import (
	"encoding/json"
	"fmt"
)

// JSON-RPC 2.0 error codes (the MCPL codes are in mcpl.go).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// MethodPing is MCP's liveness check, which either side may send; the
// receiver answers at once with an empty result.
const MethodPing = "ping"

// Error is a JSON-RPC error object. A handler returns one (a server's tool
// handler, say) to answer a request with that error rather than a result;
// a request that was answered with an error fails with an error that wraps
// one, so errors.As reaches the peer's code, message and data.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error returns the code and message, for logs.
func (e *Error) Error() string {
	if e == nil {
		return "jsonrpc error <nil>"
	}
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// NewError returns an Error whose data is data encoded as JSON (none when
// data is nil or does not encode).
func NewError(code int64, message string, data any) *Error {
	e := &Error{Code: code, Message: message}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}
