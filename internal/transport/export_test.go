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

// Registered reports whether KillAll would reach p's process group.
func (p *Process) Registered() bool {
	groups.mu.Lock()
	defer groups.mu.Unlock()
	_, ok := groups.m[p]
	return ok
}

// WriteTurnTaken reports whether a Write holds p's turn to write.
func (p *Process) WriteTurnTaken() bool { return len(p.wsem) > 0 }
