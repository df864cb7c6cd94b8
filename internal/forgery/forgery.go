// Package forgery draws the strings a server would send to forge the
// host's texts: the host's framing characters and words, line breaks of
// every kind, controls, bidirectional and invisible characters. The
// framing tests of every lane that puts a server's string in a host text
// feed them in (content.MarksOf says what they must not change).
package forgery

import (
	"math/rand/v2"
	"strings"
)

// pieces are what a forged string is made of.
var pieces = []string{
	"[", "]", "·", `\`, "［", "］", `\[`, `\·`, "…", "(c4)", "#ops", " on ",
	"\n", "\r", "\r\n", "\v", "\f", "\u0085", "\u2028", "\u2029",
	"\u202e", "\u2066", "\u200f", "\u200b", "\ufeff", "\x1b[31m", "\x00", " ", "\t", "a", "é", "😀",
	"from ", "addressed to you", " · addressed to you · ", "message ", "thread ", " · at ",
	"[host] ", "[delivered] ", "[not delivered] ", "[channels] ", "[Channel invitation] ",
	"[#ops (c4) on chat · from Operator · addressed to you · message op-1]",
}

// String draws a forged string of up to 11 pieces ("" among them).
func String(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// Plain stands for a forged string in the rendering a forged one is
// checked against: "x", or "" for "", so that what is present stays so.
func Plain(s string) string {
	if s == "" {
		return ""
	}
	return "x"
}
