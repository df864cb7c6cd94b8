package main

import "fmt"

// textToolErrorNoWords is what a caller reads for a tool's error result
// (isError) that carries no text, or only whitespace. When the host's tool
// path lands, it owns this text and probe reads it from there.
func textToolErrorNoWords(server, tool string) string {
	return fmt.Sprintf(`The "%s" server reported an error for %s without saying what went wrong. Whether it did anything is unknown: check before calling it again.`, server, tool)
}
