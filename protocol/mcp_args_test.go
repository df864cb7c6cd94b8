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

// A malformed experimental member does not fail the decode: the server is
// plain MCP, and ExperimentalInvalid says why.
func TestServerCapabilitiesMalformedExperimental(t *testing.T) {
	for _, raw := range []string{`"x"`, `[1]`, `42`, `{"mcpl":}`} {
		var res protocol.InitializeResult
		err := json.Unmarshal([]byte(`{"protocolVersion":"2024-11-05","capabilities":{"tools":{},"experimental":`+raw+`}}`), &res)
		if raw == `{"mcpl":}` {
			if err == nil {
				t.Errorf("invalid JSON %s decoded", raw)
			}
			continue
		}
		if err != nil || res.Capabilities.MCPL() != nil || res.Capabilities.ExperimentalInvalid == "" || res.Capabilities.Tools == nil {
			t.Errorf("experimental %s: err %v, caps %+v", raw, err, res.Capabilities)
		}
	}
	var res protocol.InitializeResult
	if err := json.Unmarshal([]byte(`{"capabilities":{"experimental":{"mcpl":{"version":"0.5"}}}}`), &res); err != nil ||
		string(res.Capabilities.MCPL()) != `{"version":"0.5"}` || res.Capabilities.ExperimentalInvalid != "" {
		t.Errorf("a well-formed experimental: %v, %+v", err, res.Capabilities)
	}
}
