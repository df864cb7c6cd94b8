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

// blockedStream's writes wait for their context, as a write waiting its
// turn behind a stuck one does, and fail with its error.
type blockedStream struct{ *halfStream }

func (s blockedStream) Write(ctx context.Context, _ []byte) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestNotWrittenInTime: a request whose caller gives up, or whose deadline
// passes, before it is written was not sent, and says why; not "the
// transport refused it".
func TestNotWrittenInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		p := wire.NewPeer(blockedStream{newHalfStream()}, wire.Options{Name: "discord", Logger: rec.Logger()})
		defer p.Close()
		err := p.Call(context.Background(), "tools/call", nil, nil, wire.WithTimeout(2*time.Second))
		ce := callError(t, err, wire.NotSent, wire.CauseDeadline)
		checkText(t, ce, `tools/call to "discord" not sent: not written within 2s`)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { synctest.Wait(); cancel() }()
		err = p.Call(ctx, "tools/call", nil, nil)
		ce = callError(t, err, wire.NotSent, wire.CauseCanceled)
		checkText(t, ce, `tools/call to "discord" not sent: abandoned by its caller before it was written`)
		if n := len(rec.Find("request not written: the transport refused it")); n != 0 {
			t.Errorf("logged %d times as refused by the transport", n)
		}
	})
}

// TestSync: Sync returns once everything received before it has been
// handed to the handler, and at once on a connection that has ended.
func TestSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHalfStream()
		release := make(chan struct{})
		var mu sync.Mutex
		var handled []string
		p := wire.NewPeer(s, wire.Options{Logger: slog.New(slog.DiscardHandler),
			Handler: wire.HandlerFunc(func(_ context.Context, req *wire.Request) (any, error) {
				if req.Method == "slow" {
					<-release
				}
				mu.Lock()
				handled = append(handled, req.Method)
				mu.Unlock()
				return nil, nil
			})})
		s.in <- []byte(`{"jsonrpc":"2.0","method":"slow"}`)
		s.in <- []byte(`{"jsonrpc":"2.0","method":"next"}`)
		synctest.Wait() // both are read; slow is in the handler
		synced := make(chan error, 1)
		go func() { synced <- p.Sync(context.Background()) }()
		synctest.Wait()
		select {
		case <-synced:
			t.Fatal("Sync returned before what came before it was handled")
		default:
		}
		close(release)
		if err := <-synced; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(handled) != 2 {
			t.Errorf("handled %v when Sync returned, want both", handled)
		}
		mu.Unlock()
		p.Close()
		if err := p.Sync(context.Background()); err != nil {
			t.Errorf("Sync on a closed connection = %v", err)
		}
	})
}

// TestCloseEndsTheOwedGrace: this side's Close does not wait out the grace
// for answers owed on a connection the other side ended.
func TestCloseEndsTheOwedGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHalfStream()
		p := wire.NewPeer(s, wire.Options{Logger: slog.New(slog.DiscardHandler),
			Handler: wire.HandlerFunc(func(_ context.Context, req *wire.Request) (any, error) {
				req.Defer() // never answered
				return nil, nil
			})})
		s.in <- []byte(`{"jsonrpc":"2.0","id":1,"method":"work"}`)
		synctest.Wait()
		close(s.eof)
		synctest.Wait()
		start := time.Now()
		p.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close waited %s for an answer that was never coming", d)
		}
	})
}
