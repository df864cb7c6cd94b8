package protocol

import (
	"errors"
	"fmt"
	"testing"
)

// NewError is what a server's handlers return to answer with an error; its
// data is sent as encoded, and errors.As reaches it through a wrap.
func TestNewError(t *testing.T) {
	e := NewError(-32001, "busy", map[string]int{"retryAfter": 5})
	if e.Code != -32001 || e.Message != "busy" || string(e.Data) != `{"retryAfter":5}` {
		t.Fatalf("got %+v", e)
	}
	if e := NewError(1, "m", nil); e.Data != nil {
		t.Fatalf("nil data became %s", e.Data)
	}
	if e.Error() != "jsonrpc error -32001: busy" {
		t.Fatalf("Error() = %q", e.Error())
	}
	var got *Error
	if !errors.As(fmt.Errorf("call: %w", e), &got) || got != e {
		t.Fatalf("errors.As did not reach the *Error")
	}
}

// The standard codes are JSON-RPC 2.0's (§5.1).
func TestJSONRPCCodes(t *testing.T) {
	for code, want := range map[int64]int64{
		CodeParseError:     -32700,
		CodeInvalidRequest: -32600,
		CodeMethodNotFound: -32601,
		CodeInvalidParams:  -32602,
		CodeInternalError:  -32603,
	} {
		if code != want {
			t.Errorf("code %d, want %d", code, want)
		}
	}
}
