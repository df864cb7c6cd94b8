package transport

// Test helpers, for the tests in package transport_test (which can import
// internal/testserver; a test inside the package cannot, as testserver
// imports transport).
var (
	DiscardLogger = discardLogger
	ReadWithin    = readWithin
	ReadUntilErr  = readUntilErr
	TestCtx       = testCtx
	IsTooLarge    = tooLarge
)

const TestTimeout = testTimeout

type LogRecorder = logRecorder
