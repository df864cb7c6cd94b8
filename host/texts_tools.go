package host

import (
	"fmt"

	"github.com/mcpl-go/mcpl/internal/content"
)

// The texts a caller of a tool (the model, a script, an operator) reads
// when the host refuses the call before it runs, or its server reports an
// error without words. They are a contract (seeds/002), pinned verbatim by
// tests; a request that failed on the wire reads as texts_request.go words
// it. A tool's name is the caller's, which named a server's tool: it goes
// through content.Clean, as every server string in a host text does.

// textServerGone: the tool's server is not in the registry, and nothing
// will bring it back on its own.
func textServerGone(server, tool string) string {
	return fmt.Sprintf(`The "%s" server that provides %s isn't connected, and this host won't reconnect to it on its own, so the call didn't run. If you need it, ask whoever runs this host.`, server, content.Clean(tool))
}

// textServerConnecting: the tool's server has a connect in flight.
func textServerConnecting(server, tool string) string {
	return fmt.Sprintf(`This host is connecting to the "%s" server that provides %s, so the call didn't run. Try again in a moment.`, server, content.Clean(tool))
}

// textToolDenied: host policy does not allow the tool (by name, or the
// server's tools as a whole).
func textToolDenied(server, tool string) string {
	return fmt.Sprintf(`%s isn't allowed by this host's policy for the "%s" server, so the call didn't run, and calling it again won't change that. If you need it, ask whoever runs this host.`, content.Clean(tool), server)
}

// textToolErrorNoWords: an isError result with no text, or only
// whitespace.
func textToolErrorNoWords(server, tool string) string {
	return fmt.Sprintf(`The "%s" server reported an error for %s without saying what went wrong. Whether it did anything is unknown: check before calling it again.`, server, content.Clean(tool))
}

// textOutputSchemaBroken: the tool declares an outputSchema and its
// answer's structuredContent breaks it (outputschema.go). The validator's
// words quote the server's value, so they go to the log only.
func textOutputSchemaBroken(server, tool string) string {
	return fmt.Sprintf(`The "%s" server answered %s, but its structured result does not match the output schema the tool declares, so this host did not use it. The call ran and may have taken effect: check before calling it again.`, server, content.Clean(tool))
}

// textNoSuchTool: no server's prefix matches the name. The seed gives no
// text; this says the same three things the others do.
func textNoSuchTool(name string) string {
	return fmt.Sprintf(`This host has no tool named %s, so the call didn't run. Call one of the tools this host lists.`, content.Clean(name))
}

// textArgsNotJSON: the call's arguments are not JSON, so nothing was sent.
func textArgsNotJSON(tool string) string {
	return fmt.Sprintf(`The arguments for %s aren't valid JSON, so the call didn't run. Call it again with its arguments as a JSON object.`, content.Clean(tool))
}

// textArgsNotObject: the call's arguments are JSON, but not an object (kind
// says what they are: "an array", "a string", ...), so nothing was sent.
func textArgsNotObject(tool, kind string) string {
	return fmt.Sprintf(`The arguments for %s are %s, not a JSON object, so the call didn't run. Call it again with its arguments as a JSON object.`, content.Clean(tool), kind)
}
