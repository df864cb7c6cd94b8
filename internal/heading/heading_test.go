package heading

import "testing"

// The mark is a text an agent reads (docs/texts.md), pinned word for word.
func TestAddressedMark(t *testing.T) {
	if AddressedMark != " · addressed to you · " {
		t.Errorf("AddressedMark = %q", AddressedMark)
	}
}
