package protocol

import "github.com/mcpl-go/mcpl/internal/jsonrpc"

// JSON-RPC 2.0 error codes (the MCPL codes are in mcpl.go). They are the
// codes the JSON-RPC peer sends and reads (package internal/jsonrpc).
const (
	CodeParseError     = jsonrpc.CodeParseError     // -32700
	CodeInvalidRequest = jsonrpc.CodeInvalidRequest // -32600
	CodeMethodNotFound = jsonrpc.CodeMethodNotFound // -32601
	CodeInvalidParams  = jsonrpc.CodeInvalidParams  // -32602
	CodeInternalError  = jsonrpc.CodeInternalError  // -32603
)

// MethodPing is MCP's liveness check, which either side may send; the
// receiver answers at once with an empty result.
const MethodPing = "ping"

// Error is a JSON-RPC error object:
//
//	type Error struct {
//		Code    int64           `json:"code"`
//		Message string          `json:"message"`
//		Data    json.RawMessage `json:"data,omitempty"`
//	}
//
// A handler returns one (a server's tool handler, say) to answer a request
// with that error rather than a result; a request that was answered with an
// error fails with an error that wraps one, so errors.As reaches the peer's
// code, message and data. Its Error method returns the code and message, for
// logs ("jsonrpc error -32602: ...").
//
// It is an alias of the JSON-RPC peer's own error object, which lives in a
// leaf package of its own so that the peer need not import protocol.
type Error = jsonrpc.Error

// NewError returns an Error whose data is data encoded as JSON (none when
// data is nil or does not encode).
func NewError(code int64, message string, data any) *Error {
	return jsonrpc.NewError(code, message, data)
}
