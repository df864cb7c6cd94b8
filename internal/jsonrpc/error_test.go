package jsonrpc

import (
	"encoding/json"
	"testing"
)

func TestNewError(t *testing.T) {
	e := NewError(-32001, "busy", map[string]int{"retryAfter": 5})
	if e.Code != -32001 || e.Message != "busy" || string(e.Data) != `{"retryAfter":5}` {
		t.Fatalf("got %+v", e)
	}
	if e.Error() != "jsonrpc error -32001: busy" {
		t.Fatalf("Error() = %q", e.Error())
	}
	if e := NewError(1, "m", nil); e.Data != nil {
		t.Fatalf("nil data became %s", e.Data)
	}
	if e := NewError(1, "m", func() {}); e.Data != nil {
		t.Fatalf("data that does not encode became %s", e.Data)
	}
	var nilErr *Error
	if got := nilErr.Error(); got != "jsonrpc error <nil>" {
		t.Fatalf("nil Error() = %q", got)
	}
}

// The object is encoded as JSON-RPC 2.0 §5.1 says, data left out when empty.
func TestErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		want string
	}{
		{&Error{Code: CodeMethodNotFound, Message: "method not found: x"}, `{"code":-32601,"message":"method not found: x"}`},
		{NewError(CodeInvalidParams, "bad", []int{1}), `{"code":-32602,"message":"bad","data":[1]}`},
	} {
		b, err := json.Marshal(tc.e)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, want %s", tc.e, b, tc.want)
		}
	}
}
