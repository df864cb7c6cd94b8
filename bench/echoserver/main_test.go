package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpl-go/mcpl/bench/internal/canned"
)

// TestServe runs serve over a script of lines and checks each answer: the
// fast path, the slow path, raw echo, and what gets no answer.
func TestServe(t *testing.T) {
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":` + canned.Args + `}}`
	}
	cases := []struct {
		name, in string
		want     string // "" for no answer; else the answer's id, or "raw"
		method   string // for a result: what kind ("call", "init", "error", "other")
	}{
		{"fast path, number id", call("42"), "42", "call"},
		{"fast path, string id", call(`"a-1"`), `"a-1"`, "call"},
		{"id after params", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"id":9}},"id":7}`, "7", "call"},
		{"escaped string id", `{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{}}`, `"a\"b"`, "call"},
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "1", "init"},
		{"tools/list", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "2", "other"},
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"server/discover"}`, "3", "error"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", ""},
		{"an answer", `{"jsonrpc":"2.0","id":5,"result":{}}`, "", ""},
		{"raw line", "#" + call("1"), "raw", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			if err := serve(strings.NewReader(tc.in+"\n"), &out, true); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			switch {
			case tc.want == "":
				if got != "" {
					t.Fatalf("answered %q, want nothing", got)
				}
				return
			case tc.want == "raw":
				if got != tc.in+"\n" {
					t.Fatalf("echoed %q, want the line back", got)
				}
				return
			}
			if strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
				t.Fatalf("answer is not one line: %q", got)
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result *struct {
					Content []struct {
						Type, Text string
					} `json:"content"`
					Capabilities map[string]json.RawMessage `json:"capabilities"`
				} `json:"result"`
				Error *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(got), &m); err != nil {
				t.Fatalf("answer is not JSON: %v: %q", err, got)
			}
			if string(m.ID) != tc.want {
				t.Fatalf("id %s, want %s", m.ID, tc.want)
			}
			switch tc.method {
			case "call":
				if m.Result == nil || len(m.Result.Content) != 1 || m.Result.Content[0].Text != canned.Text {
					t.Fatalf("not the canned result: %q", got)
				}
			case "init":
				if m.Result == nil || !strings.Contains(string(m.Result.Capabilities["experimental"]), `"mcpl"`) {
					t.Fatalf("initialize does not advertise MCPL: %q", got)
				}
			case "error":
				if m.Error == nil || m.Error.Code != -32601 {
					t.Fatalf("want method not found: %q", got)
				}
			}
		})
	}
}

// TestServeLongLine checks that a line longer than the read buffer is
// answered whole.
func TestServeLongLine(t *testing.T) {
	line := "#" + strings.Repeat("x", 200<<10)
	var out strings.Builder
	if err := serve(strings.NewReader(line+"\n"+line+"\n"), &out, false); err != nil {
		t.Fatal(err)
	}
	if out.String() != line+"\n"+line+"\n" {
		t.Fatalf("long lines not echoed whole (%d bytes back)", out.Len())
	}
}
