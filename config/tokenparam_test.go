package config_test

import (
	"testing"

	"github.com/mcpl-go/mcpl/config"
)

// A ws:// server with tokenEnv may name the query parameter its token is
// sent in; without tokenParam the token goes in the Authorization header.
func TestTokenParam(t *testing.T) {
	cfg, err := config.Parse([]byte("servers:\n  - id: r\n    url: wss://example.com/mcpl?room=a\n    tokenEnv: R_TOKEN\n    tokenParam: token\n  - id: h\n    url: https://example.com/mcp\n    tokenEnv: H_TOKEN\n"), "c.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Servers[0]; s.TokenParam != "token" || s.TokenEnv != "R_TOKEN" || s.URL != "wss://example.com/mcpl?room=a" {
		t.Errorf("servers[0] = %+v", s)
	}
	if s := cfg.Servers[1]; s.TokenParam != "" || s.TokenEnv != "H_TOKEN" {
		t.Errorf("servers[1] = %+v", s)
	}
}
