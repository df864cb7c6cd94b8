package status

import (
	"net/netip"
	"testing"
)

func TestHostAllowed(t *testing.T) {
	v4 := netip.MustParseAddrPort("127.0.0.1:8080")
	v6 := netip.MustParseAddrPort("[::1]:8080")
	any4 := netip.MustParseAddrPort("0.0.0.0:8080")
	lan := netip.MustParseAddrPort("192.0.2.7:8080")
	port80 := netip.MustParseAddrPort("127.0.0.1:80")
	none := netip.AddrPort{}
	for _, tc := range []struct {
		host          string
		listen, local netip.AddrPort
		name          string
		want          bool
	}{
		{"127.0.0.1:8080", v4, v4, "", true},
		{"localhost:8080", v4, v4, "", true},
		{"LocalHost:8080", v4, v4, "", true},
		{"[::1]:8080", v6, v6, "", true},
		{"localhost:8080", v6, v6, "", true},
		{"[0:0::1]:8080", v6, v6, "", true},  // the same address, written longer
		{"0.0.0.0:8080", any4, v4, "", true}, // the URL run prints
		{"127.0.0.1:8080", any4, v4, "", true},
		{"192.0.2.7:8080", any4, lan, "", true},
		{"status.example:8080", lan, lan, "status.example", true},
		{"STATUS.example:8080", lan, lan, "status.example", true},
		{"127.0.0.1", port80, port80, "", true},
		{"localhost", port80, port80, "", true},
		{"127.0.0.1:80", port80, port80, "", true},

		{"evil.example:8080", v4, v4, "", false},
		{"evil.example:8080", lan, lan, "status.example", false},
		{"evil.example", port80, port80, "", false},
		{"", v4, v4, "", false},                 // no Host (HTTP/1.0)
		{"127.0.0.1:8081", v4, v4, "", false},   // another port
		{"127.0.0.1", v4, v4, "", false},        // port 80 meant, not 8080
		{"127.0.0.1:08080", v4, v4, "", false},  // not as a browser writes it
		{"[::1]:8080", v4, v4, "", false},       // another address
		{"127.0.0.2:8080", v4, v4, "", false},   // another loopback address
		{"localhost:8080", any4, v4, "", false}, // a wildcard is no loopback
		{"localhost:8080", lan, lan, "", false},
		{"192.0.2.8:8080", any4, lan, "", false},
		{"localhost.:8080", v4, v4, "", false},
		{"::1:8080", v6, v6, "", false},
		{"[fe80::1%25eth0]:8080", v6, v6, "", false},
		{"127.0.0.1:8080", none, none, "", false},
		{"127.0.0.1:8080:8080", v4, v4, "", false},
		{"127.0.0.1:x", v4, v4, "", false},
	} {
		if got := hostAllowed(tc.host, tc.listen, tc.local, tc.name); got != tc.want {
			t.Errorf("Host %q, listening on %s (name %q), reached at %s: allowed %v, want %v", tc.host, tc.listen, tc.name, tc.local, got, tc.want)
		}
	}
}
