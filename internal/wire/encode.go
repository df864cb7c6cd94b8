package wire

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// The encoders below write JSON-RPC envelopes by appending, around values
// that are already JSON: json.Marshal of a struct holding a RawMessage would
// validate and compact that value a second time.

// envelopeRoom is what a request's envelope adds to its method and
// params, with room for the id: a buffer this much larger is built in one
// allocation.
const envelopeRoom = 64

// appendRequest appends a request (id > 0) or a notification (id == 0).
// params, if not nil, must be valid JSON.
func appendRequest(b []byte, id int64, method string, params json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id != 0 {
		b = append(b, `"id":`...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = appendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// appendResult appends an answer. id and result must be valid JSON.
func appendResult(b []byte, id, result json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// appendString appends s as a JSON string, escaping as encoding/json does.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// encodeValue returns v as JSON. A json.RawMessage is checked, not
// re-encoded: what this side writes must be valid JSON whoever built it.
func encodeValue(v any) (json.RawMessage, error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if len(p) == 0 {
			return nil, nil // no value: the member is left out
		}
		if !json.Valid(p) {
			return nil, errInvalidRaw
		}
		return p, nil
	default:
		return json.Marshal(p)
	}
}

var errInvalidRaw = errors.New("wire: a json.RawMessage value is not valid JSON")
