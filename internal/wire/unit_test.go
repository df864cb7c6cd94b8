package wire

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/mcpl-go/mcpl/internal/jsonrpc"
)

func TestParseClassifiesByShape(t *testing.T) {
	cases := []struct {
		line string
		want msgKind
	}{
		// Requests: method and id, whatever the id's type.
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, kindRequest},
		{`{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}`, kindRequest},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, kindRequest},
		{`  {"id":7,"method":"x"}  `, kindRequest},
		// A request that also carries result is still a request: method decides.
		{`{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, kindRequest},
		// Notifications: method alone.
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"a":1}}`, kindNotification},
		{`{"method":"x"}`, kindNotification},
		// Responses: result or error, an id, no method.
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, kindResponse},
		{`{"jsonrpc":"2.0","id":1,"result":null}`, kindResponse},
		{`{"jsonrpc":"2.0","id":"1","result":0}`, kindResponse},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}`, kindResponse},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, kindResponse},
		{`{"jsonrpc":"2.0","id":1,"result":{},"error":null}`, kindResponse},
		{`{"jsonrpc":"2.0","id":1,"error":null}`, kindResponse},
		// Noise: not an object, not JSON, or no JSON-RPC shape.
		{``, kindNoise},
		{`   `, kindNoise},
		{`null`, kindNoise},
		{`42`, kindNoise},
		{`"just a string"`, kindNoise},
		{`[1,2]`, kindNoise},
		{`[{"jsonrpc":"2.0","id":1,"method":"x"}]`, kindNoise},
		{`{"no":"jsonrpc"}`, kindNoise},
		{`{}`, kindNoise},
		{`{"jsonrpc":"2.0","id":1}`, kindNoise},
		{`{"jsonrpc":"2.0","result":{}}`, kindNoise},
		{`{"jsonrpc":"2.0","method":"","id":1}`, kindInvalidRequest},
		{`{"jsonrpc":"2.0","method":42,"id":1}`, kindInvalidRequest},
		{`{"jsonrpc":"2.0","method":42,"id":null}`, kindNoise},
		{`{"jsonrpc":"2.0","method":""}`, kindNoise},
		{`{"jsonrpc":"2.0","method":42,"id":1,"result":{}}`, kindNoise},
		{`{"jsonrpc":"2.0","id":1,"method":"x"`, kindNoise},
		{`Starting server on stdio...`, kindNoise},
		{`{not json}`, kindNoise},
		{"\x00\xff{", kindNoise},
	}
	for _, c := range cases {
		_, got := parse([]byte(c.line))
		if got != c.want {
			t.Errorf("parse(%q) = %d, want %d", c.line, got, c.want)
		}
	}
}

func TestParseKeepsFields(t *testing.T) {
	env, kind := parse([]byte(`{"jsonrpc":"2.0","id":"abc","method":"m/x","params":{"k":[1,2]}}`))
	if kind != kindRequest || env.Method != "m/x" || string(env.ID) != `"abc"` || string(env.Params) != `{"k":[1,2]}` {
		t.Fatalf("got kind %d env %+v", kind, env)
	}
	// An error of null beside a result is no error: the result stands.
	env, kind = parse([]byte(`{"jsonrpc":"2.0","id":3,"result":{"ok":true},"error":null}`))
	if kind != kindResponse || env.Error != nil || string(env.Result) != `{"ok":true}` {
		t.Fatalf("result with error null: kind %d, error %q, result %q", kind, env.Error, env.Result)
	}
	// An error of null alone answers with a null result.
	env, kind = parse([]byte(`{"jsonrpc":"2.0","id":3,"error":null}`))
	if kind != kindResponse || env.Error != nil || string(env.Result) != `null` {
		t.Fatalf("error null alone: kind %d, error %q, result %q", kind, env.Error, env.Result)
	}
}

func TestOurID(t *testing.T) {
	cases := []struct {
		raw  string
		id   int64
		want bool
	}{
		{`1`, 1, true},
		{`9007199254740993`, 9007199254740993, true},
		{` 12 `, 12, true},
		{`"5"`, 5, true}, // some peers echo ids as strings
		{`"abc"`, 0, false},
		{`""`, 0, false},
		{`null`, 0, false},
		{`1.5`, 0, false},
		{`{}`, 0, false},
		{`[1]`, 0, false},
		{`"`, 0, false},
		{``, 0, false},
		{`99999999999999999999`, 0, false},
	}
	for _, c := range cases {
		id, ok := ourID(json.RawMessage(c.raw))
		if ok != c.want || (ok && id != c.id) {
			t.Errorf("ourID(%s) = %d, %v; want %d, %v", c.raw, id, ok, c.id, c.want)
		}
	}
}

func TestErrorObjectLenient(t *testing.T) {
	cases := []struct {
		raw  string
		code int64
		msg  string
		data string
	}{
		{`{"code":-32000,"message":"disk full","data":{"free":0}}`, -32000, "disk full", `{"free":0}`},
		{`{"code":-32601,"message":"method not found"}`, -32601, "method not found", ""},
		{`{"code":-32000.0,"message":"float code"}`, -32000, "float code", ""},
		{`{"code":-3.2e4,"message":"exponent code"}`, -32000, "exponent code", ""},
		// A code that is not a number must not cost the server's words.
		{`{"code":"E42","message":"disk full"}`, 0, "disk full", ""},
		{`{"code":"-32001","message":"string code"}`, -32001, "string code", ""},
		{`{"code":null,"message":"null code"}`, 0, "null code", ""},
		{`{"code":{"x":1},"message":"object code"}`, 0, "object code", ""},
		{`{"message":"no code"}`, 0, "no code", ""},
		{`{"code":-1}`, -1, "", ""},
		{`{"code":-1,"message":null}`, -1, "", ""},
		{`{"code":-1,"message":{"why":"x"}}`, -1, `{"why":"x"}`, ""},
		{`{"code":-1,"message":17}`, -1, "17", ""},
		{`{"code":-1,"message":"m","data":"d"}`, -1, "m", `"d"`},
		// Not an object at all: a string is kept as words.
		{`"plain words"`, jsonrpc.CodeInternalError, "plain words", ""},
		{`42`, jsonrpc.CodeInternalError, "", ""},
		{`[1,2]`, jsonrpc.CodeInternalError, "", ""},
		{`true`, jsonrpc.CodeInternalError, "", ""},
	}
	for _, c := range cases {
		e := errorObject(json.RawMessage(c.raw))
		if e.Code != c.code || e.Message != c.msg || string(e.Data) != c.data {
			t.Errorf("errorObject(%s) = {%d %q %s}, want {%d %q %s}", c.raw, e.Code, e.Message, e.Data, c.code, c.msg, c.data)
		}
	}
}

func TestBoundForLog(t *testing.T) {
	if got := Cut("short", 10); got != "short" {
		t.Errorf("got %q", got)
	}
	if got := Cut("0123456789abc", 10); got != "0123456789…" {
		t.Errorf("got %q", got)
	}
	// A cut inside a multi-byte character backs off to its start.
	got := Cut("aaaaaaaaaé", 10) // é is 2 bytes at 9..10
	if got != "aaaaaaaaa…" || !utf8.ValidString(got) {
		t.Errorf("got %q", got)
	}
}

func TestAbandonedSetBounded(t *testing.T) {
	var a abandonedSet
	for i := int64(1); i <= abandonedKeep+10; i++ {
		a.add(i)
	}
	if len(a.ids) != abandonedKeep {
		t.Fatalf("holds %d ids, want %d", len(a.ids), abandonedKeep)
	}
	for i := int64(1); i <= 10; i++ {
		if a.has(i) {
			t.Errorf("oldest id %d still held", i)
		}
	}
	for _, i := range []int64{11, abandonedKeep, abandonedKeep + 10} {
		if !a.has(i) {
			t.Errorf("recent id %d forgotten", i)
		}
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{NotSent: "not-sent", NoResponse: "no-response", ErrorResponse: "error-response", BadResponse: "bad-response", Outcome(9): "Outcome(9)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(o), got, want)
		}
	}
}
