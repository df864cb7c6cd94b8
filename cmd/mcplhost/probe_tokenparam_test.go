package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// tokenGate serves, on 127.0.0.1, a proxy to the WebSocket server at
// target that lets a request through only when its query parameter token
// is tok, and otherwise refuses it with a body that quotes the request
// (as a careless server might). It returns the proxy's ws:// URL.
func tokenGate(t *testing.T, target, tok string) string {
	t.Helper()
	u, err := url.Parse(strings.Replace(target, "ws://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: u.Host})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") != tok {
			http.Error(w, "no entry for "+r.URL.String(), http.StatusUnauthorized)
			return
		}
		r.URL.RawQuery = ""
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return "ws" + strings.TrimPrefix(ts.URL, "http") + u.Path
}

// probe --token-param sends the token in the URL's query: a server that
// reads it there accepts; one that does not find it refuses, and neither
// the report, the error nor the verbose log shows the token.
func TestProbeTokenParam(t *testing.T) {
	const tok = "probe-s3cret-tok"
	t.Setenv("MCPL_TP_TOKEN", tok)
	gate := tokenGate(t, startWebSocketServer(t), tok)

	code, stdout, stderr := runCLI("probe", "-v", "--url", gate, "--token-env", "MCPL_TP_TOKEN", "--token-param", "token",
		"--call", "echo", `{"text":"through the gate"}`)
	if code != exitOK || !strings.Contains(stdout, "through the gate") {
		t.Fatalf("probe with --token-param: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "s3cret") {
		t.Errorf("the token shows in the output:\n%s\n%s", stdout, stderr)
	}

	code, stdout, stderr = runCLI("probe", "-v", "--url", gate, "--token-env", "MCPL_TP_TOKEN", "--token-param", "key")
	if code != exitFail || !strings.Contains(stderr, "could not connect") {
		t.Fatalf("probe with the wrong --token-param: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "s3cret") {
		t.Errorf("the token shows in the output:\n%s\n%s", stdout, stderr)
	}

	for _, args := range [][]string{
		{"probe", "--url", gate, "--token-param", "token"},
		{"probe", "--url", "http://127.0.0.1:1/mcp", "--token-env", "MCPL_TP_TOKEN", "--token-param", "token"},
	} {
		if code, _, stderr := runCLI(args...); code != exitUsage || !strings.Contains(stderr, "--token-param applies only with") {
			t.Errorf("%v: exit %d, stderr %s", args, code, stderr)
		}
	}
}
