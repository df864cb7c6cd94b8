package protocol

import (
	"encoding/json"
	"testing"
)

func TestCallToolResultText(t *testing.T) {
	var r CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[{"type":"text","text":"a"},{"type":"image","data":"x","mimeType":"image/png"},{"type":"text","text":"b"},42],"isError":true,"extra":1}`), &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Text(); got != "a\nb" {
		t.Errorf("Text() = %q, want %q", got, "a\nb")
	}
	if !r.IsError || len(r.Content) != 4 {
		t.Errorf("decoded %+v", r)
	}
}

func TestMCPLAdvertisement(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{`{}`, ""},
		{`{"experimental":{}}`, ""},
		{`{"experimental":{"mcpl":null}}`, ""},
		{`{"experimental":{"mcpl":{"version":"0.5"}}}`, `{"version":"0.5"}`},
		{`{"experimental":{"mcpl":true}}`, `true`},
	} {
		var c ServerCapabilities
		if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
			t.Fatal(err)
		}
		if got := string(c.MCPL()); got != tc.want {
			t.Errorf("%s: MCPL() = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestInitializeResultTolerant(t *testing.T) {
	// interop.md item 10: no protocolVersion, no serverInfo; unknown fields.
	var r InitializeResult
	if err := json.Unmarshal([]byte(`{"capabilities":{"tools":{"listChanged":true},"logging":{}},"vendor":"x"}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.ServerInfo != nil || r.ProtocolVersion != "" || string(r.Capabilities.Tools) != `{"listChanged":true}` {
		t.Errorf("decoded %+v", r)
	}
}
