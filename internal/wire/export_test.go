package wire

// For the tests of the reading role.
const (
	QuietAfter = quietAfter
	CtxPoll    = ctxPoll
)
