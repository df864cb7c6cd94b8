package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// referenceEnvelope is what encoding/json makes of a message, for the
// members scanEnvelope reads. ok is false where json.Unmarshal fails.
func referenceEnvelope(b []byte) (envelope, bool) {
	var raw map[string]json.RawMessage
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return envelope{}, false
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return envelope{}, false
	}
	env := envelope{ID: raw["id"], Params: raw["params"], Result: raw["result"], Error: raw["error"]}
	if m, ok := raw["method"]; ok {
		// A method that is not a non-empty string marks the message as
		// an invalid request, answered -32600 when it has an id.
		err := json.Unmarshal(m, &env.Method)
		env.badMethod = err != nil || env.Method == ""
	}
	return env, true
}

var scanCases = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
	`{"jsonrpc":"2.0","id":"abc","result":{"content":[{"type":"text","text":"a\"b\\c\u00e9\n"}]}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	` { "id" : 1.5e3 , "result" : [ true , false , null , -0.25E-2 ] } `,
	`{}`, `{"no":"jsonrpc"}`, `{"method":42}`, `{"method":"a\u0062c"}`,
	`{"\u0069d":7,"result":{}}`, `{"id":1,"id":2,"result":{}}`,
	`null`, `42`, `"text"`, `[1,2]`, ``, `{`, `{"id":}`, `{"id":1,}`, `{"id":1 "x":2}`,
	`{"id":01}`, `{"id":-}`, `{"id":1.}`, `{"id":1e}`, `{"a":"\x"}`, `{"a":"\u12G4"}`,
	"{\"a\":\"tab\there\"}", `{"a":tru}`, `{"a":[1,]}`, `{"a":{"b":}}`, `{"id":1} x`, `{"id":1}{}`,
	"{\"a\":\"\xff\xfe\"}",
}

func TestScanEnvelopeMatchesEncodingJSON(t *testing.T) {
	for _, c := range scanCases {
		got, gotOK := scanEnvelope([]byte(c))
		want, wantOK := referenceEnvelope([]byte(c))
		if gotOK != wantOK {
			t.Errorf("%q: ok = %v, encoding/json says %v", c, gotOK, wantOK)
			continue
		}
		if gotOK {
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(envelope{})); diff != "" {
				t.Errorf("%q (-encoding/json +scan):\n%s", c, diff)
			}
		}
	}
}

func TestScanEnvelopeDepth(t *testing.T) {
	deep := make([]byte, 0, 2*maxDepth+100)
	deep = append(deep, `{"params":`...)
	for range maxDepth + 10 {
		deep = append(deep, '[')
	}
	if _, ok := scanEnvelope(deep); ok {
		t.Fatal("an unterminated deep message was accepted")
	}
}

func FuzzScanEnvelope(f *testing.F) {
	for _, c := range scanCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gotOK := scanEnvelope(b)
		want, wantOK := referenceEnvelope(b)
		if gotOK != wantOK {
			t.Fatalf("%q: ok = %v, encoding/json says %v", b, gotOK, wantOK)
		}
		if gotOK {
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(envelope{})); diff != "" {
				t.Fatalf("%q (-encoding/json +scan):\n%s", b, diff)
			}
		}
	})
}
