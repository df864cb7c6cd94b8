package redact

import (
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"invalid x-api-key sk-mock-SECRET", "invalid x-api-key [redacted]"},
		{"Incorrect API key provided: sk-proj-****abcd. See the docs.", "Incorrect API key provided: [redacted]. See the docs."},
		{"key sk-ant-api03-AbC_dEf-123 rejected", "key [redacted] rejected"},
		{"Authorization: Bearer eyJhbGciOi.J9.xyz-_~+/ failed", "Authorization: Bearer [redacted] failed"},
		{"bearer abc=", "bearer [redacted]"},
		{"header x-api-key: hunter2hunter2 was sent", "header x-api-key: [redacted] was sent"},
		{`{"api_key":"k-12345"}`, `{"api_key":"[redacted]"}`},
		{"api-key=abc;rest", "api-key=[redacted];rest"},
		{"token 0123456789abcdef0123456789abcdef01234567 leaked", "token [redacted] leaked"},
		{"b64 QWxhZGRpbjpvcGVuIHNlc2FtZQ9876543210ab+/== end", "b64 [redacted] end"},
		// Kept: no key shape.
		{"messages.0.content.1.tool_use.input: Field required", "messages.0.content.1.tool_use.input: Field required"},
		{"tool mcp__weather_server__get_current_conditions_v2 failed", "tool mcp__weather_server__get_current_conditions_v2 failed"},
		{"request 123e4567-e89b-12d3-a456-426614174000", "request 123e4567-e89b-12d3-a456-426614174000"},
		{"model claude-sonnet-4-5-20250929 overloaded", "model claude-sonnet-4-5-20250929 overloaded"},
		{"ANTHROPIC_API_KEY is unset", "ANTHROPIC_API_KEY is unset"},
		{"abcdefghijklmnopqrstuvwxyzabcdefghij", "abcdefghijklmnopqrstuvwxyzabcdefghij"},
		{"", ""},
	} {
		if got := Keys(tc.in); got != tc.want {
			t.Errorf("Keys(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestKey(t *testing.T) {
	got := Key("echo short1 and sk-ant-other-0000", "short1")
	if strings.Contains(got, "short1") || strings.Contains(got, "sk-ant") || strings.Count(got, Mark) != 2 {
		t.Errorf("Key = %q, want both removed", got)
	}
	if got := Key("plain", ""); got != "plain" {
		t.Errorf("Key with no key = %q", got)
	}
}
