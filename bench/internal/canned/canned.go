// Package canned holds what the benchmark's clients send and what its echo
// server answers, so that both sides, and the check of each answer, agree
// on the bytes.
package canned

// Tool is the one tool the echo server lists.
const Tool = "echo"

// Args are the arguments of every tools/call the clients make: a short
// text, so that a request line is about 150 bytes, the size of a typical
// small tool call. They hold no "id" member: the echo server finds the
// request's id as the first "id" in the line.
const Args = `{"text":"the quick brown fox jumps over the lazy dog, twice: the quick brown fox"}`

// Text is the text of the one content block of every tools/call result:
// with the envelope around it, a result of about 150 bytes.
const Text = "the lazy dog sleeps in the sun while the quick brown fox jumps over it again and again, all afternoon, until dusk"

// ServerName is the echo server's serverInfo name.
const ServerName = "mcplbench-echo"
