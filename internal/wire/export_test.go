package wire

// For the tests of the reading role.
const (
	QuietAfter = quietAfter
	CtxPoll    = ctxPoll
)

// MCP's method names, which package protocol names too.
const (
	MethodCancelled  = methodCancelled
	MethodInitialize = methodInitialize
	CancelWrite      = cancelWrite
)
