// Package wire is a JSON-RPC 2.0 peer over a transport.Stream. It is
// symmetric: the host and the server SDK both use it, and it knows nothing of
// MCP or MCPL.
//
// Messages are routed by shape alone: "method" with "id" is a request from
// the other side, "method" alone a notification, and "result" or "error"
// without "method" the answer to one of this side's requests. The other
// side's request ids are never matched against this side's, so two id spaces
// that collide (as real servers' do) cannot cross.
package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
)

// CodeOverloaded refuses a request when the inbound queue is full (a
// server-defined code in JSON-RPC's reserved range).
const CodeOverloaded = -32000

// envelope is any JSON-RPC message as read. Every field is optional here;
// kind decides what the message is.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	// badMethod: "method" is present but not a non-empty string.
	badMethod bool
}

type msgKind int

const (
	kindNoise msgKind = iota
	kindRequest
	kindNotification
	kindResponse
	// kindInvalidRequest: a message with an id and a "method" that is not
	// a non-empty string, and no result or error. It is answered -32600.
	kindInvalidRequest
)

// parse decodes one message and says what it is. Anything that is not a JSON
// object with a JSON-RPC shape is noise.
func parse(b []byte) (envelope, msgKind) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return envelope{}, kindNoise
	}
	env, ok := scanEnvelope(b)
	if !ok {
		return env, kindNoise
	}
	// "error": null is no error (some peers send it beside their result);
	// alone, it answers with no result.
	errNull := isNull(env.Error)
	if errNull {
		env.Error = nil
	}
	switch {
	case env.badMethod && env.ID != nil && !isNull(env.ID) && env.Result == nil && env.Error == nil && !errNull:
		return env, kindInvalidRequest
	case env.badMethod:
		return env, kindNoise
	case env.Method != "" && env.ID != nil:
		return env, kindRequest
	case env.Method != "":
		return env, kindNotification
	case env.ID != nil && (env.Result != nil || env.Error != nil || errNull):
		if env.Result == nil && env.Error == nil {
			env.Result = json.RawMessage("null")
		}
		return env, kindResponse
	}
	return env, kindNoise
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// ourID reads the id of an answer as one of this side's ids: a JSON number,
// or a string holding one (some peers echo ids as strings).
func ourID(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// errorObject reads an answer's error leniently: an object with code and
// message as the spec says, or whatever else a peer put there, kept as words.
// A code that is not a number (a string such as "E42") is read as 0, or as
// the number a string holds; it never costs the peer's words.
func errorObject(raw json.RawMessage) *jsonrpc.Error {
	var obj struct {
		Code    json.RawMessage `json:"code"`
		Message json.RawMessage `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: s}
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: ""}
	}
	e := &jsonrpc.Error{Code: errorCode(obj.Code), Data: obj.Data}
	var msg string
	if json.Unmarshal(obj.Message, &msg) == nil {
		e.Message = msg
	} else if len(obj.Message) > 0 && !isNull(obj.Message) {
		e.Message = string(obj.Message)
	}
	return e
}

// errorCode reads an error's code: a JSON number (a fraction is cut), or a
// string holding one; anything else is 0.
func errorCode(raw json.RawMessage) int64 {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(strings.TrimSpace(s))
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return 0
	}
	if c, err := n.Int64(); err == nil {
		return c
	}
	if f, err := n.Float64(); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) &&
		f >= math.MinInt64 && f < math.MaxInt64 {
		return int64(f)
	}
	return 0
}

// Outbound messages. Writers send only what JSON-RPC defines.

type outError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *jsonrpc.Error  `json:"error"`
}
