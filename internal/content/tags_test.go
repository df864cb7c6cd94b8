package content

import (
	"slices"
	"testing"
)

func TestCloseTags(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{nil, []string{}},
		{[]string{"chat:mention"}, []string{"chat:mention", "chat:addressed"}},
		{[]string{"chat:reply"}, []string{"chat:reply", "chat:addressed"}},
		{[]string{"chat:dm"}, []string{"chat:dm", "chat:addressed", "chat:private"}},
		{[]string{"chat:ambient", "chat:mention"}, []string{"chat:mention", "chat:addressed"}},
		{[]string{"chat:ambient", "chat:addressed"}, []string{"chat:addressed"}},
		{[]string{"chat:ambient"}, []string{"chat:ambient"}},
		{[]string{"chat:mention", "chat:mention", "chat:addressed"}, []string{"chat:mention", "chat:addressed"}},
		// A producer's own namespace is never expanded, and a bare word
		// passes through untouched: tags authorize nothing.
		{[]string{"discord:ping", "mention"}, []string{"discord:ping", "mention"}},
	} {
		if got := Close(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Close(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
