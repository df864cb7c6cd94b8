package lograte

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var dropped = &Kind{
	Msg:     "inbound queue full; notification dropped",
	Summary: "dropped %s notifications%s in %s: the inbound queue was full",
}

// logBuf is a log destination safe to read while timers write to it.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func lines(b *logBuf) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// A million repeats within a window make two lines: the first in full, and
// one summary at the window's end.
func TestManyRepeatsTwoLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf logBuf
		l := New(slog.New(slog.NewTextHandler(&buf, nil)), "x")
		for range 1_000_000 {
			l.Log(dropped, "method", "notifications/x")
		}
		if got := lines(&buf); len(got) != 1 || !strings.Contains(got[0], `msg="inbound queue full; notification dropped"`) {
			t.Fatalf("before the window ends: %q", got)
		}
		time.Sleep(Window)
		synctest.Wait()
		got := lines(&buf)
		if len(got) != 2 {
			t.Fatalf("lines = %q, want 2", got)
		}
		want := `dropped 999,999 notifications from server \"x\" in the last 10 s: the inbound queue was full`
		if !strings.Contains(got[1], want) || !strings.Contains(got[1], "count=999999") {
			t.Fatalf("summary = %q, want it to hold %q", got[1], want)
		}
		l.Close()
		if got := lines(&buf); len(got) != 2 {
			t.Fatalf("Close logged again with nothing counted: %q", got)
		}
	})
}

// After a quiet window the next occurrence is logged in full again, and
// Close summarises what is still counted with the time it covers.
func TestNewWindowAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf logBuf
		l := New(slog.New(slog.NewTextHandler(&buf, nil)), "")
		l.Log(dropped)
		time.Sleep(Window + time.Second)
		l.Log(dropped)
		l.Log(dropped)
		l.Log(dropped)
		time.Sleep(3 * time.Second)
		l.Close()
		got := lines(&buf)
		if len(got) != 3 {
			t.Fatalf("lines = %q, want 3", got)
		}
		if !strings.Contains(got[1], "notification dropped") {
			t.Errorf("second window's first line = %q", got[1])
		}
		if want := `dropped 2 notifications in the last 3 s`; !strings.Contains(got[2], want) {
			t.Errorf("close summary = %q, want %q", got[2], want)
		}
		l.Log(dropped)
		if len(lines(&buf)) != 3 {
			t.Errorf("a Log after Close wrote a line")
		}
	})
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 12345: "12,345", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// LogFor counts each key apart: each key's first occurrence is logged,
// and its summary names the key.
func TestLogForKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf logBuf
		k := &Kind{Msg: "privileged request refused", Summary: "refused %s privileged requests%s in %s", KeyAttr: "method"}
		l := New(slog.New(slog.NewTextHandler(&buf, nil)), "x")
		for range 3 {
			l.LogFor(k, "push/event")
			l.LogFor(k, "channels/register")
		}
		if got := lines(&buf); len(got) != 2 || !strings.Contains(got[0], "privileged request refused") || !strings.Contains(got[1], "privileged request refused") {
			t.Fatalf("first occurrences: %q", got)
		}
		l.Close()
		got := strings.Join(lines(&buf), "\n")
		for _, want := range []string{"count=2 method=push/event", "count=2 method=channels/register"} {
			if !strings.Contains(got, want) {
				t.Errorf("summaries lack %q:\n%s", want, got)
			}
		}
	})
}

// Close waits for a window-end summary a timer is logging: nothing is
// logged after Close returns.
func TestCloseWaitsForSummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		writing, release := make(chan struct{}), make(chan struct{})
		var buf logBuf
		h := slog.NewTextHandler(&gate{w: &buf, writing: writing, release: release}, nil)
		l := New(slog.New(h), "x")
		l.Log(dropped) // logged at once: the gate lets the first line through
		l.Log(dropped)
		time.Sleep(Window) // the summary's timer fires and blocks in the gate
		<-writing
		closed := make(chan struct{})
		go func() { l.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a summary was being logged")
		default:
		}
		close(release)
		<-closed
		if got := lines(&buf); len(got) != 2 {
			t.Fatalf("lines = %q, want the first and the summary", got)
		}
	})
}

// gate passes the first write, then blocks the second until released,
// saying when it is there.
type gate struct {
	w       *logBuf
	n       int
	writing chan struct{}
	release chan struct{}
}

func (g *gate) Write(p []byte) (int, error) {
	g.n++
	if g.n == 2 {
		close(g.writing)
		<-g.release
	}
	return g.w.Write(p)
}
