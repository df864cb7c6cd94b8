// Package jsonrpc is the JSON-RPC 2.0 error object and the standard error
// codes: what the JSON-RPC peer (internal/wire) sends and reads, and what
// package protocol makes public as protocol.Error and protocol.Code*. It is
// a leaf: it imports nothing of this module, so the peer can use the error
// object without importing protocol, and knows nothing of MCP or MCPL (the
// MCPL codes are protocol's).
package jsonrpc

import (
	"encoding/json"
	"fmt"
)

// The error codes JSON-RPC 2.0 defines (§5.1).
const (
	// CodeParseError: the message is not valid JSON.
	CodeParseError = -32700
	// CodeInvalidRequest: the JSON is not a valid request object.
	CodeInvalidRequest = -32600
	// CodeMethodNotFound: the method does not exist or is not available.
	CodeMethodNotFound = -32601
	// CodeInvalidParams: the method's parameters are invalid.
	CodeInvalidParams = -32602
	// CodeInternalError: the receiver failed to handle the request.
	CodeInternalError = -32603
)

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
