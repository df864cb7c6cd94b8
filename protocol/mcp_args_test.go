package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpl-go/mcpl/protocol"
)

func TestToolArguments(t *testing.T) {
	for raw, want := range map[string]struct{ args, kind string }{
		``:        {`{}`, ""},
		` null `:  {`{}`, ""},
		`{"a":1}`: {`{"a":1}`, ""},
		` [1]`:    {"", "an array"},
		`"x"`:     {"", "a string"},
		`-3.5`:    {"", "a number"},
		`false`:   {"", "true or false"},
	} {
		args, kind := protocol.ToolArguments(json.RawMessage(raw))
		if string(args) != want.args || kind != want.kind {
			t.Errorf("ToolArguments(%q) = %q, %q; want %q, %q", raw, args, kind, want.args, want.kind)
		}
	}
}
