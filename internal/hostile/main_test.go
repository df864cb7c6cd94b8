package hostile_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/internal/hostile"
	"github.com/mcpl-go/mcpl/internal/procs"
)

// TestMain removes the built program, then fails the run if any test left
// a goroutine behind (a pipe reader, a process's wait).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		hostile.Cleanup()
		os.Exit(code)
	}))
}

// waitFor bounds every wait for something that should happen.
const waitFor = 10 * time.Second

// quiet is how long a test watches for something that should not happen.
const quiet = 500 * time.Millisecond

// proc is the hostile program running over real pipes, in a process group
// of its own (so that it and its grandchild die together at cleanup).
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	pgid    int
	stdin   *os.File      // the write end of its stdin
	lines   chan []byte   // its stdout, a line at a time; closed at EOF
	exited  chan struct{} // closed once it has exited and been reaped
	waitErr error         // its exit, once exited is closed
	stop    func()        // kills the group and waits for the readers
}

// start runs the hostile program with args.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	bin := hostile.Binary(t)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		t.Fatalf("starting %s: %v", bin, err)
	}
	p := &proc{t: t, cmd: cmd, pgid: cmd.Process.Pid, stdin: inW, lines: make(chan []byte), exited: make(chan struct{})}
	quit := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(p.lines)
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case p.lines <- bytes.TrimRight(line, "\r\n"):
				case <-quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			syscall.Kill(-p.pgid, syscall.SIGKILL)
			<-p.exited
			close(quit)
			inW.Close()
			outR.Close()
			<-readerDone
		})
	}
	t.Cleanup(p.stop)
	return p
}

// send writes one line to the program's stdin.
func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := p.stdin.Write([]byte(line + "\n")); err != nil {
		p.t.Fatalf("writing %q: %v", line, err)
	}
}

// next returns the program's next line of output.
func (p *proc) next() []byte {
	p.t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("the program's stdout ended")
		}
		return line
	case <-timer.C:
		p.t.Fatalf("no line from the program within %s", waitFor)
	}
	return nil
}

// msg is a JSON-RPC message as the tests read it.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw []byte
}

// nextMsg returns the program's next line as a message.
func (p *proc) nextMsg() msg {
	p.t.Helper()
	return decode(p.t, p.next())
}

func decode(t *testing.T, line []byte) msg {
	t.Helper()
	var m msg
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line %.200q: %v", line, err)
	}
	m.raw = line
	return m
}

// answer sends a request and returns the answer to it.
func (p *proc) answer(id int, method, params string) msg {
	p.t.Helper()
	p.send(request(id, method, params))
	m := p.nextMsg()
	if string(m.ID) != fmt.Sprint(id) || m.Method != nil {
		p.t.Fatalf("got %.300s, want the answer to %s (id %d)", m.raw, method, id)
	}
	return m
}

// waitExit returns the program's exit once it has exited.
func (p *proc) waitExit() error {
	p.t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.waitErr
	case <-timer.C:
		p.t.Fatalf("the program did not exit within %s", waitFor)
	}
	return nil
}

// stillRunning fails if the program exits within quiet.
func (p *proc) stillRunning(why string) {
	p.t.Helper()
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	select {
	case <-p.exited:
		p.t.Fatalf("the program exited (%v) %s", p.waitErr, why)
	case <-timer.C:
	}
}

func request(id int, method, params string) string {
	if params == "" {
		params = "{}"
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

const initParams = `{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"test","version":"1"}}`

// waitGone waits for pid to be no longer Alive (dead, or a zombie): a
// killed process's state changes a little after its pipes close.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for procs.Alive(pid) {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("process %d still alive %s after its kill", pid, waitFor)
		}
	}
}
