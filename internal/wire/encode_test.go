package wire

import (
	"encoding/json"
	"testing"
)

func TestEncodeValue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      any
		want    string
		wantErr bool
	}{
		{"nil", nil, "", false},
		{"an empty raw message is no value", json.RawMessage(nil), "", false},
		{"a raw message passes through", json.RawMessage(`{"a":1}`), `{"a":1}`, false},
		{"an invalid raw message is refused", json.RawMessage(`{"a":`), "", true},
		{"a value is marshalled", map[string]int{"a": 1}, `{"a":1}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := encodeValue(tc.in)
			if (err != nil) != tc.wantErr || string(got) != tc.want {
				t.Fatalf("encodeValue(%v) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
	if b := appendRequest(nil, 7, "tools/list", nil); string(b) != `{"jsonrpc":"2.0","id":7,"method":"tools/list"}` {
		t.Errorf("a request without params: %s", b)
	}
	if b := appendRequest(nil, 0, `a"<b>`, json.RawMessage(`[]`)); string(b) != `{"jsonrpc":"2.0","method":"a\"\u003cb\u003e","params":[]}` {
		t.Errorf("a notification with a method to escape: %s", b)
	}
}
