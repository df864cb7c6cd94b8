//go:build linux

package transport_test

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/mcpl-go/mcpl/internal/transport"
)

// The parent-death signal is the forking thread's, not the process's
// (golang/go#27505): a server spawned from a goroutine whose thread then
// ends (it locked the thread and returned without unlocking, so the
// runtime retires the thread) must still be alive once that thread is
// gone, because the fork was made on the forker's thread, which lives as
// long as the server. Were the fork made on the caller's thread, the
// kernel would SIGKILL the server as that thread exits, and the round
// trips below would find it dead.
func TestServerOutlivesTheSpawningThread(t *testing.T) {
	t.Parallel()
	type spawned struct {
		p      *transport.Process
		tid    int
		onMain bool
		err    error
	}
	// The runtime never ends the main thread (it parks it instead): a
	// goroutine that lands there holds it until the test's end, locked,
	// so that the next one lands on a thread that will end.
	release := make(chan struct{})
	held := make(chan struct{})
	t.Cleanup(func() {
		close(release)
		<-held
	})
	got := make(chan spawned, 1)
	var s spawned
	mainHeld := false
	for range 2 {
		go func() {
			runtime.LockOSThread() // never unlocked but on the main thread: the thread ends with this goroutine
			if syscall.Gettid() == os.Getpid() {
				got <- spawned{onMain: true}
				<-release
				runtime.UnlockOSThread()
				close(held)
				return
			}
			p, err := transport.Spawn(sh(`echo started; exec cat`), transport.StdioOptions{Logger: discardLogger})
			got <- spawned{p: p, tid: syscall.Gettid(), err: err}
		}()
		if s = <-got; !s.onMain {
			break
		}
		mainHeld = true
	}
	if !mainHeld {
		close(held) // nobody holds the main thread
	}
	if s.onMain {
		t.Fatal("both goroutines ran on the main thread")
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { s.p.Close() })
	readLine(t, s.p, "started")
	// A thread's end has no event here: poll /proc for it.
	task := "/proc/self/task/" + strconv.Itoa(s.tid)
	eventually(t, "the spawning goroutine's thread ends", func() bool {
		_, err := os.Stat(task)
		return os.IsNotExist(err)
	})
	for i := range 3 {
		if err := s.p.Write(testCtx(t, testTimeout), []byte("ping")); err != nil {
			t.Fatalf("write %d to the server after its spawning thread ended: %v (%+v)", i, err, s.p.CloseInfo())
		}
		readLine(t, s.p, "ping")
	}
	if info := s.p.CloseInfo(); info.Exited {
		t.Fatalf("the server exited: %+v", info)
	}
}
