package wire_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpl-go/mcpl/internal/transport"
	"github.com/mcpl-go/mcpl/internal/wire"
)

// halfStream is a stream whose far end can stop writing (the peer reads
// EOF) while it still reads what this side writes, as a process that
// closed its stdout but reads its stdin.
type halfStream struct {
	in      chan []byte
	eof     chan struct{}
	out     chan string
	mu      sync.Mutex
	closed  bool
	closeCh chan struct{}
}

func newHalfStream() *halfStream {
	return &halfStream{in: make(chan []byte, 8), eof: make(chan struct{}), out: make(chan string, 8), closeCh: make(chan struct{})}
}

func (s *halfStream) Read() ([]byte, error) {
	select {
	case m := <-s.in:
		return m, nil
	case <-s.eof:
		return nil, io.EOF
	case <-s.closeCh:
		return nil, transport.ErrClosed
	}
}

func (s *halfStream) Write(_ context.Context, msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return transport.ErrClosed
	}
	s.out <- string(msg)
	return nil
}

func (s *halfStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.closeCh)
	}
	return nil
}

func (s *halfStream) CloseInfo() transport.CloseInfo { return transport.CloseInfo{} }

func (s *halfStream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// TestOwedAnswersAfterTheOtherSideEnds: when the other side ends the
// connection, an answer a handler deferred still goes out if it comes
// within the grace, and the stream closes then; one never given holds the
// stream open for the grace (1s) and no longer.
func TestOwedAnswersAfterTheOtherSideEnds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answerIn time.Duration // 0: never
		written  bool
	}{
		{"answered after the end", 300 * time.Millisecond, true},
		{"never answered", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newHalfStream()
				release := make(chan struct{})
				p := wire.NewPeer(s, wire.Options{Logger: slog.New(slog.DiscardHandler),
					Handler: wire.HandlerFunc(func(ctx context.Context, req *wire.Request) (any, error) {
						reply := req.Defer()
						go func() {
							<-release
							if tc.answerIn > 0 {
								time.Sleep(tc.answerIn)
								reply("late", nil)
							}
						}()
						return nil, nil
					})})
				s.in <- []byte(`{"jsonrpc":"2.0","id":1,"method":"work"}`)
				synctest.Wait()
				start := time.Now()
				close(s.eof)
				close(release)
				<-p.Done()
				waited := time.Since(start)
				var got []string
				for len(s.out) > 0 {
					got = append(got, <-s.out)
				}
				if tc.written {
					if len(got) != 1 || !strings.Contains(got[0], `"result":"late"`) || waited != tc.answerIn {
						t.Errorf("wrote %q after %s; want the late answer, the stream closed as it went", got, waited)
					}
				} else if len(got) != 0 || waited != time.Second {
					t.Errorf("wrote %q, closed after %s; want nothing, closed after the 1s grace", got, waited)
				}
				if !s.isClosed() {
					t.Error("the stream was left open")
				}
			})
		})
	}
}
