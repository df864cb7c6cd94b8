package transport

import (
	"net/url"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"ws://user:s3cret@example.com:8080/mcp?token=abc#frag", "ws://REDACTED@example.com:8080/mcp?REDACTED#REDACTED"},
		{"wss://example.com/mcp", "wss://example.com/mcp"},
		{"ws://127.0.0.1:9000", "ws://127.0.0.1:9000"},
		{"ws://user@host/p", "ws://REDACTED@host/p"},
		{"ws://:s3cret@host/p", "ws://REDACTED@host/p"},
		{"ws://host/p?", "ws://host/p?"},
		{"ws://host/p#frag", "ws://host/p#REDACTED"},
		{"ws://host/a%2Fb?token=abc", "ws://host/a%2Fb?REDACTED"},
		{"WS://[::1]:80/x?token=abc", "ws://[::1]:80/x?REDACTED"},
		{"https://us%40er:p%3Ass@host/?a=1&b=2", "https://REDACTED@host/?REDACTED"},
		// Not scheme://host: nothing of the input is kept.
		{"ws://user:s3c/ret@host", "(unparsable URL)"}, // "s3c" would be an invalid port
		{"user:s3cret@host:8080", "(unparsable URL)"},  // opaque
		{"host:8080/x?token=abc", "(unparsable URL)"},
		{"/relative?token=abc", "(unparsable URL)"},
		{"ws:///path?token=abc", "(unparsable URL)"},
		{"ws://host/%zz?token=abc", "(unparsable URL)"},
		{"ws://us%zzer:s3cret@host/", "(unparsable URL)"},
		{"ws://host\n/?token=abc", "(unparsable URL)"},
		{"", "(unparsable URL)"},
	} {
		got := RedactURL(tc.in)
		if got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, secret := range []string{"s3c", "abc", "token", "user", "us%", "frag", "p%3A"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactURL(%q) = %q holds %q", tc.in, got, secret)
			}
		}
	}
}

func TestSecretsScrub(t *testing.T) {
	t.Parallel()
	var s secrets
	s.addRaw(`ws://alice:s3%2Fcr"et@127.0.0.1:1/x?token=a%20bcd&flag=1#fr4gment`)
	text := `Get "http://alice:s3%2Fcr\"et@127.0.0.1:1/x?token=a%20bcd&flag=1": ` +
		`alice:s3/cr"et; s3/cr"et; token=a bcd&flag=1; a bcd; a%20bcd; fr4gment; port 1`
	got := s.scrub(text)
	for _, secret := range []string{"alice", "s3", "token", "bcd", "fr4gment"} {
		if strings.Contains(got, secret) {
			t.Errorf("scrub left %q in %q", secret, got)
		}
	}
	// Strings too short to be told from chance are left, so that the rest
	// of the message stays readable.
	if !strings.HasSuffix(got, "; port 1") || !strings.Contains(got, "127.0.0.1:1") {
		t.Errorf("scrub garbled the text around the secrets: %q", got)
	}

	var none secrets
	none.addRaw("ws://127.0.0.1:1/x")
	if got := none.scrub("dial tcp 127.0.0.1:1: connect: connection refused"); got != "dial tcp 127.0.0.1:1: connect: connection refused" {
		t.Errorf("scrub without secrets changed the text to %q", got)
	}

	// An unparsable URL still gives up its query and userinfo.
	var bad secrets
	bad.addRaw("ws://bob:hunter2@host:x/?key=v4lue")
	if got := bad.scrub("bob:hunter2 key=v4lue"); strings.Contains(got, "hunter2") || strings.Contains(got, "v4lue") {
		t.Errorf("scrub with an unparsable URL's secrets = %q", got)
	}
}

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"http://127.0.0.1:8080/a", "http://127.0.0.1:8080/b?x=1", true},
		{"http://127.0.0.1:8080/a", "ws://127.0.0.1:8080/b", true},
		{"https://Example.com/a", "wss://example.com:443/b", true},
		{"http://example.com/a", "http://example.com:80/b", true},
		{"http://127.0.0.1:8080/a", "http://127.0.0.1:8081/a", false},
		{"http://127.0.0.1:8080/a", "https://127.0.0.1:8080/a", false},
		{"http://127.0.0.1:8080/a", "http://localhost:8080/a", false},
		{"https://example.com/a", "http://example.com/a", false},
		{"http://example.com/a", "http://example.com.evil.test/a", false},
		{"http://example.com/a", "ftp://example.com/a", false},
	} {
		a, err := url.Parse(tc.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := url.Parse(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := sameOrigin(a, b); got != tc.want {
			t.Errorf("sameOrigin(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
