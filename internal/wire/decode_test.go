package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeResult decodes as json.Unmarshal does, value for value and error
// for error, call after call (its decoders are reused), whatever came
// before: a failed decode, a literal, a value with space after it.
func TestDecodeResultIsUnmarshal(t *testing.T) {
	type result struct {
		Content []json.RawMessage `json:"content"`
		IsError bool              `json:"isError"`
		N       int
		M       map[string]any
	}
	inputs := []string{
		`{"content":[{"type":"text","text":"hi"}],"isError":false}`,
		`{"N":"not a number"}`,
		`{"N":3,"M":{"a":[1,2,{"b":null}]}}`,
		`null`,
		`true`,
		`17`,
		`"a string"`,
		`[1,2]`,
		`{"N":1}   `,
		`{"content":[],"N":-1}`,
		`{"M":{"deep":{"deeper":{"deepest":[[[[1]]]]}}}}`,
	}
	for range 3 {
		for _, in := range inputs {
			var got, want result
			gotErr := decodeResult([]byte(in), &got)
			wantErr := json.Unmarshal([]byte(in), &want)
			if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Errorf("%s: error %v, want %v", in, gotErr, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: decoded %+v, want %+v", in, got, want)
			}
		}
	}
}

// A decode allocates less than json.Unmarshal of the same value once the
// decoders are warm (under -race sync.Pool drops some at random, so the
// bound is relative).
func TestDecodeResultAllocs(t *testing.T) {
	data := []byte(`{"N":3,"IsError":true,"M":{"a":[1,{"b":[2]}]}}`)
	var v struct {
		N       int
		IsError bool
		M       map[string]any
	}
	decodeResult(data, &v)
	got := testing.AllocsPerRun(200, func() { decodeResult(data, &v) })
	want := testing.AllocsPerRun(200, func() { json.Unmarshal(data, &v) })
	if got >= want {
		t.Errorf("decodeResult allocates %v times a value, json.Unmarshal %v; want fewer", got, want)
	}
	t.Logf("allocations a value: decodeResult %v, json.Unmarshal %v", got, want)
}
