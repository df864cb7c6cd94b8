package host

import "testing"

// match picks the one prefix a name carries; among prefixes that meet,
// the first id; and it allocates nothing, as it runs on every call.
func TestMatch(t *testing.T) {
	prefixes := map[string]string{"b": "a-", "a": "a", "c": "chat", "d": "chat-x"}
	for _, tc := range []struct{ name, id, tool string }{
		{"a---x", "a", "-x"}, // "a" and "a-" both carry it: id order
		{"a--x", "a", "x"},
		{"chat--send", "c", "send"},
		{"chat-x--send", "d", "send"},
		{"chat--", "", ""},
		{"chatx--send", "", ""},
		{"nope--x", "", ""},
	} {
		id, tool, ok := match(prefixes, tc.name)
		if id != tc.id || tool != tc.tool || ok != (tc.id != "") {
			t.Errorf("match(%q) = %q %q %v; want %q %q", tc.name, id, tool, ok, tc.id, tc.tool)
		}
	}
	if n := testing.AllocsPerRun(100, func() { match(prefixes, "chat-x--send") }); n != 0 {
		t.Errorf("match allocates %v times a call", n)
	}
}
