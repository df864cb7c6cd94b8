package status

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// guardHost serves next only requests whose Host header names the address
// the status server listens on; the rest get 421 Misdirected Request, on
// every path, with a plain-text body saying why. This is the defence
// against DNS rebinding: a page the operator's browser loads from a name
// the attacker controls, which then resolves that name to this machine,
// sends its requests with that name in Host, and the same-origin policy
// would let it read the answers.
//
// listen is the listener's address, and name the host part of the address
// the operator gave when it is a name rather than an IP literal
// ("localhost", "status.example"), else "". The Host header is accepted
// when, compared without regard to case, its port is the port listened on
// (it may be left out only when that is 80) and its host is one of:
//
//   - the IP address listened on, as a literal: 127.0.0.1, [::1], and
//     0.0.0.0 or [::] too (that is the address the page's URL shows);
//   - the IP address the connection was made to: 192.0.2.7 for a server
//     listening on 0.0.0.0 and reached at that address;
//   - localhost, when the address listened on is a loopback one;
//   - name, the name the operator listened on.
//
// No other name is accepted, not even the machine's own host name: use an
// address (an IP literal can't be rebound, and a page from another origin
// that asks an IP literal can't read the answer) or listen on the name.
// A request with no Host at all (HTTP/1.0 allows it) is refused too:
// browsers always send one, and so do curl and Prometheus.
func guardHost(next http.Handler, listen net.Addr, name string) http.Handler {
	la, _ := addrPort(listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		ca, _ := addrPort(local)
		if hostAllowed(r.Host, la, ca, name) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusMisdirectedRequest)
		fmt.Fprint(w, misdirected(r.Host, la, name))
	})
}

// addrPort is a TCP address, unmapped, without a zone; ok is false when
// there is none.
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := tcp.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()), ap.IsValid()
}

// hostAllowed says whether host (a Host header) names the server
// listening on listen, reached at local, as guardHost says.
func hostAllowed(host string, listen, local netip.AddrPort, name string) bool {
	if !listen.IsValid() || host == "" {
		return false
	}
	h, port := host, "80"
	if hh, p, err := net.SplitHostPort(host); err == nil {
		h, port = hh, p
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		h = host[1 : len(host)-1] // an IPv6 literal without a port
	} else if strings.Contains(host, ":") {
		return false
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || uint16(n) != listen.Port() || port != strconv.FormatUint(n, 10) {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		a = a.Unmap()
		return a.Zone() == "" && (a == listen.Addr() || local.IsValid() && a == local.Addr())
	}
	switch {
	case strings.EqualFold(h, "localhost"):
		return listen.Addr().IsLoopback()
	case name != "":
		return strings.EqualFold(h, name)
	}
	return false
}

// misdirected is the 421's body: what was refused, why, and the address
// to use instead.
func misdirected(host string, listen netip.AddrPort, name string) string {
	said := fmt.Sprintf("the Host header said %q", host)
	if host == "" {
		said = "the request had no Host header"
	}
	use := "http://" + listen.String() + "/"
	switch {
	case name != "":
		use += " (or " + name + " with that port)"
	case listen.Addr().IsLoopback():
		use += " (or localhost with that port)"
	case listen.Addr().IsUnspecified():
		use = "this machine's IP address with port " + strconv.Itoa(int(listen.Port()))
	}
	return "mcplhost status: refused, nothing served: " + said + ", and this server answers only requests addressed to " +
		use + ". A page from another name may be trying to read the host's status through DNS rebinding; " +
		"open the status page by its address instead.\n"
}

// listenNetwork is the network to listen on addr (as ListenAddr gives
// it) with: an IPv4 literal, 0.0.0.0 included, listens on IPv4 only
// ("tcp4"), and an IPv6 literal, [::] included, on IPv6 only ("tcp6",
// for which the standard library sets IPV6_V6ONLY), so that an operator
// who names one family's wildcard does not also open the other's. A name
// (localhost) is resolved and listened on as "tcp" does: at its first
// IPv4 address, or its first address when it has none.
func listenNetwork(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "tcp"
	}
	a, err := netip.ParseAddr(h)
	switch {
	case err != nil:
		return "tcp"
	case a.Unmap().Is4():
		return "tcp4"
	default:
		return "tcp6"
	}
}

// hostName is addr's host part when it is a name, not an IP literal.
func hostName(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return ""
	}
	return h
}
